#include "transport/events.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "fenceq_protocol/codec.hpp"
#include "fenceq_protocol/limits.hpp"
#include "base/memory_policy.hpp"

namespace fenceq::daemon {

EventPublisher::EventPublisher(zmq::context_t& ctx, const std::vector<std::string>& endpoints,
                               const Access& access)
    : endpoints_(endpoints), ctx_(ctx), access_(access) {
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    sockets_.push_back(open(i));
    subscriptions_.push_back(0);
    weight_.push_back(0);
    warned_.push_back(false);
    pause_.push_back(kFirstPause);
    closed_at_.emplace_back();
    reopen_at_.emplace_back();
  }
  // The hand-over to the events thread: bound before the thread starts, and
  // every socket the thread uses is made here and used there alone after
  // (std::thread's start is the full barrier libzmq asks of a socket that
  // changes threads).
  const std::string inproc = fmt::format("inproc://fenceq-events-{}", static_cast<void*>(this));
  inbox_ = zmq::socket_t(ctx_, zmq::socket_type::pull);
  inbox_.set(zmq::sockopt::rcvhwm, kHighWaterMark);
  inbox_.set(zmq::sockopt::linger, 0);
  inbox_.bind(inproc);
  outbox_ = zmq::socket_t(ctx_, zmq::socket_type::push);
  outbox_.set(zmq::sockopt::sndhwm, kHighWaterMark);
  outbox_.set(zmq::sockopt::linger, 0);
  outbox_.connect(inproc);
  thread_ = std::thread([this] { run(); });
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
  // One frame: stop, after the events before it (a PUSH keeps its order);
  // sent blocking, as the thread drains its inbox as it comes.
  if (thread_.joinable()) {
    try {
      outbox_.send(zmq::message_t(), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      spdlog::warn("events thread: cannot tell it to stop: {}", e.what());
    }
    thread_.join();
  }
  outbox_.close();
  inbox_.close();
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
  rebinds_.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("events endpoint {}: its {} distinct subscriptions weigh more than {} bytes; "
               "closing it (every subscriber of it is disconnected and subscribes again, "
               "missing the events meanwhile) and binding it anew",
               endpoints_[i], subscriptions_[i], kMaxSubscriptionBytes);
  // Its trie is freed once libzmq's reaper destroyed the socket. Until its
  // connections end, the reaper still files what they send (measured: a
  // subscriber that sent 40,000 subscriptions of 200 bytes at once, 8 MB,
  // grew the daemon by up to 266 MiB in some runs, 17-20 in others); an
  // unbind first changed nothing. Given back once they end (memory_policy).
  //
  // Bound again only after a pause, which doubles with each close that comes
  // within kQuietAfter of the last: a subscriber that sent too much sends it
  // all again as it reconnects (an XSUB keeps its subscriptions), and bound
  // at once, the new socket filed them while the reaper still held the old
  // one's (RSS up to 94 MiB over 2-3 closes in a row, against 7-29 for
  // one; docs/testing.md).
  sockets_[i].close();
  subscriptions_[i] = 0;
  weight_[i] = 0;
  warned_[i] = false;
  const auto now = std::chrono::steady_clock::now();
  pause_[i] = (closed_at_[i] && now - *closed_at_[i] < kQuietAfter)
                  ? std::min(pause_[i] * 2, kLongestPause)
                  : kFirstPause;
  closed_at_[i] = now;
  reopen_at_[i] = now + pause_[i];
  give_backs_left_ = kGiveBacksAfterClose;
  give_back_at_ = now + kFirstGiveBack;
}

void EventPublisher::read_subscriptions() {
  for (std::size_t i = 0; i < sockets_.size(); ++i) {
    if (!sockets_[i]) {
      if (std::chrono::steady_clock::now() < reopen_at_[i]) continue;
      try {
        sockets_[i] = open(i);
        spdlog::info("events endpoint {} bound again", endpoints_[i]);
      } catch (const std::exception& e) {
        // A TCP listener's port is free once libzmq's I/O thread closed the
        // old one: tried again a little later.
        spdlog::warn("{}; trying again", e.what());
        reopen_at_[i] = std::chrono::steady_clock::now() + kFirstPause;
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
  std::optional<std::chrono::steady_clock::time_point> t = give_back_at_;
  for (std::size_t i = 0; i < sockets_.size(); ++i) {
    if (!sockets_[i] && (!t || reopen_at_[i] < *t)) t = reopen_at_[i];
  }
  return t;
}

void EventPublisher::publish(const std::vector<JobEvent>& events) {
  if (events.empty()) return;
  const double t =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::uint64_t dropped = 0;
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
    // The events thread kHighWaterMark behind: refused at once (the first
    // frame; once it is taken, so is the rest), counted as dropped.
    if (!outbox_.send(zmq::buffer(je.queue), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      ++dropped;
      continue;
    }
    outbox_.send(zmq::buffer(body), zmq::send_flags::none);
  }
  if (dropped) counts_.dropped.fetch_add(dropped, std::memory_order_relaxed);
}

bool EventPublisher::forward() {
  std::uint64_t published = 0, dropped = 0;
  bool go_on = true;
  zmq::message_t queue, body;
  for (int n = 0; n < kReadPerCall && inbox_.recv(queue, zmq::recv_flags::dontwait); ++n) {
    if (!queue.more()) {  // one frame: stop
      go_on = false;
      break;
    }
    (void)inbox_.recv(body, zmq::recv_flags::none);  // the rest of a message is there with its first frame
    bool sent = true;
    for (auto& s : sockets_) {
      if (!s) continue;  // being bound anew
      // ZMQ_XPUB_NODROP: the first frame is refused (EAGAIN) when a
      // subscriber is kHighWaterMark behind; once it is taken, so is the rest.
      if (!s.send(zmq::buffer(queue.data(), queue.size()),
                  zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        sent = false;
        continue;
      }
      s.send(zmq::buffer(body.data(), body.size()), zmq::send_flags::none);
    }
    ++(sent ? published : dropped);
  }
  if (published) counts_.published.fetch_add(published, std::memory_order_relaxed);
  if (dropped) counts_.dropped.fetch_add(dropped, std::memory_order_relaxed);
  return go_on;
}

void EventPublisher::run() {
  std::vector<zmq_pollitem_t> items;
  for (;;) {
    items.assign(1, {inbox_.handle(), 0, ZMQ_POLLIN, 0});
    for (auto& s : sockets_) items.push_back({s.handle(), 0, static_cast<short>(s ? ZMQ_POLLIN : 0), 0});
    long timeout_ms = -1;
    if (auto t = due()) {
      timeout_ms = std::max<long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(*t - std::chrono::steady_clock::now())
                     .count() + 1);
    }
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(timeout_ms));
      if ((items[0].revents & ZMQ_POLLIN) && !forward()) return;  // told to stop
      bool subscribed = false;
      for (std::size_t k = 1; k < items.size(); ++k) subscribed |= (items[k].revents & ZMQ_POLLIN) != 0;
      const auto t = due();
      if (subscribed || (t && std::chrono::steady_clock::now() >= *t)) read_subscriptions();
    } catch (const std::exception& e) {
      // Never taken down by a subscriber (nor by a failed allocation of one
      // subscription's nodes): logged, and on.
      spdlog::warn("events thread: {}", e.what());
    }
  }
}

}  // namespace fenceq::daemon
