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

  // Publishes `events` in order, each with the next seq.
  void publish(const std::vector<JobEvent>& events);
  const EventCounts& counts() const { return counts_; }

 private:
  std::vector<std::string> endpoints_;
  std::vector<zmq::socket_t> sockets_;
  std::uint64_t seq_ = 0;
  EventCounts counts_;
};

}  // namespace fenceq::daemon
