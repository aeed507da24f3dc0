#include "executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include <poll.h>

#include "metrics.hpp"
#include "executor_internal.hpp"
#include "op_facts.hpp"

namespace fenceq::daemon {

using protocol::Answer;
using protocol::ErrorCode;
using protocol::Op;
using executor_detail::finished;
using executor_detail::kScheduleReread;

namespace {

// Most claim_next requests parked at once; beyond it, a claim that finds
// nothing is answered nil at once, as if its wait had ended.
constexpr std::size_t kMaxParked = 10000;
// Whether `t` names a request of this batch.
bool in_batch(const std::vector<Token>& tokens, Token t) {
  return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
}


// How often a parked claim of a queue whose limits held it back looks again
// (a lease ending elsewhere, a complete on another sidecar, the rate
// window moving on), in seconds.
constexpr double kLimitPoll = 0.05;

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
  using protocol::Lease;
  const Lease lease = protocol::op_info(r.op).lease;
  const bool leases = lease == Lease::always || (lease == Lease::with_next && r.has_next);
  if (leases && !std::isfinite(now + r.ttl)) {
    return protocol::Error{ErrorCode::invalid_argument,
                           "field 'ttl' is too large: now + ttl overflows"};
  }
  return std::nullopt;
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
    limited_waiting_.erase(w->first);
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
        set_wake(w->second, q, parked_wake(q, t));
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

bool Executor::side_transaction(const std::string& what, std::vector<Delivery>& out,
                                const std::function<bool(std::vector<Woken>&)>& work) {
  std::vector<Woken> woken;
  try {
    begin();
    if (!work(woken)) {
      store_.rollback();  // nothing changed: no commit, no fsync
      return true;
    }
    store_.commit();
    committed();
    for (auto& w : woken) out.push_back(deliver_job(w));
    return true;
  } catch (const std::exception& e) {
    const auto error = abort_transaction(what, e);
    for (const auto& w : woken) {
      out.push_back({w.parked.token, protocol::encode_error(error, w.parked.request.rid), {}});
    }
    return false;
  }
}

std::vector<Delivery> Executor::undo_claims(const std::vector<Lease>& claimed) {
  std::vector<Delivery> out;
  side_transaction("giving back job " + (claimed.empty() ? std::string() : claimed.front().id),
                   out, [&](std::vector<Woken>& woken) {
                     for (const auto& c : claimed) store_.unclaim(c.id, c.owner, c.fence);
                     serve_parked(woken);
                     return true;
                   });
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
    touches_store = touches_store || op_facts(d.request->op).store;
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
      for (Token t : tokens) {
        unpark(t);
        unpark_await(t);
      }
      finishing_.clear();
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
  const BatchRun run{batch, tokens, gate, out};
  start_batch(run, touches_store);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].request) apply_request(run, i);
  }
  if (!touches_store) return;
  commit_batch(run, writes, woken);
}

void Executor::start_batch(const BatchRun& b, bool touches_store) {
  calls_.clear();
  planned_.clear();
  batch_writes_ = {};
  finishing_.clear();
  if (touches_store) {
    begin();
    if (auto t = reap_due()) {
      calls_.push_back({ReapParams{*t}, b.batch.size()});  // of no request
    }
  }
}

void Executor::answer(const BatchRun& b, std::size_t i, Outcome outcome) {
  const auto& d = b.batch[i];
  const auto& r = *d.request;
  if (const auto* err = std::get_if<protocol::Error>(&outcome)) {
    b.out.replies[i] = protocol::encode_error(*err, d.rid);
    return;
  }
  auto& result = std::get<protocol::Result>(outcome);
  const bool none = std::holds_alternative<std::monostate>(result) ||
                    (std::holds_alternative<protocol::ClaimedJobs>(result) &&
                     std::get<protocol::ClaimedJobs>(result).empty());
  const Park parks = op_facts(r.op).park;
  if (parks == Park::await && r.wait > 0 && none && awaits_.size() < kMaxParked) {
    park_await(b.tokens.at(i), r);
    return;  // answered once the job is finished, or nil when the wait ends
  }
  if (parks == Park::claim && r.wait > 0 && none && by_token_.size() < kMaxParked) {
    auto wait = std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(r.wait));
    const bool first = !waiting_.contains(r.queue);
    park({b.tokens.at(i), r, SteadyClock::now() + wait});
    // The queue's wake time; a queue with claims parked already has it.
    if (first) {
      set_wake(waiting_.at(r.queue), r.queue,
               parked_wake(r.queue, clock_.mode() == protocol::ClockMode::server
                                        ? clock_.now()
                                        : std::max(r.now.value_or(0.0), client_now_)));
    }
    return;  // no reply yet
  }
  count_writes(r, result);
  b.out.replies[i] = protocol::encode_ok(result, d.rid);
  if (b.gate) b.gate->after(i, b.out.replies[i]->size());
}

bool Executor::flush(const BatchRun& b, bool commit_after) {
  if (calls_.empty() && !commit_after) return false;
  const bool committed = store_.run(calls_, results_, commit_after);
  if (!awaits_.empty()) {
    // Jobs these writes may have finished, for the awaits parked on them.
    for (std::size_t k = 0; k < calls_.size(); ++k) {
      const auto id = finishing_job(calls_[k]);
      if (!id.empty() && k < results_.size() && results_[k].ok) finishing_.emplace_back(id);
    }
  }
  for (const auto& p : planned_) answer(b, p.index, finish(*b.batch[p.index].request, p));
  calls_.clear();
  planned_.clear();
  return committed;
}

