// The operators' dashboard page (issue 19), as fenceqd serves it at /: the
// files in web/ (dashboard.html with dashboard.css and dashboard.js inline),
// embedded at build time by embed.cmake, which generates the definition.
#pragma once

#include <string_view>

namespace fenceq::daemon::http {

// The whole page, HTML with its style and script inline; static storage.
std::string_view dashboard_page();

}  // namespace fenceq::daemon::http
