#include "executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include <poll.h>

#include "metrics.hpp"

namespace fenceq::daemon {

using protocol::ErrorCode;
using protocol::Op;
using protocol::TimeUse;

namespace {

// Most claim_next requests parked at once; beyond it, a claim that finds
// nothing is answered nil at once, as if its wait had ended.
constexpr std::size_t kMaxParked = 10000;
// A `list` reply's errors together stay under this: a page of 1,000 jobs with
// 64 KiB errors each would otherwise make one 66 MiB reply (and a client
// asking again and again without reading, many). Each error may take
// kListErrorBudget / rows, at least kListErrorFloor: at the default page of
// 100 no error (64 KiB at most) is ever cut.
constexpr std::size_t kListErrorBudget = 8 * 1024 * 1024;
constexpr std::size_t kListErrorFloor = 1024;

// The longest prefix of `s` of at most `n` bytes that ends on a UTF-8
// character boundary (strings on the wire must stay valid UTF-8).
std::size_t utf8_prefix(const std::string& s, std::size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

// Whether `t` names a request of this batch.
bool in_batch(const std::vector<Token>& tokens, Token t) {
  return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
}

// How far ahead of the server clock its high-water mark is stored (C2.3).
constexpr double kClockReserve = 1.0;
// On a shared database, how often exhausted jobs are marked dead (reap()).
constexpr std::chrono::milliseconds kReapEvery{250};
// How often a batch that conflicted with another writer runs before it is
// answered `unavailable`.
constexpr int kMaxAttempts = 3;

}  // namespace

Executor::Executor(Store& store, Clock& clock) : store_(store), clock_(clock) {
  // C2.3: the server clock never goes back behind what the store saw. A
  // shared database is read at the first transaction (it may be out of
  // reach now).
  if (clock_.mode() == protocol::ClockMode::server && !store_.shared()) {
    clock_.raise(store_.clock_high_water());
  }
}

double Executor::now_for(const protocol::Request& r) {
  if (clock_.mode() == protocol::ClockMode::server) return clock_.now();
  if (r.now) {
    client_now_ = std::max(client_now_, *r.now);
    return *r.now;
  }
  return client_now_;  // an optional `now` left out: the client clock's latest
}

protocol::Result Executor::nothing_for(const protocol::Request& r) {
  // In the shape the claim asked for: nil, or an empty array (`max`).
  if (r.max > 0) return protocol::Result{protocol::ClaimedJobs{}};
  return protocol::Result{};
}

std::optional<protocol::Error> Executor::too_far(const protocol::Request& r, double now) {
  // The codec checked ttl > 0 and finite; the sum can still overflow, and an
  // infinite lease would never end.
  const bool leases = r.op == Op::claim || r.op == Op::renew || r.op == Op::claim_next ||
                      r.op == Op::complete_next || r.op == Op::renew_many ||
                      (r.op == Op::complete_many && r.has_next);
  if (leases && !std::isfinite(now + r.ttl)) {
    return protocol::Error{ErrorCode::invalid_argument,
                           "field 'ttl' is too large: now + ttl overflows"};
  }
  return std::nullopt;
}

bool Executor::plan(const protocol::Request& r, double now, std::size_t index) {
  using K = Call::Kind;
  const std::size_t first = calls_.size();
  auto call = [&](K kind) -> Call& {
    Call& c = calls_.emplace_back();
    c.kind = kind;
    c.group = index;
    c.now = now;
    return c;
  };
  auto lease = [&](K kind, std::string_view id, std::string_view owner, std::int64_t fence) -> Call& {
    Call& c = call(kind);
    c.id = id;
    c.owner = owner;
    c.fence = fence;
    return c;
  };
  auto job = [&](const protocol::JobSpec& j) {
    call(K::enqueue).job = NewJob{j.id, j.queue, j.payload ? &*j.payload : nullptr, j.priority,
                                  j.delay, j.max_attempts};
  };
  auto claim_next = [&](std::string_view owner, std::int64_t max) {
    Call& c = call(K::claim_next);
    c.queue = r.queue;
    c.owner = owner;
    c.ttl = r.ttl;
    c.max = max;
  };
  switch (r.op) {
    case Op::enqueue:
      call(K::enqueue).job = NewJob{r.id, r.queue, r.payload ? &*r.payload : nullptr, r.priority,
                                    r.delay, r.max_attempts};
      break;
    case Op::claim: {
      Call& c = call(K::claim);
      c.id = r.id;
      c.owner = r.owner;
      c.ttl = r.ttl;
      break;
    }
    case Op::claim_next: claim_next(r.owner, std::max<std::int64_t>(1, r.max)); break;
    case Op::renew: {
      Call& c = lease(K::renew, r.id, r.owner, r.fence);
      c.ttl = r.ttl;
      if (r.progress) c.progress = *r.progress;
      break;
    }
    case Op::complete: lease(K::complete, r.id, r.owner, r.fence).result = &r.result; break;
    case Op::release: lease(K::release, r.id, r.owner, r.fence); break;
    case Op::fail: {
      Call& c = lease(K::fail, r.id, r.owner, r.fence);
      c.error = r.error;
      c.retry_in = r.retry_in;
      break;
    }
    case Op::check: lease(K::check, r.id, r.owner, r.fence); break;
    case Op::retry: call(K::retry).id = r.id; break;
    case Op::cancel: call(K::cancel).id = r.id; break;
    case Op::purge: {
      Call& c = call(K::purge);
      if (!r.all_queues) c.purge_queue = r.queue;
      c.ttl = r.older_than;
      break;
    }
    case Op::complete_next:
      // The same checks as complete, then as claim_next: one round trip.
      lease(K::complete, r.id, r.owner, r.fence).result = &r.result;
      claim_next(r.owner, 1);
      break;
    case Op::enqueue_many:
      // Each job as enqueue would take it, in order, in this transaction.
      for (const auto& j : r.jobs) job(j);
      break;
    case Op::complete_many:
      // Each item judged as complete would judge it: a stale one fails alone.
      for (const auto& l : r.items) lease(K::complete, l.id, l.owner, l.fence).result = &l.result;
      // Then the next jobs, claimed by the owner of the last item.
      if (r.has_next) claim_next(r.items.back().owner, r.max);
      break;
    case Op::renew_many:
      for (const auto& l : r.items) {
        Call& c = lease(K::renew, l.id, l.owner, l.fence);
        c.ttl = r.ttl;
        if (l.progress) c.progress = *l.progress;
      }
      break;
    default: return false;  // not a store write: apply() answers it
  }
  planned_.push_back({index, first, calls_.size() - first});
  return true;
}

Executor::Outcome Executor::finish(const protocol::Request& r, const Planned& p) const {
  const CallResult* res = results_.data() + p.first;
  for (std::size_t k = 0; k < p.count; ++k) {
    // PostgreSQL cannot hold U+0000: the request alone is refused, nothing of it applied.
    if (res[k].refused) return protocol::Error{ErrorCode::invalid_argument, res[k].why};
  }
  using protocol::Result;
  auto bools = [&](std::size_t n) {
    protocol::BoolList out(n);
    for (std::size_t k = 0; k < n; ++k) out[k] = res[k].ok;
    return out;
  };
  switch (r.op) {
    case Op::claim:
      if (!res[0].number) return Result{};
      return Result{*res[0].number};
    case Op::claim_next: {
      auto jobs = res[0].jobs;
      if (r.max > 0) return Result{std::move(jobs)};  // asked for an array
      if (jobs.empty()) return Result{};
      return Result{std::move(jobs.front())};
    }
    case Op::purge: return Result{res[0].number.value_or(0)};
    case Op::complete_next: {
      protocol::CompletedAndNext out;
      out.completed = res[0].ok;
      if (!res[1].jobs.empty()) out.next = res[1].jobs.front();
      return Result{std::move(out)};
    }
    case Op::enqueue_many:
    case Op::renew_many: return Result{bools(p.count)};
    case Op::complete_many:
      if (!r.has_next) return Result{bools(p.count)};
      return Result{protocol::CompletedManyAndNext{bools(p.count - 1), res[p.count - 1].jobs}};
    default: return Result{res[0].ok};  // the ops that answer a bool
  }
}

Executor::Outcome Executor::apply(const protocol::Request& r, double now) {
  using protocol::Result;
  switch (r.op) {
    case Op::ping:
      return Result{ServerInfo{protocol::kProtocolVersion, std::string(protocol::kVersion),
                               std::string(protocol::clock_name(clock_.mode()))}};
    case Op::state: {
      auto row = store_.state(r.id);
      if (!row) return Result{};
      return Result{*std::move(row)};
    }
    case Op::job: {
      ListFilter f;
      f.id = r.id;
      f.limit = 1;
      auto rows = store_.list(f, now);
      auto st = store_.state(r.id);
      if (rows.empty() || !st) return Result{};
      JobDetail d;
      d.info = std::move(rows.front());
      d.result = std::move(st->result);
      d.payload = store_.payload(r.id);
      return Result{std::move(d)};
    }
    case Op::list: {
      ListFilter f;
      if (!r.all_queues) f.queue = r.queue;
      f.status = r.status;
      f.limit = r.limit;
      f.after = r.after;
      return Result{bounded(store_.list(f, now))};
    }
    case Op::stats: return Result{stats_snapshot(now)};
    case Op::metrics: return Result{prometheus_text(stats_snapshot(now))};
    default: return protocol::Error{ErrorCode::internal, "unhandled op"};
  }
}

protocol::JobList Executor::bounded(protocol::JobList jobs) {
  if (jobs.empty()) return jobs;
  const std::size_t each = std::max(kListErrorFloor, kListErrorBudget / jobs.size());
  for (auto& j : jobs) {
    if (!j.error || j.error->size() <= each) continue;
    const std::size_t full = j.error->size();
    std::string note = " [... cut by fenceqd: " + std::to_string(full) +
                       " bytes in all; list fewer jobs per page to see more]";
    j.error->resize(utf8_prefix(*j.error, each > note.size() ? each - note.size() : 0));
    *j.error += note;
  }
  return jobs;
}

void Executor::count_writes(const protocol::Request& r, const protocol::Result& result) {
  auto tally = [](WriteCounts& w, bool applied) { ++(applied ? w.applied : w.refused); };
  auto tally_all = [&](WriteCounts& w, const protocol::BoolList& b) {
    for (bool applied : b) tally(w, applied);
  };
  const bool* one = std::get_if<bool>(&result);
  switch (r.op) {
    case Op::renew: if (one) tally(batch_writes_.renew, *one); break;
    case Op::complete: if (one) tally(batch_writes_.complete, *one); break;
    case Op::release: if (one) tally(batch_writes_.release, *one); break;
    case Op::fail: if (one) tally(batch_writes_.fail, *one); break;
    case Op::complete_next:
      if (const auto* c = std::get_if<protocol::CompletedAndNext>(&result)) {
        tally(batch_writes_.complete, c->completed);
      }
      break;
    case Op::renew_many:
      if (const auto* b = std::get_if<protocol::BoolList>(&result)) tally_all(batch_writes_.renew, *b);
      break;
    case Op::complete_many:
      if (const auto* b = std::get_if<protocol::BoolList>(&result)) {
        tally_all(batch_writes_.complete, *b);
      } else if (const auto* c = std::get_if<protocol::CompletedManyAndNext>(&result)) {
        tally_all(batch_writes_.complete, c->completed);
      }
      break;
    default: break;
  }
}

void Executor::committed() {
  ++stats_.commits;
  for (auto& [queue, n] : store_.take_queue_totals()) {
    auto it = totals_.find(queue);
    if (it == totals_.end()) {
      if (totals_.size() >= kMaxCountedQueues) {
        // Every queue name ever used stays (counters never go away while
        // the daemon runs): a bound against a client that makes up names.
        if (!std::exchange(warned_queues_, true)) {
          spdlog::warn("per-queue counters are kept for {} queues at most; queue '{}' and later "
                       "new ones count only in the global figures until fenceqd restarts",
                       kMaxCountedQueues, queue);
        }
        continue;
      }
      it = totals_.emplace(std::move(queue), QueueTotals{}).first;
    }
    it->second += n;
  }
}

protocol::Stats Executor::stats_snapshot(double now) {
  return stats_with(store_.queue_stats(now));
}

protocol::Stats Executor::stats_with(std::vector<protocol::QueueStats> queues) const {
  protocol::Stats st;
  st.queues = std::move(queues);
  // The counters live here, the gauges come from a count (maybe made on
  // another thread): each queue gets its totals, and a queue with totals and
  // no job left is listed too, with zero gauges. Both in bytewise order
  // (std::string's, and the stores' ORDER BY queue).
  if (!totals_.empty()) {
    auto by_name = [](const protocol::QueueStats& a, const protocol::QueueStats& b) {
      return a.queue < b.queue;
    };
    if (!std::is_sorted(st.queues.begin(), st.queues.end(), by_name)) {
      std::sort(st.queues.begin(), st.queues.end(), by_name);
    }
    std::vector<protocol::QueueStats> merged;
    merged.reserve(st.queues.size() + totals_.size());
    auto t = totals_.begin();
    auto only_totals = [&] {
      protocol::QueueStats q;
      q.queue = t->first;
      q.totals = t->second;
      merged.push_back(std::move(q));
      ++t;
    };
    for (auto& q : st.queues) {
      while (t != totals_.end() && t->first < q.queue) only_totals();
      if (t != totals_.end() && t->first == q.queue) q.totals = (t++)->second;
      merged.push_back(std::move(q));
    }
    while (t != totals_.end()) only_totals();
    st.queues = std::move(merged);
  }
  st.requests = stats_.requests;
  st.batches = stats_.batches;
  st.commits = stats_.commits;
  st.failed_commits = stats_.failed_commits;
  st.mean_batch = stats_.batches ? static_cast<double>(stats_.requests) /
                                       static_cast<double>(stats_.batches)
                                 : 0.0;
  st.waiting_claims = by_token_.size();
  st.renew = stats_.renew;
  st.complete = stats_.complete;
  st.release = stats_.release;
  st.fail = stats_.fail;
  st.uptime = std::chrono::duration<double>(SteadyClock::now() - started_).count();
  return st;
}

double Executor::parked_now() const {
  return clock_.mode() == protocol::ClockMode::server ? clock_.now() : client_now_;
}

void Executor::park(Parked p, bool at_front) {
  auto& w = waiting_[p.request.queue];
  const Token token = p.token;
  const auto deadline = p.deadline;
  auto it = w.claims.insert(at_front ? w.claims.begin() : w.claims.end(), std::move(p));
  by_token_[token] = it;
  deadlines_.insert({deadline, token});
}

std::optional<Executor::Parked> Executor::unpark(Token token) {
  auto found = by_token_.find(token);
  if (found == by_token_.end()) return std::nullopt;
  auto it = found->second;
  Parked p = std::move(*it);
  by_token_.erase(found);
  deadlines_.erase({p.deadline, token});
  auto w = waiting_.find(p.request.queue);
  w->second.claims.erase(it);
  if (w->second.claims.empty()) {
    set_wake(w->second, w->first, std::nullopt);
    waiting_.erase(w);
  }
  return p;
}

void Executor::mark_dirty(const std::string& queue) {
  auto w = waiting_.find(queue);
  if (w == waiting_.end() || w->second.dirty) return;
  w->second.dirty = true;
  dirty_.push_back(queue);
}

void Executor::mark_all_dirty() {
  for (const auto& [queue, w] : waiting_) mark_dirty(queue);
}

void Executor::set_wake(Waiters& w, const std::string& queue, std::optional<double> at) {
  if (w.wake_at != kNever) wakes_.erase({w.wake_at, queue});
  w.wake_at = at.value_or(kNever);
  if (w.wake_at != kNever) wakes_.insert({w.wake_at, queue});
}

bool Executor::parked_due() const {
  return !dirty_.empty() || (!wakes_.empty() && wakes_.begin()->first <= parked_now());
}

void Executor::serve_parked(std::vector<Woken>& woken) {
  if (waiting_.empty()) {  // what the store noted is dropped at its next begin()
    dirty_.clear();
    return;
  }
  auto changes = store_.take_queue_changes();
  for (const auto& q : changes.freed) mark_dirty(q);
  // A renew may end a lease sooner than the queue's wake time said.
  for (const auto& [q, until] : changes.lease_ends) {
    auto w = waiting_.find(q);
    if (w != waiting_.end() && until < w->second.wake_at) set_wake(w->second, q, until);
  }
  const double now = parked_now();
  while (!wakes_.empty() && wakes_.begin()->first <= now) {
    const std::string q = wakes_.begin()->second;
    set_wake(waiting_.at(q), q, std::nullopt);
    mark_dirty(q);
  }
  // First come, first served within each queue: the first claim that finds
  // nothing ends its queue's turn, and learns when to look again.
  for (const auto& q : std::exchange(dirty_, {})) {
    for (;;) {
      auto w = waiting_.find(q);
      if (w == waiting_.end()) break;
      w->second.dirty = false;
      const auto& p = w->second.claims.front();
      const double t = clock_.mode() == protocol::ClockMode::server
                           ? clock_.now()
                           : std::max(p.request.now.value_or(0.0), client_now_);
      auto jobs = store_.claim_next(q, p.request.owner, t, p.request.ttl,
                                    std::max<std::int64_t>(1, p.request.max));
      if (jobs.empty()) {
        set_wake(w->second, q, store_.next_claimable_at(q, t));
        break;
      }
      auto parked = unpark(p.token);
      woken.push_back({std::move(*parked), std::move(jobs)});
    }
  }
}

void Executor::roll_back() {
  store_.rollback();
  ++stats_.failed_commits;
  persisted_clock_ = 0;  // what this transaction stored is gone: store it again
}

protocol::Error Executor::abort_transaction(const std::string& what, const std::exception& e) {
  roll_back();
  const auto* se = dynamic_cast<const StoreError*>(&e);
  if (se && se->kind == StoreError::Kind::fatal) {
    if (fatal_.empty()) fatal_ = e.what();
    spdlog::error("{}: COMMIT's fsync failed, outcome unknown: {}", what, e.what());
    return {ErrorCode::outcome_unknown,
            std::string("the fsync of this request's commit failed; it may or may not have "
                        "been applied, and fenceqd stops: ") +
                e.what()};
  }
  if (se && se->kind == StoreError::Kind::outcome_unknown) {
    spdlog::error("{}: the database connection broke during COMMIT, outcome unknown: {}", what,
                  e.what());
    return {ErrorCode::outcome_unknown,
            std::string("the database connection broke while this request was being committed; "
                        "it may or may not have been applied: ") +
                e.what()};
  }
  if (se && se->kind != StoreError::Kind::internal) {
    // The database is out of reach (or kept conflicting): nothing of this
    // batch is known to be applied unless its commit was under way; the
    // client may try again. Fences make a repeated request safe.
    spdlog::warn("{} not applied, database unavailable: {}", what, e.what());
    return {ErrorCode::unavailable, std::string("the job store is unavailable: ") + e.what()};
  }
  spdlog::error("{} failed and was rolled back: {}", what, e.what());
  return {ErrorCode::internal, std::string("store failed, nothing applied: ") + e.what()};
}

std::optional<double> Executor::reap_due() {
  // Marking exhausted jobs dead only writes down what every read already
  // computes (their state is `dead` from the moment their last lease ends,
  // and no claim takes them), and stamps `finished` for purge. On a shared
  // database it runs at most every kReapEvery; on SQLite with every batch.
  const auto now = SteadyClock::now();
  if (store_.shared() && now < last_reap_ + kReapEvery) return std::nullopt;
  last_reap_ = now;
  return clock_.mode() == protocol::ClockMode::server ? clock_.now() : client_now_;
}

void Executor::reap() {
  if (auto t = reap_due()) store_.reap_exhausted(*t);
}

void Executor::begin() {
  if (!fatal_.empty()) {
    throw StoreError("the store failed earlier (" + fatal_ + "); fenceqd is stopping",
                     StoreError::Kind::unavailable);
  }
  store_.begin();
  auto* shared = store_.shared();
  if (!shared) return;
  const auto epoch = shared->connection_epoch();
  const bool reconnected = epoch != epoch_;
  epoch_ = epoch;
  // (Re)connected to a shared database: what other writers freed meanwhile
  // was not heard; every parked claim looks again.
  if (reconnected) mark_all_dirty();
  if (clock_.mode() != protocol::ClockMode::server) return;
  if (auto offset = shared->clock_offset()) clock_.set_offset(*offset);
  // Its mark may be ahead of ours.
  if (reconnected) clock_.raise(store_.clock_high_water());
}

std::optional<double> Executor::clock_to_persist() {
  // C2.3: no acknowledged change may be computed from a time the restarted
  // daemon could go back behind. The mark is stored ahead of the clock, so
  // that it is written about once per kClockReserve, not with every commit;
  // after a restart the clock may start up to that much ahead, never behind.
  if (clock_.mode() != protocol::ClockMode::server) return std::nullopt;
  if (store_.shared()) {
    // Several servers share the database and its clock. The mark is then the
    // clock itself, stored about once per kClockReserve: a mark ahead of the
    // clock would move every server that reads it (at a reconnect) ahead of
    // the others, and leases would end earlier there than elsewhere. It only
    // guards against the database's clock going back (a failover to a host
    // whose clock is behind), to within kClockReserve.
    if (clock_.high_water() < persisted_clock_ + kClockReserve) return std::nullopt;
    persisted_clock_ = clock_.high_water();
    return persisted_clock_;
  }
  if (clock_.high_water() <= persisted_clock_) return std::nullopt;
  persisted_clock_ = clock_.high_water() + kClockReserve;
  return persisted_clock_;
}

void Executor::persist_clock() {
  if (auto mark = clock_to_persist()) store_.set_clock_high_water(*mark);
}

Delivery Executor::deliver_job(Woken& w) {
  std::vector<Lease> claimed;
  for (const auto& j : w.jobs) claimed.push_back({j.id, w.parked.request.owner, j.fence});
  const auto& rid = w.parked.request.rid;
  // In the shape the request asked for: one job, or an array (`max`).
  auto reply = w.parked.request.max > 0
                   ? protocol::encode_ok(protocol::Result{std::move(w.jobs)}, rid)
                   : protocol::encode_ok(protocol::Result{std::move(w.jobs.front())}, rid);
  return {w.parked.token, std::move(reply), std::move(claimed)};
}

std::vector<Delivery> Executor::undo_claims(const std::vector<Lease>& claimed) {
  std::vector<Delivery> out;
  std::vector<Woken> woken;
  try {
    begin();
    for (const auto& c : claimed) store_.unclaim(c.id, c.owner, c.fence);
    serve_parked(woken);
    store_.commit();
    committed();
    for (auto& w : woken) out.push_back(deliver_job(w));
  } catch (const std::exception& e) {
    const auto internal = abort_transaction(
        "giving back job " + (claimed.empty() ? std::string() : claimed.front().id), e);
    for (const auto& w : woken) {
      out.push_back({w.parked.token, protocol::encode_error(internal, w.parked.request.rid), {}});
    }
  }
  return out;
}

BatchReplies Executor::run(const std::vector<protocol::Decoded>& batch,
                           const std::vector<Token>& tokens, ReplyGate* gate) {
  BatchReplies out;
  out.replies.resize(batch.size());
  stats_.requests += batch.size();
  ++stats_.batches;

  bool touches_store = false, writes = false;
  for (const auto& d : batch) {
    if (!d.request) continue;
    touches_store = touches_store || d.request->op != Op::ping;
    writes = writes || protocol::op_writes(d.request->op);
  }
  // Requests refused by decoding are answered first: they do not depend on the
  // transaction's fate.
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].request) out.replies[i] = protocol::encode_error(batch[i].error, batch[i].rid);
  }
  std::vector<Woken> woken;
  for (int attempt = 1;; ++attempt) {
    try {
      apply_batch(batch, tokens, gate, touches_store, writes, out, woken);
      for (auto& w : woken) out.woken.push_back(deliver_job(w));
      return out;
    } catch (const StoreError& e) {
      if (e.kind != StoreError::Kind::retry || attempt >= kMaxAttempts) {
        fail_batch(batch, tokens, e, out, woken);
        return out;
      }
      // A conflict with another writer of a shared database (deadlock,
      // serialization): the transaction was rolled back whole, so the batch
      // simply runs again. Parked claims it woke go back to the front.
      roll_back();
      spdlog::debug("batch of {} requests conflicted (attempt {}), running it again: {}",
                    batch.size(), attempt, e.what());
      for (Token t : tokens) unpark(t);
      std::erase_if(deferred_, [&](const Deferred& d) { return in_batch(tokens, d.token); });
      for (auto it = woken.rbegin(); it != woken.rend(); ++it) {
        if (in_batch(tokens, it->parked.token)) continue;
        const auto queue = it->parked.request.queue;
        park(std::move(it->parked), true);
        mark_dirty(queue);
      }
      woken.clear();
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (batch[i].request) out.replies[i].reset();
      }
    } catch (const std::exception& e) {
      fail_batch(batch, tokens, e, out, woken);
      return out;
    }
  }
}

