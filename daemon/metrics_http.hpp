// The optional Prometheus endpoint (--metrics-listen HOST:PORT): GET /metrics.
//
// cpp-httplib serves on its own threads. They never touch the store: each
// scrape is a `metrics` request to the serving loop over an inproc socket, so
// the single writer stays the only thread that uses the SQLite connection.
#pragma once

#include <zmq.hpp>

#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace fenceq::daemon {

// The inproc endpoint the serving loop binds for the HTTP threads.
inline constexpr const char* kMetricsInproc = "inproc://fenceqd-metrics";

class MetricsHttp {
 public:
  // Binds HOST:PORT (a loopback host only) and starts serving; throws
  // std::runtime_error with a one-line reason when it cannot.
  MetricsHttp(zmq::context_t& ctx, const std::string& host_port);
  ~MetricsHttp();  // stops the HTTP threads
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;

  int port() const { return port_; }

 private:
  zmq::context_t& ctx_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace fenceq::daemon
