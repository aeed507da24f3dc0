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
// byte). Their number is not
// bounded: libzmq 4.3.4 adds each to its trie as it reads it, before the
// application sees it, and tells it nothing of which connection sent it
// (ZMQ_XPUB_MANUAL too keeps every subscription in a trie of its own). So
// the daemon reads the notifications as they come (the serving loop polls
// the sockets), counts the distinct subscriptions of each socket, logs when
// one holds more than kManySubscriptions, and hands the memory back to the
// kernel once kGiveBackAfter of them went away (a subscriber that left).
#pragma once

#include <zmq.hpp>

#include <cstdint>
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

  // Publishes `events` in order, each with the next seq.
  void publish(const std::vector<JobEvent>& events);
  // Reads the subscription notifications waiting on every socket.
  void read_subscriptions();
  // The sockets, to poll for notifications.
  std::vector<void*> handles() {
    std::vector<void*> out;
    for (auto& s : sockets_) out.push_back(s.handle());
    return out;
  }
  const EventCounts& counts() const { return counts_; }

 private:
  std::vector<std::string> endpoints_;
  std::vector<zmq::socket_t> sockets_;
  // Binds a socket on endpoints_[i].
  zmq::socket_t open(std::size_t i);

  zmq::context_t& ctx_;
  const Access& access_;
  std::vector<std::int64_t> subscriptions_;  // distinct, per socket
  std::vector<bool> warned_;                 // logged past kManySubscriptions
  std::int64_t removed_ = 0;                 // since memory was last handed back
  std::uint64_t seq_ = 0;
  EventCounts counts_;
};

}  // namespace fenceq::daemon
