// Who may use the dashboard: HTTP Basic authentication against the auth
// file's users, and the checks an action (a POST) passes besides: its own
// origin and the CSRF token the page got from /api/session.
#pragma once

#include <microhttpd.h>

#include <map>
#include <optional>
#include <string>

namespace fenceq::daemon::http {

inline constexpr const char* kCsrfHeader = "X-Fenceq-Csrf";

class Auth {
 public:
  // The users of `file` (load_auth_file, http_server.hpp), each with a CSRF
  // token of 32 hex digits for this run; none without a file. Throws
  // std::runtime_error as load_auth_file does, or when there are no random bytes.
  explicit Auth(const std::optional<std::string>& file);

  // Whether there is a dashboard at all (an auth file was given).
  bool enabled() const { return !users_.empty(); }
  std::size_t user_count() const { return users_.size(); }

  // The user the request authenticates as (HTTP Basic), or "". Takes the same
  // time whatever the user name.
  std::string authenticate(MHD_Connection* c) const;

  // The CSRF token of a user authenticate() returned.
  const std::string& token(const std::string& user) const { return tokens_.at(user); }

  // Why a POST of `user` is not from this dashboard's own page (another
  // origin, a cross-site fetch, no valid token), or none when it is.
  std::optional<std::string> refuse_action(MHD_Connection* c, const std::string& user) const;

 private:
  std::map<std::string, std::string> users_;   // user -> password
  std::map<std::string, std::string> tokens_;  // user -> CSRF token
};

}  // namespace fenceq::daemon::http
