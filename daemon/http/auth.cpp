#include "http/auth.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "http/http_server.hpp"
#include "http/respond.hpp"
#include "base/logging.hpp"

namespace fenceq::daemon {
namespace http {
namespace {

std::string random_token() {
  unsigned char raw[16];
  std::size_t got = 0;
  while (got < sizeof raw) {
    const auto n = ::getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0) throw std::runtime_error("cannot read random bytes for the dashboard's tokens");
    got += static_cast<std::size_t>(n);
  }
  return hex(std::string_view(reinterpret_cast<const char*>(raw), sizeof raw));
}

// Equal strings, in a time that does not depend on where they differ.
bool same(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

// Passwords: readable by the daemon's user alone, or by its own group too
// (0640 with the group fenceqd runs as); never by others, never writable but
// by its owner. Checked on the descriptor the file is then read from (no
// window between the check and the read); throws when the file breaks that
// rule, and returns its text.
std::string read_private_file(const std::string& path) {
  auto fail = [&](const std::string& why) {
    return std::runtime_error("--http-auth-file " + path + ": " + why);
  };
  // O_NONBLOCK: a FIFO put there is refused below, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw fail(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw fail("not a file");
  const auto mode = st.st_mode & 07777;
  const bool others = (mode & 0007) != 0;
  const bool group_writes = (mode & 0020) != 0;
  const bool group_reads = (mode & 0040) != 0;
  if (others || group_writes || (group_reads && st.st_gid != ::getegid()) ||
      st.st_uid != ::geteuid()) {
    char m[8];
    std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(mode));
    throw std::runtime_error("--http-auth-file " + path + " (mode " + m +
                             ") must belong to fenceqd's user and be readable by it alone "
                             "(chmod 0600), or by its own group too (0640); it holds passwords");
  }
  constexpr std::size_t kMaxBytes = 1 << 20;
  std::string text;
  char buf[4096];
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw fail(std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxBytes) throw fail("larger than 1 MiB");
  }
  return text;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with its padding; nullopt when `s` is not that.
std::optional<std::string> base64_decode(std::string_view s) {
  if (s.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 4) {
    const bool last = i + 4 == s.size();
    const int pad = last ? (s[i + 3] == '=') + (s[i + 2] == '=' && s[i + 3] == '=') : 0;
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const int d = k >= 4 - pad ? 0 : base64_value(s[i + static_cast<std::size_t>(k)]);
      if (d < 0) return std::nullopt;
      v = v << 6 | static_cast<std::uint32_t>(d);
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>(v >> 8 & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

// The client's address, for the log and the throttle ("?" when unknown).
std::string client_address(MHD_Connection* c) {
  const auto* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!info || !info->client_addr) return "?";
  char buf[INET6_ADDRSTRLEN] = "?";
  const sockaddr* a = info->client_addr;
  if (a->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
  } else if (a->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

}  // namespace

std::optional<std::pair<std::string, std::string>> basic_credentials(const char* header) {
  if (!header) return std::nullopt;
  std::string_view h(header);
  auto trim = [](std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
  };
  h = trim(h);
  const auto space = h.find_first_of(" \t");
  const std::string_view scheme = h.substr(0, space);
  auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
  if (scheme.size() != 5 || !std::equal(scheme.begin(), scheme.end(), "basic",
                                        [&](char a, char b) { return lower(a) == b; })) {
    return std::nullopt;  // another scheme: no Basic credentials
  }
  const auto decoded = base64_decode(space == std::string_view::npos ? "" : trim(h.substr(space)));
  if (!decoded) throw std::invalid_argument("credentials are not base64");
  const auto colon = decoded->find(':');
  if (colon == std::string::npos) throw std::invalid_argument("credentials without a colon");
  if (decoded->find('\0') != std::string::npos) throw std::invalid_argument("a NUL byte");
  return std::make_pair(decoded->substr(0, colon), decoded->substr(colon + 1));
}

LoginThrottle::Clock::duration LoginThrottle::wait(const std::string& key,
                                                   Clock::time_point now) const {
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.until <= now) return Clock::duration::zero();
  return it->second.until - now;
}

bool LoginThrottle::failed_lately(const std::string& key, Clock::time_point now) const {
  auto it = keys_.find(key);
  return it != keys_.end() && it->second.failures > 0 && now - it->second.last < kForget;
}

void LoginThrottle::failed(const std::string& key, Clock::time_point now) {
  forget_old(now);
  Entry& e = keys_[key];
  if (e.failures > 0 && now - e.last >= kForget) e = Entry{};
  ++e.failures;
  e.last = now;
  if (e.failures > kFreeFailures) {
    const unsigned doubling = std::min(e.failures - kFreeFailures - 1, 6u);
    e.until = now + std::min<Clock::duration>(std::chrono::seconds(1u << doubling), kMaxWait);
  }
}

std::string LoginThrottle::address_key(const std::string& address, Clock::time_point now) {
  std::string key = "address " + address;
  if (keys_.count(key) || keys_.size() < kMaxKeys) return key;
  forget_old(now);
  return keys_.size() < kMaxKeys ? key : std::string("address (others)");
}

void LoginThrottle::forget_old(Clock::time_point now) {
  if (keys_.size() < kMaxKeys) return;
  for (auto it = keys_.begin(); it != keys_.end();) {
    it = now - it->second.last >= kForget && it->second.until <= now ? keys_.erase(it) : std::next(it);
  }
}

Auth::Auth(const std::optional<std::string>& file) {
  if (!file) return;
  users_ = load_auth_file(*file);
  for (const auto& [user, password] : users_) {
    tokens_[user] = random_token();
    devices_[user] = random_token();
  }
}

std::string Auth::device_cookie(const std::string& user) const {
  return std::string(kDeviceCookie) + "=" + devices_.at(user) +
         "; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000";
}

Login Auth::authenticate(MHD_Connection* c) {
  const auto now = LoginThrottle::Clock::now();
  const std::string address = client_address(c);
  std::optional<std::pair<std::string, std::string>> creds;
  try {
    creds = basic_credentials(header(c, "Authorization"));
  } catch (const std::invalid_argument&) {
    return refused("", address, now);
  }
  if (!creds) return {};  // a browser's first request: asked for them, not counted
  const auto& [user, password] = *creds;
  auto it = users_.find(user);
  // Keys: the address, and the user when it is one (so unknown names add nothing).
  const std::string by_address = throttle_.address_key(address, now);
  const std::string by_user = it != users_.end() ? "user " + user : std::string();
  // An address waits after its own failures. A user's wait (failures from
  // any address) holds back only addresses that failed lately themselves:
  // guessers, many addresses or one, are slowed, and the user's owner, from
  // an address that has not failed, still logs in (300 wrong passwords
  // once locked the right one out too).
  auto wait = throttle_.wait(by_address, now);
  if (!by_user.empty() && throttle_.failed_lately(by_address, now)) {
    wait = std::max(wait, throttle_.wait(by_user, now));
  }
  // A browser where this user logged in before (Auth::device_cookie) is not held back.
  const char* device = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, kDeviceCookie);
  const bool known_device = device && it != users_.end() && same(devices_.at(user), device);
  if (known_device) wait = LoginThrottle::Clock::duration::zero();
  if (wait > LoginThrottle::Clock::duration::zero()) {
    throttled_.fetch_add(1, std::memory_order_relaxed);
    Login l;
    l.is = Login::Is::throttled;
    l.retry_after = std::chrono::ceil<std::chrono::seconds>(wait);
    return l;
  }
  // Compared whatever the user, so the time says nothing about the name.
  const std::string expected = it != users_.end() ? it->second : std::string(64, '\0');
  if (!same(expected, password) || it == users_.end()) return refused(user, address, now);
  // A success starts the waits over, but not one let through by its cookie:
  // its address may be a guesser's too (each of the page's requests is a
  // login, and would hand the guesser 5 free tries every time).
  if (!known_device) {
    throttle_.succeeded(by_address);
    if (!by_user.empty()) throttle_.succeeded(by_user);
  }
  Login l;
  l.is = Login::Is::user;
  l.user = user;
  return l;
}

Login Auth::refused(const std::string& user, const std::string& address,
                    LoginThrottle::Clock::time_point now) {
  throttle_.failed(throttle_.address_key(address, now), now);
  if (users_.count(user)) throttle_.failed("user " + user, now);
  failures_.fetch_add(1, std::memory_order_relaxed);
  ++unlogged_;
  if (last_log_ == LoginThrottle::Clock::time_point{} || now - last_log_ >= kLogEvery) {
    spdlog::warn("dashboard: {} failed login(s) since the last such line; the latest as {} from {}",
                 unlogged_, client_text(user), address);
    unlogged_ = 0;
    last_log_ = now;
  }
  Login l;
  l.is = Login::Is::refused;
  return l;
}

std::string Auth::metrics_text() const {
  return "# HELP fenceq_http_login_failures_total Dashboard logins refused for a wrong user or "
         "password.\n# TYPE fenceq_http_login_failures_total counter\n"
         "fenceq_http_login_failures_total " +
         std::to_string(failures_.load(std::memory_order_relaxed)) +
         "\n# HELP fenceq_http_login_throttled_total Dashboard logins answered 429: their address "
         "or user waits after repeated failures.\n# TYPE fenceq_http_login_throttled_total "
         "counter\nfenceq_http_login_throttled_total " +
         std::to_string(throttled_.load(std::memory_order_relaxed)) + "\n";
}

std::optional<std::string> Auth::refuse_action(MHD_Connection* c, const std::string& user) const {
  // The Origin's host and port must be the ones the request was sent to
  // (its scheme may differ: a reverse proxy may terminate TLS in front).
  const char* origin = header(c, "Origin");
  const char* host = header(c, "Host");
  if (origin) {
    std::string_view o(origin);
    const auto scheme = o.find("://");
    if (scheme != std::string_view::npos) o.remove_prefix(scheme + 3);
    if (!host || o != host) return "a request from another origin (" + client_text(origin) + ")";
  }
  const char* site = header(c, "Sec-Fetch-Site");
  if (site && std::strcmp(site, "same-origin") != 0 && std::strcmp(site, "none") != 0) {
    return "a " + client_text(site) + " request";
  }
  const char* token = header(c, kCsrfHeader);
  auto it = tokens_.find(user);
  if (!token || it == tokens_.end() || !same(it->second, token)) {
    return std::string("no valid ") + kCsrfHeader + " header (reload the dashboard)";
  }
  return std::nullopt;
}

}  // namespace http

std::map<std::string, std::string> load_auth_file(const std::string& path) {
  const std::string text = http::read_private_file(path);
  std::map<std::string, std::string> users;
  std::map<std::string, int> first_line;
  int n = 0;
  auto fail = [&](const std::string& why) {
    return std::runtime_error("--http-auth-file " + path + " line " + std::to_string(n) + ": " + why);
  };
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    if (line.find('\0') != std::string::npos) throw fail("a NUL byte");
    const auto colon = line.find(':');
    if (colon == 0 || colon == std::string::npos || colon + 1 == line.size()) {
      throw fail("expected user:password");
    }
    const std::string user = line.substr(0, colon);
    if (auto [it, fresh] = first_line.emplace(user, n); !fresh) {
      throw fail("user " + client_text(user) + " again (first on line " + std::to_string(it->second) + ")");
    }
    users[user] = line.substr(colon + 1);
  }
  if (users.empty()) throw std::runtime_error("--http-auth-file " + path + ": no user:password line");
  return users;
}

}  // namespace fenceq::daemon
