// Answers to an HTTP request (libmicrohttpd), and what a request carries.
#pragma once

#include <microhttpd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

namespace fenceq::daemon::http {

using json = nlohmann::json;

inline constexpr const char* kPlainText = "text/plain; charset=utf-8";
inline constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

// A refusal of an API request, as its JSON error: thrown by a route's
// handler, answered by the dispatcher (routes.cpp) with `status` and
// {"ok": false, "error": {"code": code, "message": what()}}.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string code, const std::string& message)
      : std::runtime_error(message), status_(status), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string code_;
};

// JSON text; bytes that are not UTF-8 (a user name from the auth file, a row
// written into the database by hand) become U+FFFD instead of an exception.
// Lower-case hexadecimal, two digits a byte.
std::string hex(std::string_view bytes);

std::string text(const json& j);

// {"ok": false, "error": {"code": ..., "message": ...}} as text, with a newline.
std::string error_body(const std::string& code, const std::string& message);

// Queues `body` with `status`; `dashboard` adds the headers of job data (never
// cached, never framed, no script but the page's own); `close` closes the
// connection after it (a scrape: no idle connection kept for it). MHD_NO
// when out of memory.
MHD_Result reply(MHD_Connection* c, int status, const std::string& body,
                 const char* type = kPlainText, bool dashboard = false, bool close = false,
                 const char* set_cookie = nullptr);
MHD_Result reply_json(MHD_Connection* c, int status, const json& body,
                      const char* set_cookie = nullptr);
MHD_Result api_error(MHD_Connection* c, int status, const std::string& code,
                     const std::string& message);
// 405 as text, for a path that exists but not with this method.
MHD_Result method_not_allowed(MHD_Connection* c);
// 401 with the Basic challenge of realm "fenceq".
MHD_Result unauthorized(MHD_Connection* c);

// 429 with Retry-After: a login tried again too soon after repeated failures.
MHD_Result too_many_logins(MHD_Connection* c, std::chrono::seconds retry_after);

// A request header, or nullptr.
const char* header(MHD_Connection* c, const char* name);
// A query-string argument, or none.
std::optional<std::string> arg(MHD_Connection* c, const char* name);

}  // namespace fenceq::daemon::http
