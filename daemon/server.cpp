#include "server.hpp"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace fenceq::daemon {
namespace {

// A message with more envelope frames than this is dropped unanswered: no
// client of the protocol sends more than a delimiter, and a ROUTER in front
// adds one identity frame per hop.
constexpr std::size_t kMaxEnvelopeFrames = 32;
// At stop, queued requests are answered `unavailable`: at most this many,
// for at most this long, ending once no request came for kStopQuiet.
constexpr std::size_t kMaxRefusedAtStop = 100000;
constexpr std::chrono::milliseconds kMaxStopDrain{1000};
constexpr std::chrono::milliseconds kStopQuiet{50};
// Replies still queued for a slow peer are given this long to leave at close.
constexpr int kLingerMs = 2000;
// Memory per connected peer (README "Limits"). Replies queued for a peer
// that does not read: beyond this many the ROUTER drops them, so a peer that
// never reads costs at most this many replies (a client reading its replies
// never gets near it: its own receive queue holds 1000 more). Requests
// queued from one peer: beyond this many ZeroMQ stops reading its connection
// and the sender waits (pushed back, nothing dropped), so a peer costs at most
// this many times --max-message; one peer can still fill a default batch.
constexpr int kSendHighWaterMark = 1000;
constexpr int kReceiveHighWaterMark = 256;
// A batch also ends once its payloads reach this many bytes (at least one
// request per batch): maximum-size frames must not make one batch hold
// --max-batch times --max-message, three times over (frame, msgpack, request).
constexpr std::size_t kMaxBatchBytes = 16u << 20;

}  // namespace

Server::Server(zmq::context_t& ctx, const Options& options, Executor& executor)
    : options_(options), executor_(executor), access_(std::make_unique<Access>(ctx, options)) {
  for (const auto& endpoint : options.listen) {
    zmq::socket_t s(ctx, zmq::socket_type::router);
    access_->secure(s, endpoint);
    s.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(options.max_message));
    s.set(zmq::sockopt::linger, kLingerMs);
    s.set(zmq::sockopt::sndhwm, kSendHighWaterMark);
    s.set(zmq::sockopt::rcvhwm, kReceiveHighWaterMark);
    s.set(zmq::sockopt::router_mandatory, true);
    try {
      s.bind(endpoint);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error("cannot listen on " + endpoint + ": " + e.what());
    }
    sockets_.push_back(std::move(s));
  }
  batch_.reserve(options.max_batch);
  decoded_.reserve(options.max_batch);
}

void Server::listen_internal(zmq::context_t& ctx, const std::string& endpoint) {
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 0);
  s.bind(endpoint);
  sockets_.push_back(std::move(s));
}

bool Server::receive(std::size_t i, Message& out) {
  auto& s = sockets_[i];
  zmq::message_t frame;
  if (!s.recv(frame, zmq::recv_flags::dontwait)) return false;
  out.socket = i;
  out.envelope.clear();
  bool too_many = false;
  while (frame.more()) {
    if (out.envelope.size() < kMaxEnvelopeFrames) {
      out.envelope.push_back(std::move(frame));
    } else {
      too_many = true;
    }
    frame = zmq::message_t();
    // The rest of a multipart message is delivered with its first frame.
    if (!s.recv(frame, zmq::recv_flags::none)) return false;
  }
  out.payload = std::move(frame);
  if (too_many) {
    spdlog::debug("dropped a message with more than {} envelope frames", kMaxEnvelopeFrames);
    return receive(i, out);
  }
  return true;
}