void Executor::apply_batch(const std::vector<protocol::Decoded>& batch,
                           const std::vector<Token>& tokens, ReplyGate* gate, bool touches_store,
                           bool writes, BatchReplies& out, std::vector<Woken>& woken) {
  calls_.clear();
  planned_.clear();
  batch_writes_ = {};
  if (touches_store) {
    begin();
    if (auto t = reap_due()) {
      Call& c = calls_.emplace_back();
      c.kind = Call::Kind::reap;
      c.group = batch.size();  // of no request
      c.now = *t;
    }
  }
  // A request's outcome becomes its reply, or parks it.
  auto answer = [&](std::size_t i, Outcome outcome) {
    const auto& d = batch[i];
    const auto& r = *d.request;
    if (const auto* err = std::get_if<protocol::Error>(&outcome)) {
      out.replies[i] = protocol::encode_error(*err, d.rid);
      return;
    }
    auto& result = std::get<protocol::Result>(outcome);
    const bool none = std::holds_alternative<std::monostate>(result) ||
                      (std::holds_alternative<protocol::ClaimedJobs>(result) &&
                       std::get<protocol::ClaimedJobs>(result).empty());
    if (r.op == Op::claim_next && r.wait > 0 && none && by_token_.size() < kMaxParked) {
      auto wait = std::chrono::duration_cast<SteadyClock::duration>(
          std::chrono::duration<double>(r.wait));
      const bool first = !waiting_.contains(r.queue);
      park({tokens.at(i), r, SteadyClock::now() + wait});
      // The queue's wake time; a queue with claims parked already has it.
      if (first) {
        set_wake(waiting_.at(r.queue), r.queue,
                 store_.next_claimable_at(r.queue, clock_.mode() == protocol::ClockMode::server
                                                       ? clock_.now()
                                                       : std::max(r.now.value_or(0.0), client_now_)));
      }
      return;  // no reply yet
    }
    count_writes(r, result);
    out.replies[i] = protocol::encode_ok(result, d.rid);
    if (gate) gate->after(i, out.replies[i]->size());
  };
  // The writes queued so far, run together (on a shared database in one round
  // trip), then answered in order.
  auto flush = [&](bool commit_after) {
    if (calls_.empty() && !commit_after) return false;
    const bool committed = store_.run(calls_, results_, commit_after);
    for (const auto& p : planned_) answer(p.index, finish(*batch[p.index].request, p));
    calls_.clear();
    planned_.clear();
    return committed;
  };
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& d = batch[i];
    if (!d.request) continue;
    const auto& r = *d.request;
    // retry carries no time, but judges whether a job's last lease has ended
    // (dead even before reap() wrote it down): the clock's latest.
    double now = protocol::op_time_use(r.op) == TimeUse::none && r.op != Op::retry
                     ? 0.0
                     : now_for(r);
    if (gate && !protocol::op_writes(r.op)) {
      if (auto refusal = gate->before(i)) {
        out.replies[i] = protocol::encode_error(*refusal, d.rid);
        continue;
      }
    }
    if (reader_ && (r.op == Op::stats || r.op == Op::metrics)) {
      // Counted by the reader once this batch has committed (counted()).
      deferred_.push_back({tokens.at(i), d.rid, r.op, 0});
      continue;
    }
    if (auto err = too_far(r, now)) {
      out.replies[i] = protocol::encode_error(*err, d.rid);
      continue;
    }
    if (plan(r, now, i)) continue;
    // A read stands alone: what is queued before it is run and answered
    // first, so that its reply sees them and the reply bound counts them.
    flush(false);
    answer(i, apply(r, now));
  }
  if (!touches_store) return;
  // On a shared database the COMMIT goes with the batch's statements: one
  // round trip in all, unless parked claims may be served in this
  // transaction (then they are tried first, as on SQLite).
  const bool fold = writes && waiting_.empty() && store_.shared();
  if (fold) {
    if (auto mark = clock_to_persist()) {
      Call& c = calls_.emplace_back();
      c.kind = Call::Kind::set_clock_high_water;
      c.group = batch.size();
      c.mark = *mark;
    }
  }
  if (flush(fold)) {
    // Claims this batch parked after its writes: looked at again at once.
    for (const auto& q : store_.take_queue_changes().freed) mark_dirty(q);
  } else {
    // A write may have freed a job of a queue with parked claims, and time
    // (the client clock) may have moved: try the claims that may find one.
    if (writes) serve_parked(woken);
    if (writes) persist_clock();
    store_.commit();
  }
  committed();
  for (auto [to, from] : {std::pair{&stats_.renew, &batch_writes_.renew},
                          {&stats_.complete, &batch_writes_.complete},
                          {&stats_.release, &batch_writes_.release},
                          {&stats_.fail, &batch_writes_.fail}}) {
    to->applied += from->applied;
    to->refused += from->refused;
  }
  // Counts that see what this batch committed.
  for (auto& d : deferred_) {
    if (d.number == 0) d.number = reader_->request(parked_now());
  }
}

