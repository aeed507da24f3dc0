// The events stream (issue 33; protocol/PROTOCOL.md, "Events"): every job
// change of a committed transaction, published on the --events endpoints'
// XPUB sockets by the serving thread once the transaction committed
// (Server::deliver). Two frames a message: the queue (the topic subscribers
// filter on by prefix), then the msgpack body (protocol::encode_event).
//
// The daemon never waits for a subscriber: the sockets are XPUB with
// ZMQ_XPUB_NODROP and every send is ZMQ_DONTWAIT, so an event that a
// subscriber kHighWaterMark messages behind cannot take is refused at once
// (for every subscriber of that socket: an XPUB queues a message for all of
// its matching subscribers or for none), and counted as dropped. A plain PUB
// socket would drop it for the slow subscriber alone, and silently: nothing
// could count it. Each event takes the next `seq` either way, so a
// subscriber sees a drop as a gap.
//
// Subscriptions (issue 56) are queue-name prefixes: a subscription message
// longer than kMaxQueueBytes + 1 bytes (kMaxCurveMessage on a CURVE
// endpoint, whose handshake needs more) is refused by libzmq
// (ZMQ_MAXMSGSIZE), which closes the connection that sent it, so no
// subscription holds more than that many nodes of libzmq's trie (a node per
// byte). libzmq 4.3.4 adds each subscription to its trie as it reads it,
// before the application sees it, and tells it nothing of which connection
// sent it (ZMQ_XPUB_MANUAL too keeps every subscription in a trie of its
// own), so no bound per connection can be kept. The bound is per socket:
// the daemon reads the notifications as they come (the serving loop polls
// the sockets, a page of them a turn), weighs the distinct subscriptions of
// each socket (their bytes, and kSubscriptionWeight more for each), and
// when that passes kMaxSubscriptionBytes it closes the socket, which drops
// its connections and frees its trie, and binds the endpoint again. Its
// subscribers' SUB sockets reconnect and subscribe again by themselves;
// the events published meanwhile are lost to them, seen as a gap in `seq`.
// Measured (random 256-byte subscriptions): about 31 bytes of the daemon's
// memory per byte of subscription, so the bound holds the tries of one
// socket near 16 MiB, as far as the notifications keep up: libzmq files a
// connection's subscriptions as it reads them, whether or not the serving
// loop read the notifications of the last ones, and 40,000 of 200 bytes
// sent at once grew the daemon by 43-270 MiB in some runs (17-19 in most).
#pragma once

#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "access.hpp"
#include "counters.hpp"
#include "store.hpp"

namespace fenceq::daemon {

class EventPublisher {
 public:
  // Messages a subscriber may be behind before events are dropped.
  static constexpr int kHighWaterMark = 10000;

  // Binds one XPUB socket per endpoint, secured as --listen's are.
  EventPublisher(zmq::context_t& ctx, const std::vector<std::string>& endpoints,
                 const Access& access);
  EventPublisher(const EventPublisher&) = delete;
  EventPublisher& operator=(const EventPublisher&) = delete;
  // Closes the sockets and removes their ipc:// files.
  ~EventPublisher();

  // Distinct subscriptions one socket holds past which it logs a warning
  // (each up to 257 trie nodes: about 6 KiB for one of 200 bytes).
  static constexpr std::int64_t kManySubscriptions = 10000;
  // The longest message a CURVE endpoint takes (its handshake's included).
  static constexpr std::int64_t kMaxCurveMessage = 1024;
  // Subscriptions removed after which the memory is handed back.
  static constexpr std::int64_t kGiveBackAfter = 1000;
  // What the distinct subscriptions of one socket may weigh (each its
  // bytes plus kSubscriptionWeight) before the socket is bound anew.
  static constexpr std::int64_t kMaxSubscriptionBytes = 512 * 1024;
  static constexpr std::int64_t kSubscriptionWeight = 16;
  // Notifications read from one socket in one call: a turn's page.
  static constexpr int kReadPerCall = 1000;
  // Subscription messages libzmq takes in from a connection before the
  // serving loop read them: how far the trie can grow past the bound.
  static constexpr int kSubscriptionsQueued = 100;

  // Publishes `events` in order, each with the next seq.
  void publish(const std::vector<JobEvent>& events);
  // Reads the subscription notifications waiting on every socket, at most
  // kReadPerCall of each (the poll says when more wait); binds anew a
  // socket whose subscriptions weigh more than kMaxSubscriptionBytes, and
  // one that could not be bound the last time.
  void read_subscriptions();
  // The sockets, to poll for notifications (nullptr for one not bound
  // now: its bind failed, to be tried again); as many as endpoints, in order.
  std::vector<void*> handles() {
    std::vector<void*> out;
    for (auto& s : sockets_) out.push_back(s.handle());
    return out;
  }
  // When read_subscriptions has work of its own to do (a socket to bind
  // again, memory to hand back once a closed socket's trie is freed),
  // whether or not a notification came; nullopt when none.
  std::optional<std::chrono::steady_clock::time_point> due() const;
  const EventCounts& counts() const { return counts_; }
  // Times a socket was bound anew because of its subscriptions' weight.
  std::uint64_t rebinds() const { return rebinds_; }

 private:
  std::vector<std::string> endpoints_;
  std::vector<zmq::socket_t> sockets_;
  // Binds a socket on endpoints_[i].
  zmq::socket_t open(std::size_t i);
  // Reads socket i's notifications (a page); false when its subscriptions
  // weigh too much.
  bool read_page(std::size_t i);
  // Closes socket i (its connections, its trie) and binds it again.
  void rebind(std::size_t i);

  zmq::context_t& ctx_;
  const Access& access_;
  std::vector<std::int64_t> subscriptions_;  // distinct, per socket
  std::vector<std::int64_t> weight_;         // their bytes, plus kSubscriptionWeight each
  std::uint64_t rebinds_ = 0;
  // When a closed socket's memory is handed back (libzmq's reaper frees its
  // trie soon after the close).
  std::optional<std::chrono::steady_clock::time_point> give_back_at_;
  int give_backs_left_ = 0;
  static constexpr int kGiveBacksAfterClose = 3;
  static constexpr std::chrono::milliseconds kFirstGiveBack{200};
  std::vector<bool> warned_;                 // logged past kManySubscriptions
  std::int64_t removed_ = 0;                 // since memory was last handed back
  std::uint64_t seq_ = 0;
  EventCounts counts_;
};

}  // namespace fenceq::daemon