void Executor::apply_request(const BatchRun& b, std::size_t i) {
  const auto& d = b.batch[i];
  const auto& r = *d.request;
  const OpFacts& facts = op_facts(r.op);
  // Ops that read no clock see 0 (retry reads it though it carries no `now`).
  double now = facts.clock ? now_for(r) : 0.0;
  if (b.gate && !protocol::op_writes(r.op)) {
    if (auto refusal = b.gate->before(i)) {
      b.out.replies[i] = protocol::encode_error(*refusal, d.rid);
      return;
    }
  }
  if (reader_ && facts.by_reader == ByReader::counts) {
    // Counted by the reader once this batch has committed (counted()).
    deferred_.push_back({b.tokens.at(i), d.rid, r.op, 0});
    return;
  }
  if (auto err = too_far(r, now)) {
    b.out.replies[i] = protocol::encode_error(*err, d.rid);
    return;
  }
  if (reader_ && facts.by_reader == ByReader::page) {
    // Read by the reader once this batch has committed: a page may read
    // every job, and the serving thread goes on meanwhile.
    deferred_.push_back({b.tokens.at(i), d.rid, r.op, 0, r, now});
    return;
  }
  if (plan(r, now, i)) return;
  // A read stands alone: what is queued before it is run and answered
  // first, so that its reply sees them and the reply bound counts them.
  flush(b, false);
  answer(b, i, apply(r, now));
}

void Executor::commit_batch(const BatchRun& b, bool writes, std::vector<Woken>& woken) {
  // On a shared database the COMMIT goes with the batch's statements: one
  // round trip in all, unless parked claims may be served in this
  // transaction (then they are tried first, as on SQLite).
  const bool fold = writes && waiting_.empty() && store_.shared();
  if (fold) {
    if (auto mark = clock_to_persist()) {
      calls_.push_back({ClockMarkParams{*mark}, b.batch.size()});
    }
  }
  if (flush(b, fold)) {
    // Claims this batch parked after its writes: looked at again at once.
    for (const auto& q : store_.take_queue_changes().freed) mark_dirty(q);
  } else {
    // A write may have freed a job of a queue with parked claims, and time
    // (the client clock) may have moved: try the claims that may find one.
    if (writes) {
      // A write may have ended a lease of a queue whose limit holds claims back.
      for (const auto& q : limited_waiting_) mark_dirty(q);
      serve_parked(woken);
    }
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
  // Counts and pages that see what this batch committed.
  for (auto& d : deferred_) {
    if (d.number != 0) continue;
    d.number =
        d.list ? reader_->request_list(*d.list, d.now, d.rid) : reader_->request(parked_now());
  }
  if (!finishing_.empty()) serve_awaits(std::exchange(finishing_, {}), false, b.out.woken);
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
  for (Token t : tokens) {
    unpark(t);
    unpark_await(t);
  }
  finishing_.clear();
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
  for (Token t = 0; t < batch.size(); ++t) {
    unpark(t);
    unpark_await(t);
  }
  return replies;
}

std::vector<Delivery> Executor::tick() {
  std::vector<Delivery> out;
  tick_awaits(out);
  if (schedules_due()) run_schedules(out);
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
  const auto changes_before = store_.total_changes();
  side_transaction("retrying parked claims", out, [&](std::vector<Woken>& woken) {
    reap();
    serve_parked(woken);
    // Nothing became claimable: rolled back, no commit, no fsync.
    if (store_.total_changes() == changes_before) return false;
    persist_clock();
    return true;
  });
}

std::optional<Executor::SteadyClock::time_point> Executor::next_tick() const {
  std::optional<SteadyClock::time_point> other;  // of awaits and schedules
  auto sooner = [&](SteadyClock::time_point t) { other = other ? std::min(*other, t) : t; };
  if (!awaits_.empty()) {
    sooner(await_deadlines_.begin()->first);
    sooner(next_sweep_);
  }
  if (!schedules_loaded_) {
    sooner(schedules_read_);
  } else if (schedules_due()) {
    sooner(SteadyClock::now());
  } else if (const double at = next_schedule(); at != kNever || store_.shared()) {
    if (at != kNever && retries_by_time()) {
      const double in = std::clamp(at - parked_now(), 0.0, 3600.0);
      sooner(SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                      std::chrono::duration<double>(in)));
    }
    if (store_.shared()) sooner(schedules_read_ + kScheduleReread);
  }
  if (by_token_.empty()) return other;
  auto next = deadlines_.begin()->first;
  if (other) next = std::min(next, *other);
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
  while (!awaits_.empty()) {
    const Token t = awaits_.begin()->first;
    out.push_back({t, protocol::encode_error(error, awaits_.begin()->second.request.rid), {}});
    unpark_await(t);
  }
  return out;
}

// --- queue settings ------------------------------------------------------------

std::optional<double> Executor::parked_wake(const std::string& q, double now) {
  auto at = store_.next_claimable_at(q, now);
  const auto c = store_.queue_config(q);
  if (!c || !c->limited()) {
    limited_waiting_.erase(q);
    return at;
  }
  limited_waiting_.insert(q);
  // Paused: only a queue_config (here: mark_dirty; on another sidecar: its
  // notification) lets a claim through.
  if (c->paused) return std::nullopt;
  return std::min(at.value_or(kNever), now + kLimitPoll);
}

}  // namespace fenceq::daemon
