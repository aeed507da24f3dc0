// The operators' dashboard (docs/dashboard.md), as fenceqd serves it: the files in
// web/, embedded at build time by embed.cmake, which generates the
// definitions. Each is static storage.
#pragma once

#include <string_view>

namespace fenceq::daemon::http {

std::string_view dashboard_page();    // dashboard.html, at /
std::string_view dashboard_style();   // dashboard.css, at /dashboard.css
std::string_view dashboard_script();  // dashboard.js, at /dashboard.js

}  // namespace fenceq::daemon::http
