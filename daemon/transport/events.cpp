#include "events.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "fenceq_protocol/codec.hpp"
#include "fenceq_protocol/limits.hpp"
#include "memory_policy.hpp"

namespace fenceq::daemon {

EventPublisher::EventPublisher(zmq::context_t& ctx, const std::vector<std::string>& endpoints,
                               const Access& access)
    : endpoints_(endpoints), ctx_(ctx), access_(access) {
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    sockets_.push_back(open(i));
    subscriptions_.push_back(0);
    weight_.push_back(0);
    warned_.push_back(false);
  }
  spdlog::info("publishing job events on {}", fmt::join(endpoints, " "));
}

zmq::socket_t EventPublisher::open(std::size_t i) {
  const std::string& endpoint = endpoints_[i];
  zmq::socket_t s(ctx_, zmq::socket_type::xpub);
  access_.secure(s, endpoint);
  s.set(zmq::sockopt::xpub_nodrop, 1);
  s.set(zmq::sockopt::sndhwm, kHighWaterMark);
  s.set(zmq::sockopt::rcvhwm, kSubscriptionsQueued);
  s.set(zmq::sockopt::linger, 0);
  // A subscription is a message of at most a queue name and one byte: a
  // longer message closes the connection that sent it (libzmq). The limit
  // holds for the handshake's commands too: CURVE's INITIATE (about 270
  // bytes, more with metadata) needs room, so a CURVE endpoint allows 1 KiB.
  const bool curve = s.get(zmq::sockopt::curve_server) != 0;
  s.set(zmq::sockopt::maxmsgsize,
        static_cast<std::int64_t>(curve ? kMaxCurveMessage : protocol::kMaxQueueBytes + 1));
  try {
    s.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind events endpoint " + endpoint + ": " + e.what());
  }
  return s;
}

EventPublisher::~EventPublisher() {
  for (auto& s : sockets_) s.close();
  for (const auto& e : endpoints_) {
    if (e.rfind("ipc://", 0) == 0 && e.size() > 6 && e[6] != '@') ::unlink(e.c_str() + 6);
  }
}

bool EventPublisher::read_page(std::size_t i) {
  // Subscriptions come in as notifications (libzmq keeps the filter
  // itself): 1 + prefix for a prefix no connection of the socket had, 0 +
  // prefix for one that none holds any more (also when its last subscriber
  // left).
  zmq::message_t m;
  for (int n = 0; n < kReadPerCall && sockets_[i].recv(m, zmq::recv_flags::dontwait); ++n) {
    if (m.size() == 0) continue;
    const auto weight = static_cast<std::int64_t>(m.size() - 1) + kSubscriptionWeight;
    const unsigned char kind = *static_cast<const unsigned char*>(m.data());
    if (kind == 1) {
      ++subscriptions_[i];
      weight_[i] += weight;
    } else if (kind == 0 && subscriptions_[i] > 0) {
      --subscriptions_[i];
      weight_[i] = std::max<std::int64_t>(0, weight_[i] - weight);
      ++removed_;
    }
    if (weight_[i] > kMaxSubscriptionBytes) return false;
  }
  return true;
}

void EventPublisher::rebind(std::size_t i) {
  ++rebinds_;
  spdlog::warn("events endpoint {}: its {} distinct subscriptions weigh more than {} bytes; "
               "closing it (every subscriber of it is disconnected and subscribes again, "
               "missing the events meanwhile) and binding it anew",
               endpoints_[i], subscriptions_[i], kMaxSubscriptionBytes);
  sockets_[i].close();  // its trie is freed once libzmq's reaper took the socket
  subscriptions_[i] = 0;
  weight_[i] = 0;
  warned_[i] = false;
  give_backs_left_ = kGiveBacksAfterClose;
  give_back_at_ = std::chrono::steady_clock::now() + kFirstGiveBack;
  try {
    sockets_[i] = open(i);
  } catch (const std::exception& e) {
    // A TCP listener's port is free once libzmq's I/O thread closed the old
    // one: the next call tries again.
    spdlog::warn("{}; trying again", e.what());
  }
}

void EventPublisher::read_subscriptions() {
  for (std::size_t i = 0; i < sockets_.size(); ++i) {
    if (!sockets_[i]) {
      try {
        sockets_[i] = open(i);
        spdlog::info("events endpoint {} bound again", endpoints_[i]);
      } catch (const std::exception&) {
        continue;
      }
    }
    if (!read_page(i)) {
      rebind(i);
      continue;
    }
    if (subscriptions_[i] > kManySubscriptions && !warned_[i]) {
      warned_[i] = true;
      spdlog::warn("events endpoint {}: its subscribers hold {} distinct subscriptions (more "
                   "than {}): each costs the daemon memory until its subscriber leaves",
                   endpoints_[i], subscriptions_[i], kManySubscriptions);
    } else if (warned_[i] && subscriptions_[i] <= kManySubscriptions / 2) {
      warned_[i] = false;
    }
  }
  // A subscriber that left, a socket closed: its trie nodes are free, but
  // in the arena.
  const bool closed = give_back_at_ && std::chrono::steady_clock::now() >= *give_back_at_;
  if (removed_ >= kGiveBackAfter || closed) {
    removed_ = 0;
    give_back_memory();
  }
  if (closed) {
    // When the socket is freed depends on its connections' ends: once more
    // a little later (200 ms, 1 s, 5 s after the close).
    if (--give_backs_left_ > 0) {
      give_back_at_ = std::chrono::steady_clock::now() +
                      kFirstGiveBack * (kGiveBacksAfterClose - give_backs_left_) * 4;
    } else {
      give_back_at_.reset();
    }
  }
}

std::optional<std::chrono::steady_clock::time_point> EventPublisher::due() const {
  for (const auto& s : sockets_) {
    if (!s) return std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  }
  return give_back_at_;
}

void EventPublisher::publish(const std::vector<JobEvent>& events) {
  read_subscriptions();
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
      if (!s) continue;  // being bound anew
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
