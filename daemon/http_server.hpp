// The HTTP listener (--metrics-listen HOST:PORT, loopback only): GET /metrics.
//
// libmicrohttpd serves it on one thread of its own, with every resource a
// client can make it hold bounded (docs/operating.md, "Limits"):
// - at most kMaxConnections connections; from kEvictFrom on, each new one
//   pushes out the oldest connection that has not yet sent a whole request
//   header, so slow clients (slowloris) cannot keep a scrape out;
// - a request's header within kMaxHeaderBytes (431 beyond), and no request
//   body is read at all: every path here answers before one would be;
// - a connection idle for kIdleTimeout is closed.
// The HTTP thread never touches the store: a scrape is a `metrics` request to
// the serving loop over an inproc socket, sent by a bridge thread, and the
// connection is suspended until the reply comes (at most kScrapeTimeout), so
// one slow scrape holds no other.
#pragma once

#include <zmq.hpp>

#include <memory>
#include <string>

namespace fenceq::daemon {

// The inproc endpoint the serving loop binds for the HTTP listener.
inline constexpr const char* kHttpInproc = "inproc://fenceqd-http";

class HttpServer {
 public:
  // Binds HOST:PORT (a loopback host only; port 0 picks one) and starts
  // serving; throws std::runtime_error with a one-line reason when it cannot.
  HttpServer(zmq::context_t& ctx, const std::string& host_port);
  ~HttpServer();  // answers what waits with 503 and stops both threads
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fenceq::daemon
