#include "fenceq/subscriber.hpp"

#include <zmq.hpp>

#include "fenceq_protocol/codec.hpp"

namespace fenceq {

zmq::context_t& shared_context();  // client.cpp
void secure_socket(zmq::socket_t& socket, const std::string& endpoint,
                   const std::optional<CurveKeys>& curve);

struct Subscriber::Impl {
  zmq::socket_t socket{shared_context(), zmq::socket_type::sub};
  std::optional<std::string> queue;
  std::uint64_t last = 0, missed = 0;
};

Subscriber::Subscriber(const std::string& endpoint, std::optional<std::string> queue,
                       std::optional<CurveKeys> curve)
    : impl_(std::make_unique<Impl>()) {
  impl_->queue = std::move(queue);
  auto& s = impl_->socket;
  s.set(zmq::sockopt::linger, 0);
  secure_socket(s, endpoint, curve);
  // The topic matches by prefix: next() keeps the exact queue only.
  s.set(zmq::sockopt::subscribe, impl_->queue.value_or(""));
  try {
    s.connect(endpoint);
  } catch (const zmq::error_t& err) {
    throw Error("invalid_argument", "cannot connect to " + endpoint + ": " + err.what());
  }
}

Subscriber::Subscriber(Subscriber&&) noexcept = default;
Subscriber& Subscriber::operator=(Subscriber&&) noexcept = default;
Subscriber::~Subscriber() = default;

std::optional<Event> Subscriber::next(std::chrono::milliseconds timeout) {
  auto& s = impl_->socket;
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::max(left, std::chrono::milliseconds(0))) == 0) return std::nullopt;
    zmq::message_t topic, body;
    if (!s.recv(topic, zmq::recv_flags::dontwait)) continue;
    if (!topic.more()) throw Error("bad_reply", "bad event: one frame, not a topic and a body");
    (void)s.recv(body);
    while (body.more()) {  // frames beyond the two: not an event
      zmq::message_t extra;
      (void)s.recv(extra);
      body = std::move(extra);
    }
    if (impl_->queue && topic.to_string_view() != *impl_->queue) continue;  // a longer name
    Event e;
    try {
      e = protocol::decode_event(body.to_string_view());
    } catch (const protocol::ReplyFormatError& err) {
      throw Error("bad_reply", err.what());
    }
    if (e.seq > impl_->last + 1 && impl_->last != 0) impl_->missed += e.seq - impl_->last - 1;
    impl_->last = e.seq;
    return e;
  }
}

std::uint64_t Subscriber::last_seq() const { return impl_->last; }
std::uint64_t Subscriber::missed() const { return impl_->missed; }

}  // namespace fenceq
