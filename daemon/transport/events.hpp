// The events stream (C3.19; protocol/PROTOCOL.md, "Events"): every job
// change of a committed transaction, published on the --events endpoints'
// XPUB sockets once the transaction committed (Server::deliver). Two frames a
// message: the queue (the topic subscribers filter on by prefix), then the
// msgpack body (protocol::encode_event).
//
// The sockets live on a thread of their own (docs/architecture.md, "Threads
// and connections"). The serving thread numbers and encodes each event and
// hands it over an inproc PUSH socket (ZMQ_DONTWAIT); the events thread
// forwards it to the XPUB sockets and reads their subscriptions. Before, the
// serving thread owned the XPUB sockets, and libzmq files a subscription in
// its trie in the thread that owns the socket: 40,000 subscriptions of 200
// bytes held the serving thread up to 498 ms (ping max) and grew it by up to
// 270 MiB, the trie filled faster than a page a turn of notifications could
// weigh it.
//
// The daemon never waits for a subscriber: the sockets are XPUB with
// ZMQ_XPUB_NODROP and every send is ZMQ_DONTWAIT, so an event that a
// subscriber kHighWaterMark messages behind cannot take is refused at once
// (for every subscriber of that socket: an XPUB queues a message for all of
// its matching subscribers or for none), and counted as dropped; so is one
// the events thread is kHighWaterMark behind on. A plain PUB socket would
// drop it for the slow subscriber alone, and silently: nothing could count
// it. Each event takes the next `seq` either way (given on the serving
// thread), so a subscriber sees a drop as a gap.
//
// Subscriptions are queue-name prefixes: a subscription message
// longer than kMaxQueueBytes + 1 bytes (kMaxCurveMessage on a CURVE
// endpoint, whose handshake needs more) is refused by libzmq
// (ZMQ_MAXMSGSIZE), which closes the connection that sent it, so no
// subscription holds more than that many nodes of libzmq's trie (a node per
// byte). libzmq 4.3.4 adds each subscription to its trie as it reads it,
// before the application sees it, and tells it nothing of which connection
// sent it (ZMQ_XPUB_MANUAL too keeps every subscription in a trie of its
// own), so no bound per connection can be kept. The bound is per socket:
// the events thread reads the notifications as they come, weighs the
// distinct subscriptions of each socket (their bytes, and
// kSubscriptionWeight more for each), and when that passes
// kMaxSubscriptionBytes it closes the socket, which drops its connections
// and frees its trie, and binds the endpoint again after a pause (250 ms,
// doubled for each close that follows within a minute, up to 8 s). Its
// subscribers' SUB sockets reconnect and subscribe again by themselves; the
// events published meanwhile are lost to them, seen as a gap in `seq`.
// Measured (random 256-byte subscriptions): about 31 bytes of the daemon's
// memory per byte of subscription, so the bound holds the trie of an open
// socket near 16 MiB. The pause is for the one that sent too much: it sends
// it all again as it reconnects, and a socket bound again at once filed that
// while libzmq's reaper still held the closed one's trie. What libzmq takes
// in before the events thread weighs it is two messages a connection
// (kSubscriptionsQueued): with more, a burst was filed in one go, past the
// bound (40,000 subscriptions of 200 bytes grew the daemon by up to 267 MiB,
// 100 connections of 400 by 279 MiB; since, 17 and 26). The serving thread
// is not held either way.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/access.hpp"
#include "execution/counters.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon {

class EventPublisher {
 public:
  // Messages a subscriber may be behind before events are dropped.
  static constexpr int kHighWaterMark = 10000;

