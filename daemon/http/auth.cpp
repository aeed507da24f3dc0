#include "http/auth.hpp"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string_view>

#include "http/http_server.hpp"
#include "http/respond.hpp"

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
// by its owner. Throws when the file breaks that rule.
void check_mode(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    throw std::runtime_error("--http-auth-file " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw std::runtime_error("--http-auth-file " + path + ": not a file");
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
}

}  // namespace

Auth::Auth(const std::optional<std::string>& file) {
  if (!file) return;
  users_ = load_auth_file(*file);
  for (const auto& [user, password] : users_) tokens_[user] = random_token();
}

std::string Auth::authenticate(MHD_Connection* c) const {
  char* password = nullptr;
  char* user = MHD_basic_auth_get_username_password(c, &password);
  std::string who;
  if (user && password) {
    auto it = users_.find(user);
    // Compared whatever the user, so the time says nothing about the name.
    const std::string expected = it != users_.end() ? it->second : std::string(64, '\0');
    if (same(expected, password) && it != users_.end()) who = user;
  }
  if (user) MHD_free(user);
  if (password) MHD_free(password);
  return who;
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
    if (!host || o != host) return std::string("a request from another origin (") + origin + ")";
  }
  const char* site = header(c, "Sec-Fetch-Site");
  if (site && std::strcmp(site, "same-origin") != 0 && std::strcmp(site, "none") != 0) {
    return std::string("a ") + site + " request";
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
  http::check_mode(path);
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--http-auth-file " + path + ": cannot read it");
  std::map<std::string, std::string> users;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    const auto colon = line.find(':');
    if (colon == 0 || colon == std::string::npos || colon + 1 == line.size()) {
      throw std::runtime_error("--http-auth-file " + path + " line " + std::to_string(n) +
                               ": expected user:password");
    }
    users[line.substr(0, colon)] = line.substr(colon + 1);
  }
  if (users.empty()) throw std::runtime_error("--http-auth-file " + path + ": no user:password line");
  return users;
}

}  // namespace fenceq::daemon
