#include "transport/server.hpp"

#include "base/memory_policy.hpp"
#include "base/logging.hpp"

#include <spdlog/spdlog.h>

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace fenceq::daemon {
namespace {

// Envelope frames kept with a request and sent back with its reply (the
// ROUTER's routing id of the peer, an empty delimiter, and one routing id per
// ROUTER in front). A message with more of them, or with one longer than a
// ZeroMQ routing id may be (255 bytes), is dropped unanswered: no client of
// the protocol sends one, and a waiting claim_next must not be able to keep
// megabytes of them (protocol/PROTOCOL.md, "Framing").
constexpr std::size_t kMaxEnvelopeFrames = 32;
constexpr std::size_t kMaxEnvelopeFrameBytes = 255;
// At stop, queued requests are answered `unavailable`: at most this many,
// for at most this long, ending once no request came for kStopQuiet.
constexpr std::size_t kMaxRefusedAtStop = 100000;
constexpr std::chrono::milliseconds kMaxStopDrain{1000};
constexpr std::chrono::milliseconds kStopQuiet{50};
// Replies still queued for a slow peer are given this long to leave at close.
constexpr int kLingerMs = 2000;
// Memory per connected peer (docs/operating.md, "Limits"). Replies queued for
// a peer that does not read: beyond this many the ROUTER drops them. Requests
// queued from one peer: beyond this many ZeroMQ stops reading its connection
// and the sender waits (pushed back, nothing dropped), so a peer costs at most
// this many times --max-message; one peer can still fill a default batch.
constexpr int kSendHighWaterMark = 1000;
constexpr int kReceiveHighWaterMark = 256;
// A batch also ends once its payloads reach this many bytes (at least one
// request per batch): maximum-size frames must not make one batch hold
// --max-batch times --max-message, three times over (frame, msgpack, request).
constexpr std::size_t kMaxBatchBytes = 16u << 20;
// Unread replies, in bytes (the count bound above does not bound bytes: one
// `list` reply can be 9 MB). Replies of kAccountFrom bytes or more are
// counted from the moment they are queued until libzmq has written them out.
// A peer with kMaxBacklog unread is refused (`unavailable`, nothing applied)
// until it reads; a reply that only read the store and would take it past
// kMaxBacklog is replaced by that refusal (one reply always goes through).
// Once all peers together hold kMaxTotalBacklog, every peer holding more than
// kFairBacklog is refused the same way. Smaller replies are bounded by count:
// kSendHighWaterMark of them, under kAccountFrom each.
constexpr std::size_t kAccountFrom = 1024;
constexpr std::int64_t kMaxBacklog = 16 << 20;
constexpr std::int64_t kMaxTotalBacklog = 256 << 20;
constexpr std::int64_t kFairBacklog = 1 << 20;
// Prune peers with nothing unread from the table once it has this many.
constexpr std::size_t kPruneBacklogsAt = 4096;
constexpr std::chrono::seconds kDropLogEvery{10};

// What a queued reply owns until libzmq is done with it.
struct HeldReply {
  std::string bytes;
  std::shared_ptr<std::atomic<std::int64_t>> peer, total;
  // Stored (release) once built, loaded (acquire) by release_reply on
  // libzmq's I/O thread: libzmq hands the message over through its own
  // queues, which ThreadSanitizer cannot see (libzmq is not instrumented).
  std::atomic<bool> built{false};
};

void release_reply(void*, void* hint) {
  auto* held = static_cast<HeldReply*>(hint);
  [[maybe_unused]] const bool built = held->built.load(std::memory_order_acquire);
  const auto n = static_cast<std::int64_t>(held->bytes.size());
  held->peer->fetch_sub(n, std::memory_order_relaxed);
  held->total->fetch_sub(n, std::memory_order_relaxed);
  delete held;
}

// Without waiting: is `fd` readable now?
bool readable_now(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

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
  if (!options.events.empty()) {
    events_ = std::make_unique<EventPublisher>(ctx, options.events, *access_);
    executor_.counters().keep_events(&events_->counts());
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
  for (;;) {
    zmq::message_t frame;
    if (!s.recv(frame, zmq::recv_flags::dontwait)) return false;
    out.socket = i;
    out.envelope.clear();
    bool dropped = false;
    while (frame.more()) {
      received_since_give_back_ += frame.size();
      // Frames beyond the bound are let go as they are read.
      if (out.envelope.size() < kMaxEnvelopeFrames && frame.size() <= kMaxEnvelopeFrameBytes) {
        out.envelope.push_back(std::move(frame));
      } else {
        dropped = true;
      }
      frame = zmq::message_t();
      // The rest of a multipart message is delivered with its first frame.
      if (!s.recv(frame, zmq::recv_flags::none)) return false;
    }
    received_since_give_back_ += frame.size();
    out.payload = std::move(frame);
    if (!dropped) {
      out.backlog = out.envelope.empty() ? nullptr : backlog_of(i, out.envelope.front());
      return true;
    }
    ++dropped_;
    const auto now = std::chrono::steady_clock::now();
    if (now - dropped_log_ >= kDropLogEvery) {
      spdlog::warn("dropped {} message(s) unanswered: an envelope of more than {} frames or a "
                   "frame over {} bytes (protocol/PROTOCOL.md, Framing)",
                   dropped_ - dropped_logged_, kMaxEnvelopeFrames, kMaxEnvelopeFrameBytes);
      dropped_log_ = now;
      dropped_logged_ = dropped_;
    }
  }
}

std::shared_ptr<Server::Backlog> Server::backlog_of(std::size_t socket,
                                                    const zmq::message_t& routing_id) {
  std::string key(1, static_cast<char>(socket));
  key.append(static_cast<const char*>(routing_id.data()), routing_id.size());
  auto& slot = backlogs_[key];
  if (!slot) {
    if (backlogs_.size() > kPruneBacklogsAt) {
      std::erase_if(backlogs_, [](const auto& kv) { return kv.second && kv.second->load() == 0; });
      return backlogs_[key] = std::make_shared<Backlog>(0);
    }
    slot = std::make_shared<Backlog>(0);
  }
  return slot;
}

namespace {
protocol::Error backlog_refusal(std::int64_t unread) {
  return {protocol::ErrorCode::unavailable,
          std::to_string(unread) +
              " bytes of replies to this client are still unread; read them before sending "
              "more (the request was not applied)"};
}
}  // namespace

std::optional<protocol::Error> Server::over_backlog(const Backlog& peer,
                                                    std::int64_t more) const {
  const auto mine = peer.load(std::memory_order_relaxed) + more;
  if (mine < kMaxBacklog &&
      (mine < kFairBacklog ||
       total_backlog_->load(std::memory_order_relaxed) + more < kMaxTotalBacklog)) {
    return std::nullopt;
  }
  return backlog_refusal(mine);
}

// The batch's view of the bound: what a peer has unread, plus the replies
// made for it earlier in this batch (not queued yet).
class Server::BacklogGate final : public ReplyGate {
 public:
  explicit BacklogGate(Server& s) : s_(s) {}
  std::optional<protocol::Error> before(std::size_t i) override {
    const auto& m = s_.batch_[i];
    if (!m.backlog) return std::nullopt;
    auto it = made_.find(m.backlog.get());
    return s_.over_backlog(*m.backlog, it == made_.end() ? 0 : it->second);
  }
  void after(std::size_t i, std::size_t bytes) override {
    const auto& m = s_.batch_[i];
    if (m.backlog && bytes >= kAccountFrom) made_[m.backlog.get()] += static_cast<std::int64_t>(bytes);
  }

 private:
  Server& s_;
  std::unordered_map<const Backlog*, std::int64_t> made_;
};

bool Server::send(Message& to, std::string reply) {
  auto& s = sockets_[to.socket];
  try {
    // ROUTER_MANDATORY: a peer that has gone fails the first frame with
    // EHOSTUNREACH, one over its queue bound with EAGAIN; its reply is
    // dropped whole rather than blocking everyone else.
    for (auto& frame : to.envelope) {
      if (!s.send(frame, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    }
    if (reply.size() < kAccountFrom || !to.backlog) {
      return s.send(zmq::buffer(reply), zmq::send_flags::dontwait).has_value();
    }
    // Counted until libzmq lets go of it (written out, or dropped).
    const auto n = static_cast<std::int64_t>(reply.size());
    auto* held = new HeldReply{std::move(reply), to.backlog, total_backlog_};
    to.backlog->fetch_add(n, std::memory_order_relaxed);
    total_backlog_->fetch_add(n, std::memory_order_relaxed);
    zmq::message_t msg(held->bytes.data(), held->bytes.size(), &release_reply, held);
    held->built.store(true, std::memory_order_release);  // this thread touches it no more
    return s.send(msg, zmq::send_flags::dontwait).has_value();
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
  // Every socket drained (not a full batch): memory a burst of large
  // messages made libzmq and the daemon take goes back now, before any reply
  // of this batch leaves (memory_policy.hpp).
  if (!progress && received_since_give_back_ >= kGiveBackAfter) {
    give_back_memory();
    received_since_give_back_ = 0;
  }
  if (batch_.empty()) return 0;
  for (auto& m : batch_) {
    std::string_view payload(static_cast<const char*>(m.payload.data()), m.payload.size());
    auto d = protocol::decode_request(payload, options_.clock);
    m.read_only = d.request && !protocol::op_writes(d.request->op);
    decoded_.push_back(std::move(d));
  }
  tokens_.clear();
  for (std::size_t i = 0; i < batch_.size(); ++i) tokens_.push_back(next_token_++);
  // run() returns after COMMIT (with --sync full, after its fsync): only now
  // may the replies leave. A claim_next without a reply is parked, waiting
  // for a job.
  // A client that does not read its replies gets no more that only read.
  BacklogGate gate(*this);
  auto out = executor_.run(decoded_, tokens_, &gate);
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
    auto& to = it->second;
    if (to.read_only && to.backlog && to.backlog->load() > 0 &&
        to.backlog->load() + static_cast<std::int64_t>(d.reply.size()) > kMaxBacklog) {
      // It changed nothing: refusing it costs the peer a retry, not a loss.
      d.reply = protocol::encode_error(backlog_refusal(to.backlog->load()), to.rid);
    }
    bool delivered = send(to, std::move(d.reply));
    parked_.erase(it);
    if (!delivered && !d.claimed.empty()) {
      // The claimant went away while it waited: nobody holds these leases.
      spdlog::debug("parked claim of {} undone: its client is gone", client_text(d.claimed.front().id));
      for (auto& w : executor_.undo_claims(d.claimed)) queue.push_back(std::move(w));
    }
  }
  // Every path that commits delivers after it: the events of what committed.
  if (events_) events_->publish(executor_.counters().take_events());
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

// What the serving loop waits on: the ROUTER sockets first, then one item
// for each of the executor's sources (in the list's order; its descriptor,
// asked again every turn), then the signal descriptor, last.
struct Server::PollSet {
  std::vector<zmq_pollitem_t> items;
  // The sources that have a descriptor (Source::polled), by index in
  // Executor::sources(): items[first_source + j] is polled[j]'s.
  std::vector<std::size_t> polled;
  std::size_t first_source = 0;
  bool signalled() const { return (items.back().revents & ZMQ_POLLIN) != 0; }
  bool ready(std::size_t k) const { return (items[k].revents & ZMQ_POLLIN) != 0; }
};

Server::PollSet Server::poll_set(int signal_fd) {
  PollSet p;
  for (auto& s : sockets_) p.items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  p.first_source = p.items.size();
  const auto& sources = executor_.sources();
  for (std::size_t k = 0; k < sources.size(); ++k) {
    if (!sources[k]->polled()) continue;
    p.polled.push_back(k);
    p.items.push_back(zmq_pollitem_t{nullptr, -1, 0, 0});
  }
  p.items.push_back({nullptr, signal_fd, static_cast<short>(signal_fd >= 0 ? ZMQ_POLLIN : 0), 0});
  return p;
}

void Server::refresh(PollSet& p) {
  const auto& sources = executor_.sources();
  for (std::size_t j = 0; j < p.polled.size(); ++j) {
    auto& item = p.items[p.first_source + j];
    item.fd = sources[p.polled[j]]->fd();
    item.events = item.fd >= 0 ? ZMQ_POLLIN : 0;
  }
}

long Server::wait_ms(const PollSet& p, bool busy, std::optional<Clock::time_point> due,
                     Clock::time_point next_tick, Clock::time_point idle_end) {
  if (busy) return 0;
  const auto& sources = executor_.sources();
  for (std::size_t k : p.polled) {
    if (sources[k]->pending()) return 0;
  }
  const auto now = Clock::now();
  long timeout_ms = -1;
  auto at_most = [&](Clock::time_point t) {
    // Source::kAtOnce is the clock's minimum: no arithmetic on it.
    const long ms = t <= now ? 0
                             : std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1;
    if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = ms;
  };
  if (options_.idle_exit > 0) at_most(idle_end);
  if (due) at_most(*due);
  if (tick_) at_most(next_tick);  // wake up in time for the next tick
  return timeout_ms;
}

void Server::run_source(Source& s) {
  std::vector<Delivery> out;
  s.run(out);
  if (!out.empty()) deliver(std::move(out));  // what it committed; its replies leave now
}

std::optional<Server::Clock::time_point> Server::run_due() {
  std::optional<Clock::time_point> next;
  for (Source* s : executor_.sources()) {
    auto t = s->due();
    // The clock read after due(): a source that answers a time it read
    // itself (now plus what is left, which may be nothing) is due then.
    if (t && (*t == Source::kAtOnce || *t <= Clock::now())) {
      run_source(*s);
      t = s->due();  // its next
    }
    if (t && (!next || *t < *next)) next = t;
  }
  return next;
}

bool Server::serve_turn(PollSet& p, int n) {
  const auto& sources = executor_.sources();
  // The sources whose descriptor is readable, or with input it cannot show.
  for (std::size_t j = 0; j < p.polled.size(); ++j) {
    Source& s = *sources[p.polled[j]];
    const bool readable = p.ready(p.first_source + j);
    if (readable) --n;
    if (readable || s.pending()) run_source(s);
  }
  const bool busy = n > 0 && serve_batch() > 0;
  // Input our own statements left out of the descriptors' sight (a shared
  // database's wake-ups read by its client library while the batch ran).
  for (std::size_t k : p.polled) {
    if (sources[k]->pending()) run_source(*sources[k]);
  }
  return busy;
}

Server::StopReason Server::run(int signal_fd) {
  PollSet p = poll_set(signal_fd);
  const auto idle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.idle_exit));
  auto last_request = Clock::now();
  StopReason reason = StopReason::signal;
  bool busy = false;  // the last turn served requests: look again without waiting
  auto next_tick = Clock::now() + tick_every_;
  for (;;) {
    if (!executor_.fatal().empty()) {
      spdlog::critical("{}: stopping, nothing after the last good fsync is known durable",
                       executor_.fatal());
      reason = StopReason::fatal;
      break;
    }
    if (tick_ && Clock::now() >= next_tick) {
      tick_();
      next_tick = Clock::now() + tick_every_;
    }
    if (!busy && options_.idle_exit > 0 && Clock::now() >= last_request + idle) {
      reason = StopReason::idle;
      break;
    }
    // The sources whose time has come (waits ending, retries, schedules ...).
    const auto due = run_due();
    const long timeout_ms = wait_ms(p, busy, due, next_tick, last_request + idle);
    refresh(p);
    int n = zmq::poll(p.items.data(), p.items.size(), std::chrono::milliseconds(timeout_ms));
    // The signal is checked between batches, so a stop is never starved by load.
    if (n > 0 && p.signalled()) break;
    // A wait that ended may have been stopped or frozen (SIGSTOP, a cgroup
    // freezer) after the kernel answered it and before the sockets were
    // read: requests and a SIGTERM that both came meanwhile find the signal
    // missing from that older answer. Once per wait, never under load.
    if (n > 0 && timeout_ms != 0 && readable_now(signal_fd)) break;
    busy = serve_turn(p, n);
    if (busy) last_request = Clock::now();
  }
  stop_serving();
  return reason;
}

void Server::stop_serving() {
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
}

}  // namespace fenceq::daemon