  // Binds one XPUB socket per endpoint, secured as --listen's are, and
  // starts the events thread.
  EventPublisher(zmq::context_t& ctx, const std::vector<std::string>& endpoints,
                 const Access& access);
  EventPublisher(const EventPublisher&) = delete;
  EventPublisher& operator=(const EventPublisher&) = delete;
  // Stops the thread once it has forwarded what was published before, closes
  // the sockets and removes their ipc:// files.
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
  // Notifications read from one socket in one call, and events forwarded
  // in one: a turn's page of each.
  static constexpr int kReadPerCall = 1000;
  // Subscription messages libzmq takes in from a connection before the
  // events thread read them (the XPUB's ZMQ_RCVHWM): two. libzmq files the
  // messages of a connection in its trie in one loop that runs until the
  // connection's pipe is empty, and the I/O thread refills a pipe as the
  // loop reads it (every half of the high-water mark); with 100, a burst (a
  // subscriber reconnecting sends all its subscriptions at once) was filed
  // in one go, before the events thread could weigh any of it: +63 to +267
  // MiB in 5 runs of 11 for 40,000 subscriptions of 200 bytes, +273 to +279
  // MiB in every run for 100 connections of 400. With two, the I/O thread
  // must answer each message before the next comes in, and the loop ends
  // first: +16 to +17 and +26 to +30 MiB (the trie at kMaxSubscriptionBytes),
  // with CPU hogs beside (tests/test_bounded.py, 2026-12-07). Not one: on a
  // CURVE connection libzmq 4.3.4 first writes the peer's key into the pipe
  // as a credential message, which its writer counts and its reader skips
  // without counting, so that message holds one place for good; with one
  // place, no subscription ever came in (test_tcp_events_with_curve).
  static constexpr int kSubscriptionsQueued = 2;

  // Publishes `events` in order, each with the next seq (the serving thread).
  void publish(const std::vector<JobEvent>& events);
  const EventCounts& counts() const { return counts_; }
  // Times a socket was bound anew because of its subscriptions' weight.
  std::uint64_t rebinds() const { return rebinds_.load(std::memory_order_relaxed); }

 private:
  // The events thread's loop: forwards what publish handed over, reads the
  // subscriptions, until the one-frame message that says stop.
  void run();
  // Forwards a page of the events waiting on inbox_; false once told to stop.
  bool forward();
  // Reads the subscription notifications waiting on every socket, at most
  // kReadPerCall of each (the poll says when more wait); binds anew a
  // socket whose subscriptions weigh more than kMaxSubscriptionBytes, and
  // one that could not be bound the last time.
  void read_subscriptions();
  // When read_subscriptions has work of its own to do (a socket to bind
  // again, memory to hand back once a closed socket's trie is freed),
  // whether or not a notification came; nullopt when none.
  std::optional<std::chrono::steady_clock::time_point> due() const;

  std::vector<std::string> endpoints_;
  std::vector<zmq::socket_t> sockets_;  // the events thread's once it started
  // Binds a socket on endpoints_[i].
  zmq::socket_t open(std::size_t i);
  // Reads socket i's notifications (a page); false when its subscriptions
  // weigh too much.
  bool read_page(std::size_t i);
  // Closes socket i (its connections, its trie); read_subscriptions binds
  // it again once its pause has passed.
  void rebind(std::size_t i);

  zmq::context_t& ctx_;
  const Access& access_;
  std::vector<std::int64_t> subscriptions_;  // distinct, per socket
  std::vector<std::int64_t> weight_;         // their bytes, plus kSubscriptionWeight each
  std::atomic<std::uint64_t> rebinds_{0};
  // When a closed socket's memory is handed back (libzmq's reaper frees its
  // trie soon after the close).
  std::optional<std::chrono::steady_clock::time_point> give_back_at_;
  int give_backs_left_ = 0;
  static constexpr int kGiveBacksAfterClose = 3;
  static constexpr std::chrono::milliseconds kFirstGiveBack{200};
  std::vector<bool> warned_;                 // logged past kManySubscriptions
  // A socket closed for its subscriptions' weight is bound again after a
  // pause: kFirstPause, doubled (up to kLongestPause) for each close within
  // kQuietAfter of the one before.
  static constexpr std::chrono::milliseconds kFirstPause{250};
  static constexpr std::chrono::milliseconds kLongestPause{8000};
  static constexpr std::chrono::seconds kQuietAfter{60};
  std::vector<std::chrono::milliseconds> pause_;
  std::vector<std::optional<std::chrono::steady_clock::time_point>> closed_at_;
  std::vector<std::chrono::steady_clock::time_point> reopen_at_;  // while closed
  std::int64_t removed_ = 0;                 // since memory was last handed back
  std::uint64_t seq_ = 0;  // the serving thread's
  EventCounts counts_;
  // The hand-over: publish's PUSH (the serving thread's), the thread's PULL.
  zmq::socket_t outbox_, inbox_;
  std::thread thread_;  // last: started once the members above are
};

}  // namespace fenceq::daemon
