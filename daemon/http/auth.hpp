// Who may use the dashboard: HTTP Basic authentication against the auth
// file's users, slowed down for an address or a user that keeps guessing,
// and the checks an action (a POST) passes besides: its own origin and the
// CSRF token the page got from /api/session.
#pragma once

#include <microhttpd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace fenceq::daemon::http {

inline constexpr const char* kCsrfHeader = "X-Fenceq-Csrf";

// The user and password of an `Authorization: Basic ...` header (the scheme
// in any case, RFC 7617), nullopt when there is none; throws
// std::invalid_argument when it is not well-formed (not base64, no colon, a
// NUL byte in either part).
std::optional<std::pair<std::string, std::string>> basic_credentials(const char* header);

// Failed logins by key (an address, a known user): the first kFreeFailures
// cost nothing; each later one makes the key wait twice as long as the last
// before it may try again (1 s, 2 s, ... up to kMaxWait); a success, or
// kForget without a failure, starts it over. At most kMaxKeys keys are
// kept: beyond, new addresses share one key. A user's wait applies only to
// addresses that failed lately (Auth::authenticate): it never locks out an
// owner who has not failed. The HTTP thread's alone.
class LoginThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr unsigned kFreeFailures = 5;
  static constexpr std::chrono::seconds kMaxWait{60};
  static constexpr std::chrono::minutes kForget{15};
  static constexpr std::size_t kMaxKeys = 10000;

  // How long `key` must still wait before it may try again (zero: it may now).
  Clock::duration wait(const std::string& key, Clock::time_point now) const;
  void failed(const std::string& key, Clock::time_point now);
  // Whether `key` failed within kForget (and has not succeeded since).
  bool failed_lately(const std::string& key, Clock::time_point now) const;
  void succeeded(const std::string& key) { keys_.erase(key); }
  // The key an address is counted under (its own, or the shared one when full).
  std::string address_key(const std::string& address, Clock::time_point now);

 private:
  struct Entry {
    unsigned failures = 0;
    Clock::time_point until{}, last{};
  };
  void forget_old(Clock::time_point now);
  std::unordered_map<std::string, Entry> keys_;
};

// The outcome of a request's login.
struct Login {
  enum class Is { missing, refused, throttled, user } is = Is::missing;
  std::string user;  // Is::user: who
  std::chrono::seconds retry_after{0};  // Is::throttled: when to try again
};

class Auth {
 public:
  // The users of `file` (load_auth_file, http_server.hpp), each with a CSRF
  // token of 32 hex digits for this run; none without a file. Throws
  // std::runtime_error as load_auth_file does, or when there are no random bytes.
  explicit Auth(const std::optional<std::string>& file);

  // Whether there is a dashboard at all (an auth file was given).
  bool enabled() const { return !users_.empty(); }
  std::size_t user_count() const { return users_.size(); }

  // The request's login (HTTP Basic): missing (no credentials), refused
  // (wrong ones, counted and logged at most every kLogEvery), throttled (its
  // address waits after too many failures, or it failed lately and its user
  // waits: the password is not even looked at), or the user. The comparison takes the same time whatever the
  // user name. The HTTP thread's alone.
  Login authenticate(MHD_Connection* c);

  // The CSRF token of a user authenticate() returned.
  const std::string& token(const std::string& user) const { return tokens_.at(user); }

  // The Set-Cookie value that marks a browser as one where `user` logged in
  // (given with /api/session): an HttpOnly cookie of a random token a user,
  // for this run. A request that carries it with that user's name is never
  // throttled (its password is compared; a wrong one is counted as any), so
  // a guesser behind the same address as the owner (a reverse proxy, an SSH
  // tunnel: every client is 127.0.0.1) cannot lock out a browser that has
  // logged in before; it cannot get one without the password.
  std::string device_cookie(const std::string& user) const;
  static constexpr const char* kDeviceCookie = "fenceq_device";

  // Why a POST of `user` is not from this dashboard's own page (another
  // origin, a cross-site fetch, no valid token), or none when it is.
  std::optional<std::string> refuse_action(MHD_Connection* c, const std::string& user) const;

  // Prometheus lines of the login counters (any thread).
  std::string metrics_text() const;

  static constexpr std::chrono::seconds kLogEvery{10};

 private:
  Login refused(const std::string& user, const std::string& address, LoginThrottle::Clock::time_point now);

  std::map<std::string, std::string> users_;   // user -> password
  std::map<std::string, std::string> tokens_;  // user -> CSRF token
  std::map<std::string, std::string> devices_;  // user -> device token (device_cookie)
  LoginThrottle throttle_;
  std::atomic<std::uint64_t> failures_{0}, throttled_{0};
  std::uint64_t unlogged_ = 0;  // failures since the last line about them
  LoginThrottle::Clock::time_point last_log_{};
};

}  // namespace fenceq::daemon::http