bool Server::send(Message& to, const std::string& reply) {
  auto& s = sockets_[to.socket];
  try {
    // ROUTER_MANDATORY: a peer that has gone fails the first frame with
    // EHOSTUNREACH, one over its queue bound with EAGAIN; its reply is
    // dropped whole rather than blocking everyone else.
    for (auto& frame : to.envelope) {
      if (!s.send(frame, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    }
    return s.send(zmq::buffer(reply), zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    spdlog::debug("reply not sent: {}", e.what());
    return false;
  }
}

std::size_t Server::serve_batch() {
  batch_.clear();
  decoded_.clear();
  // Round-robin, one message per socket per pass, until all are empty or the
  // batch is full (in count or bytes): arrival order within a socket,
  // fairness across sockets.
  bool progress = true;
  std::size_t bytes = 0;
  auto room = [&] { return batch_.size() < options_.max_batch && bytes < kMaxBatchBytes; };
  while (progress && room()) {
    progress = false;
    for (std::size_t i = 0; i < sockets_.size() && room(); ++i) {
      Message m;
      if (receive(i, m)) {
        bytes += m.payload.size();
        batch_.push_back(std::move(m));
        progress = true;
      }
    }
  }
  if (batch_.empty()) return 0;
  for (const auto& m : batch_) {
    std::string_view payload(static_cast<const char*>(m.payload.data()), m.payload.size());
    decoded_.push_back(protocol::decode_request(payload, options_.clock));
  }
  tokens_.clear();
  for (std::size_t i = 0; i < batch_.size(); ++i) tokens_.push_back(next_token_++);
  // run() returns after COMMIT (with --sync full, after its fsync): only now
  // may the replies leave. A claim_next without a reply is parked, waiting
  // for a job.
  auto out = executor_.run(decoded_, tokens_);
  std::vector<Delivery> ready;
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    // Decoded: a request waiting for its reply keeps only its envelope, not
    // its frame (a parked claim_next may wait an hour; frames are up to
    // --max-message).
    batch_[i].payload = zmq::message_t();
    batch_[i].rid = decoded_[i].rid;
    parked_.emplace(tokens_[i], std::move(batch_[i]));
    if (out.replies[i]) ready.push_back({tokens_[i], std::move(*out.replies[i]), {}});
  }
  for (auto& w : out.woken) ready.push_back(std::move(w));
  deliver(std::move(ready));
  ++batches_;
  return batch_.size();
}

void Server::deliver(std::vector<Delivery> replies) {
  // Each undone claim gives its job to the next parked claim, whose reply
  // joins the queue; it ends, since every undo ends one parked request.
  std::deque<Delivery> queue(std::make_move_iterator(replies.begin()),
                             std::make_move_iterator(replies.end()));
  while (!queue.empty()) {
    Delivery d = std::move(queue.front());
    queue.pop_front();
    auto it = parked_.find(d.token);
    if (it == parked_.end()) continue;
    bool delivered = send(it->second, d.reply);
    parked_.erase(it);
    if (!delivered && d.claimed) {
      // The claimant went away while it waited: nobody holds this lease.
      spdlog::debug("parked claim of {} undone: its client is gone", d.claimed->id);
      for (auto& w : executor_.undo_claim(*d.claimed)) queue.push_back(std::move(w));
    }
  }
}

void Server::refuse_queued() {
  const protocol::Error stopping{protocol::ErrorCode::unavailable,
                                 "fenceqd is shutting down; the request was not applied"};
  // Requests may still be on their way in from the kernel's socket buffers:
  // keep answering until the sockets have been quiet for a moment.
  std::vector<zmq_pollitem_t> items;
  for (auto& s : sockets_) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  const auto give_up = std::chrono::steady_clock::now() + kMaxStopDrain;
  while (refused_at_stop_ < kMaxRefusedAtStop && std::chrono::steady_clock::now() < give_up &&
         zmq::poll(items.data(), items.size(), kStopQuiet) > 0) {
    for (std::size_t i = 0; i < sockets_.size(); ++i) {
      Message m;
      if (!receive(i, m)) continue;
      std::string_view payload(static_cast<const char*>(m.payload.data()), m.payload.size());
      auto d = protocol::decode_request(payload, options_.clock);
      send(m, protocol::encode_error(stopping, d.rid));
      ++refused_at_stop_;
    }
  }
}

Server::StopReason Server::run(int signal_fd) {
  using clock = std::chrono::steady_clock;
  std::vector<zmq_pollitem_t> items;
  for (auto& s : sockets_) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  // A shared database's wake-ups (its descriptor may change on reconnect).
  const std::size_t wakeup_item = items.size();
  items.push_back({nullptr, -1, 0, 0});
  items.push_back({nullptr, signal_fd, ZMQ_POLLIN, 0});
  const auto idle = std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double>(options_.idle_exit));
  auto last_request = clock::now();
  StopReason reason = StopReason::signal;

  bool busy = false;  // the last turn served requests: look again without waiting
  auto next_tick = clock::now() + tick_every_;
  for (;;) {
    if (!executor_.fatal().empty()) {
      spdlog::critical("{}: stopping, nothing after the last good fsync is known durable",
                       executor_.fatal());
      reason = StopReason::fatal;
      break;
    }
    if (tick_ && clock::now() >= next_tick) {
      tick_();
      next_tick = clock::now() + tick_every_;
    }
    long timeout_ms = -1;
    if (busy) {
      timeout_ms = 0;
    } else if (options_.idle_exit > 0) {
      auto left = last_request + idle - clock::now();
      if (left <= clock::duration::zero()) {
        reason = StopReason::idle;
        break;
      }
      timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
    }
    // Parked claim_next requests: waits ending, and (server clock) retries.
    if (auto t = executor_.next_tick(); t && clock::now() >= *t) deliver(executor_.tick());
    if (auto t = executor_.next_tick(); t && !busy) {
      auto to_tick =
          std::chrono::duration_cast<std::chrono::milliseconds>(*t - clock::now()).count() + 1;
      if (timeout_ms < 0 || to_tick < timeout_ms) timeout_ms = std::max<long>(0, to_tick);
    }
    if (tick_ && !busy) {  // wake up in time for the next tick
      auto to_tick =
          std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - clock::now()).count() + 1;
      if (timeout_ms < 0 || to_tick < timeout_ms) timeout_ms = std::max<long>(0, to_tick);
    }
    items[wakeup_item].fd = executor_.wakeup_fd();
    items[wakeup_item].events = items[wakeup_item].fd >= 0 ? ZMQ_POLLIN : 0;
    int n = zmq::poll(items.data(), items.size(), std::chrono::milliseconds(timeout_ms));
    // The signal is checked between batches, so a stop is never starved by load.
    if (n > 0 && (items.back().revents & ZMQ_POLLIN)) break;
    if (items[wakeup_item].revents & ZMQ_POLLIN) {
      deliver(executor_.wake());
      --n;
    }
    busy = n > 0 && serve_batch() > 0;
    // A shared database's wake-ups that arrived while our own statements ran
    // are queued inside its client library, not on the descriptor: look.
    if (busy && executor_.wakeup_fd() >= 0) deliver(executor_.wake());
    if (busy) last_request = clock::now();
  }
  if (stopping_) stopping_();
  deliver(executor_.drain_parked({protocol::ErrorCode::unavailable,
                                  "fenceqd is shutting down; no job was claimed"}));
  refuse_queued();
  for (auto& s : sockets_) s.close();  // lingers so the last replies leave
  // ZeroMQ leaves IPC socket files behind. This daemon still holds the
  // database lock (or, on PostgreSQL, the socket paths' locks), so no
  // successor can have bound these paths yet.
  for (const auto& e : options_.listen) {
    if (e.rfind("ipc://", 0) == 0 && e.size() > 6 && e[6] != '@') ::unlink(e.c_str() + 6);
  }
  return reason;
}

}  // namespace fenceq::daemon