std::vector<Delivery> Executor::counted() {
  std::vector<Delivery> out;
  if (!reader_) return out;
  auto c = reader_->latest();
  if (c.number == 0) return out;
  last_counted_ = c.number;
  if (c.error.empty()) last_counts_ = c.queues;
  std::optional<protocol::Stats> st;
  std::erase_if(deferred_, [&](const Deferred& d) {
    if (d.number == 0 || d.number > c.number) return false;
    if (!c.error.empty()) {
      out.push_back({d.token,
                     protocol::encode_error({ErrorCode::unavailable, "counting jobs failed: " +
                                                                         c.error},
                                            d.rid),
                     {}});
      return true;
    }
    if (!st) st = stats_with(c.queues);
    out.push_back({d.token,
                   d.op == Op::stats ? protocol::encode_ok(protocol::Result{*st}, d.rid)
                                     : protocol::encode_ok(protocol::Result{prometheus_text(*st)},
                                                           d.rid),
                   {}});
    return true;
  });
  return out;
}

void Executor::request_count() {
  if (reader_) reader_->request(parked_now());
}

void Executor::count_now(std::chrono::milliseconds budget) {
  if (!reader_) return;
  const auto n = reader_->request(parked_now());
  pollfd p{reader_->fd(), POLLIN, 0};
  const auto until = SteadyClock::now() + budget;
  while (SteadyClock::now() < until) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - SteadyClock::now());
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) break;
    counted();
    if (last_counted_ >= n) break;
  }
}

