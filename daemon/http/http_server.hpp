// The HTTP listener (--http-listen HOST:PORT, loopback only; --metrics-listen
// is its old name): GET /metrics and /healthz for everyone who can reach the
// port, and, only with --http-auth-file, the operators' dashboard at / with
// its JSON API under /api/ (docs/dashboard.md).
//
// libmicrohttpd serves it on one thread of its own, with every resource a
// client can make it hold bounded (docs/operating.md, "Limits"):
// - at most kMaxConnections connections; from kEvictFrom on, each new one
//   pushes out the oldest connection that has not yet sent a whole request
//   header, so slow clients (slowloris) cannot keep a scrape out;
// - a request's header within kMaxHeaderBytes (431 beyond), and no request
//   body is read at all: every path here answers before one would be (the
//   dashboard's actions carry their arguments in the query string);
// - a connection idle for kIdleTimeout is closed.
// The HTTP thread never touches the store: every answer that needs the
// daemon (a scrape, a health check, a page of jobs, an action) is a request
// of the wire protocol to the serving loop over an inproc socket, sent by a
// bridge thread, and the connection is suspended until the reply comes (at
// most kRequestTimeout), so one slow request holds no other, and the
// dashboard's reads and writes go through the same single writer, checks
// and fences as every client's (bridge.hpp).
//
// The pieces, in daemon/http/: the routes, one row per path and method
// (routes.cpp); authentication and an action's checks (auth.hpp); the bridge
// (bridge.hpp) and how a reply becomes an HTTP answer (answers.hpp); the
// dashboard's page, files in web/ embedded at build time (dashboard_page.hpp).
//
// Dashboard security: HTTP Basic authentication on every dashboard and API
// request against the auth file (`user:password` lines, readable by the
// daemon's user alone: mode 0600, or 0640 with the daemon's own group);
// actions are POSTs that must carry the CSRF token the page got from
// /api/session (header X-Fenceq-Csrf), are refused with a foreign Origin or
// a cross-site fetch, and are each logged at info (who, what, which job or
// queue); --http-read-only refuses every action (405).
#pragma once

#include <zmq.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "execution/throughput.hpp"

namespace fenceq::daemon {

// The inproc endpoint the serving loop binds for the HTTP listener.
inline constexpr const char* kHttpInproc = "inproc://fenceqd-http";

struct HttpOptions {
  std::string listen;                    // HOST:PORT
  std::optional<std::string> auth_file;  // the dashboard's users; none: no dashboard
  bool read_only = false;                // the dashboard shows, never acts
  // Host names the dashboard answers to besides the listen address, localhost,
  // 127.0.0.1 and [::1] (DNS rebinding: a page of another site that resolves
  // to 127.0.0.1 names its own host).
  std::vector<std::string> allowed_hosts;
  std::string store;                     // what the dashboard says the store is
  std::string clock;                     // "server" or "client"
};

// The users of an auth file (user -> password); throws std::runtime_error
// with a one-line reason when the file cannot be trusted or read: not a
// regular file, readable or writable by others, group-readable by a group
// other than the daemon's, not owned by the daemon's user, or without a
// well-formed `user:password` line.
std::map<std::string, std::string> load_auth_file(const std::string& path);

class HttpServer {
 public:
  // Binds HOST:PORT (a loopback host only; port 0 picks one) and starts
  // serving; throws std::runtime_error with a one-line reason when it cannot.
  // The dashboard's throughput chart samples `throughput` (the executor's,
  // which must outlive this) from the start.
  HttpServer(zmq::context_t& ctx, const HttpOptions& options, const Throughput& throughput);
  ~HttpServer();  // answers what waits with 503 and stops both threads
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fenceq::daemon
