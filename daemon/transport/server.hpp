// The serving loop: one thread owns the ROUTER sockets and, through the
// executor, the store's writing connection (SQLite's only writer, or one
// PostgreSQL sidecar's connection).
//
// Each turn it waits for input, drains every request already queued (up to
// --max-batch, round-robin over the sockets), hands the batch to the executor
// (one transaction) and only then sends the replies (C1.4). With --sync full
// the COMMIT returns after its fsync, so one fsync covers the whole batch;
// and while the disk works, the requests that arrive meanwhile wait in the
// sockets' queues for the next batch. That is the adaptive group commit: the
// busier the disk, the bigger the batch; an idle daemon never waits to fill
// one. A message's last
// frame is the payload; every frame before it is the envelope and is sent back
// unchanged, so REQ, DEALER with or without the empty frame all work.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transport/access.hpp"
#include "transport/events.hpp"
#include "execution/executor.hpp"
#include "base/options.hpp"

namespace fenceq::daemon {

class Server {
 public:
  // Binds one ROUTER socket per endpoint, secured by the access policy
  // (access.hpp); throws std::runtime_error naming the endpoint when the
  // policy refuses it or a bind fails.
  Server(zmq::context_t& ctx, const Options& options, Executor& executor);

  // Binds one more ROUTER socket, for the daemon's own threads (inproc://).
  void listen_internal(zmq::context_t& ctx, const std::string& endpoint);

  enum class StopReason { signal, idle, fatal };

  // Serves until `signal_fd` (a signalfd for SIGTERM/SIGINT) becomes readable
  // or no request came for --idle-exit seconds. Then it stops reading and
  // answers every request still queued with `unavailable` (nothing applied).
  StopReason run(int signal_fd);

  // Service hooks (systemd's watchdog and status), set before run(). `tick` is
  // called by the serving loop itself at least every `every`, busy or idle, so
  // a stuck loop stops calling it; `stopping` once, when reading stops.
  void on_tick(std::chrono::milliseconds every, std::function<void()> tick) {
    tick_every_ = every;
    tick_ = std::move(tick);
  }
  void on_stopping(std::function<void()> stopping) { stopping_ = std::move(stopping); }

  std::uint64_t batches() const { return batches_; }
  std::uint64_t refused_at_stop() const { return refused_at_stop_; }

 private:
  // The bytes of replies queued for one peer and not yet written to its
  // connection. Shared with the free function libzmq calls once it is done
  // with a reply (on its I/O thread), hence atomic.
  using Backlog = std::atomic<std::int64_t>;

  struct Message {
    std::size_t socket = 0;
    std::vector<zmq::message_t> envelope;
    zmq::message_t payload;
    std::optional<protocol::Rid> rid;  // kept once the payload is dropped (parked)
    std::shared_ptr<Backlog> backlog;  // its peer's unread replies
    bool read_only = false;            // its request changed nothing: a refusal may replace it
  };

  // Receives one whole message from socket `i` without waiting; false if none.
  // Messages whose envelope no client of the protocol sends are dropped here.
  bool receive(std::size_t i, Message& out);
  // False when the reply could not be queued for its peer (gone, or over its
  // queue bound).
  bool send(Message& to, std::string reply);
  // The peer's backlog counter (by socket and routing id).
  std::shared_ptr<Backlog> backlog_of(std::size_t socket, const zmq::message_t& routing_id);
  // Why a request of this peer must be refused before it is applied: its
  // unread replies (and `more` made for it but not queued yet) are over
  // their bound; nullopt when it may run.
  std::optional<protocol::Error> over_backlog(const Backlog& peer, std::int64_t more = 0) const;
  class BacklogGate;
  using Clock = std::chrono::steady_clock;
  struct PollSet;
  // run()'s parts: the items it polls; the sources' descriptors as they are
  // now; how long a wait may be (0 when busy or a source is pending, -1 for
  // no bound); the executor's sources that `pick` picks (by source and
  // index), run in the list's order, their replies delivered; one turn's
  // work once the poll answered `n` ready items (true when it served
  // requests); what is done once it stops reading.
  PollSet poll_set(int signal_fd);
  void refresh(PollSet& p);
  // How long the poll may wait: 0 when busy or a source has input pending,
  // else until the first of `due` (the sources' next), the tick and idle exit.
  long wait_ms(const PollSet& p, bool busy, std::optional<Clock::time_point> due,
               Clock::time_point next_tick, Clock::time_point idle_end);
  // Runs the sources whose time has come, in the list's order, in one pass;
  // answers when the next one is due, nullopt for none.
  std::optional<Clock::time_point> run_due();
  void run_source(Source& s);
  bool serve_turn(PollSet& p, int n);
  void stop_serving();
  std::size_t serve_batch();     // returns the number of requests served
  // Sends replies to requests that await theirs (by token); their commits
  // are done (and with --sync full fsynced). A parked claim whose client is
  // gone is undone here.
  void deliver(std::vector<Delivery> replies);
  void refuse_queued();          // at stop: `unavailable` to whatever is queued

  const Options& options_;
  Executor& executor_;
  std::unique_ptr<Access> access_;  // outlives the sockets it secures
  std::vector<zmq::socket_t> sockets_;
  std::unique_ptr<EventPublisher> events_;  // --events
  std::vector<Message> batch_;
  std::vector<protocol::Decoded> decoded_;
  std::vector<Token> tokens_;
  Token next_token_ = 1;
  // Requests awaiting their reply, by token: claim_next requests parked for a
  // job, and the batch being answered.
  std::unordered_map<Token, Message> parked_;
  std::unordered_map<std::string, std::shared_ptr<Backlog>> backlogs_;
  std::shared_ptr<Backlog> total_backlog_ = std::make_shared<Backlog>(0);
  std::uint64_t batches_ = 0;
  std::uint64_t refused_at_stop_ = 0;
  std::uint64_t dropped_ = 0, dropped_logged_ = 0;  // messages dropped by receive()
  // Bytes of every frame read (kept or dropped) since memory was last given
  // back (give_back_memory, once the input is drained).
  std::uint64_t received_since_give_back_ = 0;
  std::chrono::steady_clock::time_point dropped_log_{};
  std::chrono::milliseconds tick_every_{0};
  std::function<void()> tick_, stopping_;
};

}  // namespace fenceq::daemon