void Executor::fail_batch(const std::vector<protocol::Decoded>& batch,
                          const std::vector<Token>& tokens, const std::exception& e,
                          BatchReplies& out, const std::vector<Woken>& woken) {
  const auto error =
      abort_transaction("a batch of " + std::to_string(batch.size()) + " requests", e);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].request) out.replies[i] = protocol::encode_error(error, batch[i].rid);
  }
  // Claims this batch parked are answered just above: unpark them. Older
  // parked claims it woke had their claim rolled back: the error too.
  for (Token t : tokens) unpark(t);
  std::erase_if(deferred_, [&](const Deferred& d) { return in_batch(tokens, d.token); });
  out.woken.clear();
  for (const auto& w : woken) {
    if (!in_batch(tokens, w.parked.token)) {
      out.woken.push_back({w.parked.token, protocol::encode_error(error, w.parked.request.rid), {}});
    }
  }
}

std::vector<std::string> Executor::run(const std::vector<protocol::Decoded>& batch) {
  std::vector<Token> tokens(batch.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = i;
  auto out = run(batch, tokens);
  std::vector<std::string> replies(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (out.replies[i]) {
      replies[i] = std::move(*out.replies[i]);
      continue;
    }
    auto w = std::find_if(out.woken.begin(), out.woken.end(),
                          [&](const auto& d) { return d.token == i; });
    if (w != out.woken.end()) {
      replies[i] = w->reply;
    } else {
      replies[i] = protocol::encode_ok(nothing_for(*batch[i].request), batch[i].rid);
    }
  }
  for (Token t = 0; t < batch.size(); ++t) unpark(t);
  return replies;
}

std::vector<Delivery> Executor::tick() {
  std::vector<Delivery> out;
  const auto now = SteadyClock::now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    auto p = unpark(deadlines_.begin()->second);
    out.push_back({p->token, protocol::encode_ok(nothing_for(p->request), p->request.rid), {}});
  }
  // With the server clock, jobs become claimable by time alone (leases
  // expire, delays end): the queues whose wake time has come.
  if (!dirty_.empty() || (retries_by_time() && parked_due())) retry_parked(out);
  return out;
}

