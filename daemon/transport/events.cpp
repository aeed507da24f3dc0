#include "events.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>

#include "fenceq_protocol/codec.hpp"

namespace fenceq::daemon {

EventPublisher::EventPublisher(zmq::context_t& ctx, const std::vector<std::string>& endpoints,
                               const Access& access)
    : endpoints_(endpoints) {
  for (const auto& endpoint : endpoints) {
    zmq::socket_t s(ctx, zmq::socket_type::xpub);
    access.secure(s, endpoint);
    s.set(zmq::sockopt::xpub_nodrop, 1);
    s.set(zmq::sockopt::sndhwm, kHighWaterMark);
    s.set(zmq::sockopt::linger, 0);
    // A subscription is a message of at most a queue name and one byte.
    s.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(64 << 10));
    try {
      s.bind(endpoint);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error("cannot bind events endpoint " + endpoint + ": " + e.what());
    }
    sockets_.push_back(std::move(s));
  }
  spdlog::info("publishing job events on {}", fmt::join(endpoints, " "));
}

EventPublisher::~EventPublisher() {
  for (auto& s : sockets_) s.close();
  for (const auto& e : endpoints_) {
    if (e.rfind("ipc://", 0) == 0 && e.size() > 6 && e[6] != '@') ::unlink(e.c_str() + 6);
  }
}

void EventPublisher::publish(const std::vector<JobEvent>& events) {
  // Subscriptions come in as messages: read and let go (libzmq keeps the
  // filter itself).
  for (auto& s : sockets_) {
    zmq::message_t m;
    while (s.recv(m, zmq::recv_flags::dontwait)) {
    }
  }
  if (events.empty()) return;
  const double t =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::uint64_t published = 0, dropped = 0;
  for (const auto& je : events) {
    Event e;
    e.seq = ++seq_;
    e.t = t;
    e.event = std::string(job_event_name(je.kind));
    e.id = je.id;
    e.queue = je.queue;
    e.fence = je.fence;
    e.owner = je.owner;
    e.group = je.group;
    const std::string body = protocol::encode_event(e);
    bool sent = true;
    for (auto& s : sockets_) {
      // ZMQ_XPUB_NODROP: the first frame is refused (EAGAIN) when a
      // subscriber is kHighWaterMark behind; once it is taken, so is the rest.
      if (!s.send(zmq::buffer(je.queue), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        sent = false;
        continue;
      }
      s.send(zmq::buffer(body), zmq::send_flags::none);
    }
    ++(sent ? published : dropped);
  }
  auto add = [](std::atomic<std::uint64_t>& to, std::uint64_t n) {
    if (n) to.store(to.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  };
  add(counts_.published, published);
  add(counts_.dropped, dropped);
}

}  // namespace fenceq::daemon
