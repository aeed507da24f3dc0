// A client of fenceqd's HTTP listener for the tests (test_dashboard.cpp,
// test_abuse.cpp): requests with HTTP Basic credentials over a real socket,
// and a daemon serving the dashboard for "ops:secret".
#pragma once

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "probe.hpp"

namespace fenceq::test {

// "user:password" in base64, for an Authorization header.
inline std::string basic(const std::string& user_password) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  const auto& s = user_password;
  for (; i + 2 < s.size(); i += 3) {
    const unsigned n = (static_cast<unsigned char>(s[i]) << 16) |
                       (static_cast<unsigned char>(s[i + 1]) << 8) |
                       static_cast<unsigned char>(s[i + 2]);
    out += {k[n >> 18], k[(n >> 12) & 63], k[(n >> 6) & 63], k[n & 63]};
  }
  if (i + 1 == s.size()) {
    const unsigned n = static_cast<unsigned char>(s[i]) << 16;
    out += {k[n >> 18], k[(n >> 12) & 63], '=', '='};
  } else if (i + 2 == s.size()) {
    const unsigned n = (static_cast<unsigned char>(s[i]) << 16) |
                       (static_cast<unsigned char>(s[i + 1]) << 8);
    out += {k[n >> 18], k[(n >> 12) & 63], k[(n >> 6) & 63], '='};
  }
  return out;
}

// An auth file in `dir` with mode `mode`.
inline std::string auth_file(const TempDir& dir, const std::string& text, mode_t mode = 0600,
                      const std::string& name = "users") {
  const auto path = dir.file(name);
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

struct Http {
  int port;
  std::string auth;  // "user:password", or "" for none
  struct Reply {
    int status = -1;
    std::string head, body;
    nlohmann::json data() const { return nlohmann::json::parse(body); }
  };
  Reply send(const std::string& method, const std::string& target,
             const std::vector<std::string>& headers = {}) const {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" +
                      std::to_string(port) + "\r\nConnection: close\r\n";
    if (!auth.empty()) req += "Authorization: Basic " + basic(auth) + "\r\n";
    for (const auto& h : headers) req += h + "\r\n";
    req += "\r\n";
    Reply r;
    r.status = http_request(port, req, std::chrono::milliseconds(8000), &r.body, &r.head);
    return r;
  }
  Reply get(const std::string& target) const { return send("GET", target); }
};

// A daemon serving HTTP with the dashboard for "ops:secret" (and more args).
struct Dashboard {
  TempDir dir;
  std::unique_ptr<Daemon> d;
  int port = -1;
  explicit Dashboard(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--clock", "server", "--http-listen", "127.0.0.1:0",
                                  "--http-auth-file", auth_file(dir, "ops:secret\n# a comment\n")};
    args.insert(args.end(), extra.begin(), extra.end());
    d = std::make_unique<Daemon>(dir, args);
    port = http_port(*d);
    REQUIRE(port > 0);
  }
  Http as(const std::string& who = "ops:secret") const { return Http{port, who}; }
  std::string csrf() const {
    auto r = as().get("/api/session");
    REQUIRE(r.status == 200);
    return r.data()["result"]["csrf"].get<std::string>();
  }
};

inline std::string csrf_header(const std::string& token) { return "X-Fenceq-Csrf: " + token; }

// Enqueues `id` with `o` and one attempt, and `owner` claims and fails it: dead.
inline void dead_job(Client& c, const std::string& id, fenceq::EnqueueOptions o,
              const std::string& owner, const std::string& error) {
  o.max_attempts = 1;
  REQUIRE(c.enqueue(id, o));
  REQUIRE(c.claim(id, owner, 30) == 1);
  REQUIRE(c.fail(id, owner, 1, error));
  REQUIRE(fenceq::test::listed(c, id).status == fenceq::JobStatus::dead);
}

}  // namespace fenceq::test