bool Executor::retries_by_time() const { return clock_.mode() == protocol::ClockMode::server; }

std::vector<Delivery> Executor::wake() {
  std::vector<Delivery> out;
  if (!store_.shared()) return out;
  auto w = store_.shared()->take_wakeups();
  if (w.all) mark_all_dirty();
  for (const auto& q : w.queues) mark_dirty(q);
  if (!dirty_.empty()) retry_parked(out);
  return out;
}

void Executor::retry_parked(std::vector<Delivery>& out) {
  std::vector<Woken> woken;
  try {
    const auto changes_before = store_.total_changes();
    begin();
    reap();
    serve_parked(woken);
    if (store_.total_changes() == changes_before) {
      store_.rollback();  // nothing became claimable: no commit, no fsync
      return;
    }
    persist_clock();
    store_.commit();
    committed();
    for (auto& w : woken) out.push_back(deliver_job(w));
  } catch (const std::exception& e) {
    const auto error = abort_transaction("retrying parked claims", e);
    for (const auto& w : woken) {
      out.push_back({w.parked.token, protocol::encode_error(error, w.parked.request.rid), {}});
    }
  }
}

std::optional<Executor::SteadyClock::time_point> Executor::next_tick() const {
  if (by_token_.empty()) return std::nullopt;
  auto next = deadlines_.begin()->first;
  if (!dirty_.empty()) return SteadyClock::now();
  if (retries_by_time()) {
    if (!wakes_.empty()) {
      // Store time to steady time: how long until the wake time comes.
      const double in = std::max(0.0, wakes_.begin()->first - parked_now());
      const auto at = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                               std::chrono::duration<double>(std::min(in, 3600.0)));
      next = std::min(next, at);
    }
  }
  return next;
}

std::vector<Delivery> Executor::drain_parked(const protocol::Error& error) {
  std::vector<Delivery> out;
  while (!by_token_.empty()) {
    auto p = unpark(by_token_.begin()->first);
    out.push_back({p->token, protocol::encode_error(error, p->request.rid), {}});
  }
  for (const auto& d : deferred_) out.push_back({d.token, protocol::encode_error(error, d.rid), {}});
  deferred_.clear();
  return out;
}

}  // namespace fenceq::daemon
