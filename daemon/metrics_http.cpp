#include "metrics_http.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

#include "fenceq_protocol/codec.hpp"

namespace fenceq::daemon {
namespace {

constexpr std::chrono::milliseconds kScrapeTimeout{5000};

// One `metrics` request to the serving loop; the text, or nullopt.
std::optional<std::string> ask_loop(zmq::context_t& ctx) {
  zmq::socket_t s(ctx, zmq::socket_type::req);
  s.set(zmq::sockopt::linger, 0);
  s.connect(kMetricsInproc);
  protocol::Request r;
  r.op = protocol::Op::metrics;
  r.rid = protocol::Rid{std::uint64_t{1}};
  s.send(zmq::buffer(protocol::encode_request(r)));
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, kScrapeTimeout) == 0) return std::nullopt;
  zmq::message_t reply;
  if (!s.recv(reply)) return std::nullopt;
  auto decoded = protocol::decode_reply(reply.to_string_view(), protocol::Op::metrics, *r.rid);
  if (!decoded || !decoded->ok) return std::nullopt;
  return std::get<std::string>(decoded->result);
}

}  // namespace

MetricsHttp::MetricsHttp(zmq::context_t& ctx, const std::string& host_port)
    : ctx_(ctx), http_(std::make_unique<httplib::Server>()) {
  auto colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    throw std::runtime_error("--metrics-listen must be HOST:PORT, not " + host_port);
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host != "127.0.0.1" && host != "::1" && host != "localhost") {
    throw std::runtime_error("--metrics-listen serves loopback only (127.0.0.1, ::1, localhost), "
                             "not " + host);
  }
  int port = 0;
  try {
    port = std::stoi(host_port.substr(colon + 1));
  } catch (const std::exception&) {
    throw std::runtime_error("--metrics-listen has a bad port: " + host_port);
  }
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    auto text = ask_loop(ctx_);
    if (!text) {
      res.status = 503;
      res.set_content("fenceqd did not answer\n", "text/plain");
      return;
    }
    res.set_content(*text, "text/plain; version=0.0.4; charset=utf-8");
  });
  if (port == 0) {
    port_ = http_->bind_to_any_port(host);
  } else if (http_->bind_to_port(host, port)) {
    port_ = port;
  }
  if (port_ <= 0) throw std::runtime_error("cannot listen for metrics on " + host_port);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  spdlog::info("metrics on http://{}:{}/metrics", host, port_);
}

MetricsHttp::~MetricsHttp() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace fenceq::daemon
