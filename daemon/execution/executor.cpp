#include "execution/executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "base/logging.hpp"
#include "execution/op_facts.hpp"

namespace fenceq::daemon {

using protocol::ErrorCode;

namespace {

// How far ahead of the server clock its high-water mark is stored (C2.3).
constexpr double kClockReserve = 1.0;
// On a shared database, how often exhausted jobs are marked dead (reap()).
constexpr std::chrono::milliseconds kReapEvery{250};
// Settling left by transactions (run_settle): on a shared database, how
// often a sidecar looks for some another one may have left; after a step
// failed, how long until the next.
constexpr std::chrono::milliseconds kSettlePoll{1000};
constexpr std::chrono::milliseconds kSettleRetry{1000};
// How often a batch that conflicted with another writer runs before it is
// answered `unavailable`.
constexpr int kMaxAttempts = 3;
// After a batch failed with a side step in it (the reap, a retention chunk),
// how long batches go without side steps; the requests ran again without it.
constexpr std::chrono::seconds kSideStepsOff{5};
// At most this much of a store's error goes into a reply or a log line: a
// PL/pgSQL context can be hundreds of KB.
constexpr std::size_t kMaxErrorText = 512;

// `text` cut to at most kMaxErrorText bytes, at a UTF-8 character boundary.
std::string bounded(std::string text) {
  if (text.size() <= kMaxErrorText) return text;
  std::size_t n = kMaxErrorText;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  text.resize(n);
  return text + " [...]";
}

}  // namespace

Executor::Executor(Store& store, Clock& clock)
    : store_(store),
      clock_(clock),
      time_(clock),
      claims_(store, time_),
      awaits_(store, time_),
      schedules_(store, time_),
      retention_(store, time_),
      counters_(store, time_, claims_) {
  make_sources();
  // C2.3: the server clock never goes back behind what the store saw. A
  // shared database is read at the first transaction (it may be out of
  // reach now).
  if (clock_.mode() == protocol::ClockMode::server && !store_.shared()) {
    clock_.raise(store_.clock_high_water());
  }
}

std::optional<protocol::Error> Executor::too_far(const protocol::Request& r, double now) {
  // The codec checked ttl > 0 and finite; the sum can still overflow, and an
  // infinite lease would never end.
  using protocol::Lease;
  if (protocol::op_info(r.op).lease == Lease::none) return std::nullopt;
  // The lease's ttl: the op's own, or complete_many's next's (none without next).
  const auto ttl = std::visit(
      [](const auto& q) -> std::optional<double> {
        if constexpr (requires { q.ttl; }) {
          return q.ttl;
        } else if constexpr (requires { q.next; }) {
          return q.next ? std::optional<double>(q.next->ttl) : std::nullopt;
        } else {
          return std::nullopt;
        }
      },
      r.body);
  if (ttl && !std::isfinite(now + *ttl)) {
    return protocol::Error{ErrorCode::invalid_argument,
                           "field 'ttl' is too large: now + ttl overflows"};
  }
  return std::nullopt;
}

void Executor::roll_back() {
  store_.rollback();
  counters_.failed_commit();
  persisted_clock_ = 0;  // what this transaction stored is gone: store it again
}

protocol::Error Executor::abort_transaction(const std::string& what, const std::exception& e) {
  roll_back();
  const auto* se = dynamic_cast<const StoreError*>(&e);
  const std::string why = bounded(e.what());
  if (se && se->kind == StoreError::Kind::fatal) {
    if (fatal_.empty()) fatal_ = why;
    spdlog::error("{}: COMMIT's fsync failed, outcome unknown: {}", what, why);
    return {ErrorCode::outcome_unknown,
            std::string("the fsync of this request's commit failed; it may or may not have "
                        "been applied, and fenceqd stops: ") +
                why};
  }
  if (se && se->kind == StoreError::Kind::outcome_unknown) {
    spdlog::error("{}: the database connection broke during COMMIT, outcome unknown: {}", what,
                  why);
    return {ErrorCode::outcome_unknown,
            std::string("the database connection broke while this request was being committed; "
                        "it may or may not have been applied: ") +
                why};
  }
  if (se && se->kind != StoreError::Kind::internal) {
    // The database is out of reach (or kept conflicting): nothing of this
    // batch is known to be applied unless its commit was under way; the
    // client may try again. Fences make a repeated request safe.
    spdlog::warn("{} not applied, database unavailable: {}", what, why);
    return {ErrorCode::unavailable, std::string("the job store is unavailable: ") + why};
  }
  spdlog::error("{} failed and was rolled back: {}", what, why);
  return {ErrorCode::internal, std::string("store failed, nothing applied: ") + why};
}

std::optional<double> Executor::reap_due() {
  // Marking exhausted jobs dead only writes down what every read already
  // computes (their state is `dead` from the moment their last lease ends,
  // and no claim takes them), and stamps `finished` for purge. On a shared
  // database it runs at most every kReapEvery; on SQLite with every batch.
  const auto now = SteadyClock::now();
  if (store_.shared() && now < last_reap_ + kReapEvery) return std::nullopt;
  last_reap_ = now;
  return time_.parked_now();
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
  if (reconnected) claims_.mark_all_dirty();
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

bool Executor::side_transaction(const std::string& what, std::vector<Delivery>& out,
                                const std::function<bool(std::vector<Woken>&)>& work) {
  std::vector<Woken> woken;
  wakeups_unread_ = true;  // as a batch: wake-ups may be read meanwhile
  try {
    begin();
    if (!work(woken)) {
      store_.rollback();  // nothing changed: no commit, no fsync
      return true;
    }
    store_.commit();
    counters_.committed();
    for (auto& w : woken) out.push_back(ParkedClaims::deliver(w));
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
                     claims_.serve(woken);
                     return true;
                   });
  return out;
}

BatchReplies Executor::run(const std::vector<protocol::Decoded>& batch,
                           const std::vector<Token>& tokens, ReplyGate* gate) {
  BatchReplies out;
  out.replies.resize(batch.size());
  counters_.count_batch(batch.size());
  wakeups_unread_ = true;  // the client library may read wake-ups meanwhile

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
      for (auto& w : woken) out.woken.push_back(ParkedClaims::deliver(w));
      return out;
    } catch (const StoreError& e) {
      // The transaction was rolled back whole: what may run it again is a
      // conflict with another writer of a shared database (deadlock,
      // serialization), and, on a shared database, an internal error of a
      // batch with a side step, which may be what failed (a reap whose
      // settling trigger broke, say; or a trigger an administrator added):
      // its requests then run without side steps, which stay off for a
      // while. (SQLite's side steps are this process's own code: a failure
      // there fails the batch.)
      const bool side_step = e.kind == StoreError::Kind::internal && side_steps_ &&
                             store_.shared();
      if ((e.kind != StoreError::Kind::retry && !side_step) || attempt >= kMaxAttempts) {
        fail_batch(batch, tokens, e, out, woken);
        return out;
      }
      roll_back();
      if (side_step) {
        side_steps_off_until_ = SteadyClock::now() + kSideStepsOff;
        spdlog::error("a batch with a reap or retention step failed; its {} requests run again "
                      "without it, and such steps stop for {} s: {}",
                      batch.size(), kSideStepsOff.count(), bounded(e.what()));
      } else {
        spdlog::debug("batch of {} requests conflicted (attempt {}), running it again: {}",
                      batch.size(), attempt, e.what());
      }
      // Parked claims it woke go back to the front.
      unpark_batch(tokens, true);
      for (auto it = woken.rbegin(); it != woken.rend(); ++it) {
        if (in_batch(tokens, it->parked.token)) continue;
        claims_.put_back(std::move(it->parked));
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
  counters_.start_batch();
  awaits_.forget_writes();
  side_steps_ = false;
  if (touches_store) {
    begin();
    if (SteadyClock::now() < side_steps_off_until_) return;
    if (auto t = reap_due()) {
      calls_.push_back({ReapParams{*t}, b.batch.size()});  // of no request
    }
    // A chunk of the finished jobs past their queue's retention rides along.
    if (auto p = retention_.rider()) calls_.push_back({*p, b.batch.size()});
    side_steps_ = !calls_.empty();
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
  // A parking op's `wait` (await, enqueue_and_wait, claim_next).
  const double wait = std::visit(
      [](const auto& q) -> double {
        if constexpr (requires { q.wait; }) {
          return q.wait;
        } else {
          return 0;
        }
      },
      r.body);
  if (parks == Park::await && wait > 0 && none) {
    if (awaits_.park(b.tokens.at(i), r)) return;  // answered once the job is finished, or nil
    // Full: refused, not nil, which would read as a wait that ended.
    b.out.replies[i] = protocol::encode_error(
        {protocol::ErrorCode::unavailable, "too many awaits parked (" + std::to_string(kMaxParked) +
                                               "): try again later"},
        d.rid);
    return;
  }
  if (parks == Park::claim && wait > 0 && none && claims_.park(b.tokens.at(i), r)) {
    return;  // no reply yet
  }
  counters_.count_writes(r, result);
  b.out.replies[i] = protocol::encode_ok(result, d.rid);
  if (b.gate) b.gate->after(i, b.out.replies[i]->size());
}

bool Executor::flush(const BatchRun& b, bool commit_after) {
  if (calls_.empty() && !commit_after) return false;
  const bool committed = store_.run(calls_, results_, commit_after);
  awaits_.note_writes(calls_, results_);
  if (retention_.riding()) {
    for (std::size_t k = 0; k < calls_.size(); ++k) {
      const auto* p = std::get_if<PurgeParams>(&calls_[k].params);
      if (p && p->retention) retention_.ridden(results_[k]);
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
  double now = facts.clock ? time_.for_request(r) : 0.0;
  if (b.gate && !protocol::op_writes(r.op)) {
    if (auto refusal = b.gate->before(i)) {
      b.out.replies[i] = protocol::encode_error(*refusal, d.rid);
      return;
    }
  }
  if (facts.by_reader == ByReader::counts && counters_.defer_count(b.tokens.at(i), d.rid, r.op)) {
    return;  // counted by the reader once this batch has committed (counted())
  }
  if (auto err = too_far(r, now)) {
    b.out.replies[i] = protocol::encode_error(*err, d.rid);
    return;
  }
  if (facts.by_reader == ByReader::page && counters_.defer_page(b.tokens.at(i), d.rid, r, now)) {
    return;  // read by the reader once this batch has committed
  }
  if (plan(r, now, i)) return;
  // A read stands alone: what is queued before it is run and answered
  // first, so that its reply sees them and the reply bound counts them.
  flush(b, false);
  if (r.op == protocol::Op::purge && !r.as<protocol::req::Purge>().paged) {
    // without a filter: bounded (purge_all.cpp)
    if (auto o = purge_first(r, now, b.tokens.at(i), d.rid)) answer(b, i, std::move(*o));
    return;
  }
  answer(b, i, apply(r, now));
}

void Executor::commit_batch(const BatchRun& b, bool writes, std::vector<Woken>& woken) {
  // On a shared database the COMMIT goes with the batch's statements: one
  // round trip in all, unless parked claims may be served in this
  // transaction (then they are tried first, as on SQLite).
  const bool fold = writes && claims_.empty() && store_.shared();
  if (fold) {
    if (auto mark = clock_to_persist()) {
      calls_.push_back({ClockMarkParams{*mark}, b.batch.size()});
    }
  }
  if (flush(b, fold)) {
    side_steps_ = false;  // committed: nothing may run again after this
    // Claims this batch parked after its writes: looked at again at once.
    for (const auto& q : store_.take_queue_changes().freed) claims_.mark_dirty(q);
  } else {
    // A write may have freed a job of a queue with parked claims, and time
    // (the client clock) may have moved: try the claims that may find one.
    if (writes) {
      // A write may have ended a lease of a queue whose limit holds claims back.
      claims_.mark_limited_dirty();
      claims_.serve(woken);
    }
    if (writes) persist_clock();
    store_.commit();
    side_steps_ = false;
  }
  counters_.batch_committed();
  awaits_.serve_noted(b.out.woken);
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
  unpark_batch(tokens, true);
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
  while (!purges_.empty()) run_purges(out.woken);  // a purge's reply waits for its steps
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
      replies[i] = protocol::encode_ok(ParkedClaims::nothing_for(*batch[i].request), batch[i].rid);
    }
  }
  unpark_batch(tokens, false);
  return replies;
}

void Executor::unpark_batch(const std::vector<Token>& tokens, bool deferred) {
  for (Token t : tokens) {
    claims_.unpark(t);
    awaits_.unpark(t);
  }
  drop_purges(tokens);
  if (!deferred) return;
  awaits_.forget_writes();
  counters_.drop_deferred(tokens);
}

void Executor::wake(std::vector<Delivery>& out) {
  wakeups_unread_ = false;
  if (!store_.shared()) return;
  auto w = store_.shared()->take_wakeups();
  if (w.all) claims_.mark_all_dirty();
  for (const auto& q : w.queues) claims_.mark_dirty(q);
  if (claims_.dirty()) retry_parked(out);
}

void Executor::retry_parked(std::vector<Delivery>& out) {
  const auto changes_before = store_.total_changes();
  side_transaction("retrying parked claims", out, [&](std::vector<Woken>& woken) {
    reap();
    claims_.serve(woken);
    // Nothing became claimable: rolled back, no commit, no fsync.
    if (store_.total_changes() == changes_before) return false;
    persist_clock();
    return true;
  });
}

std::optional<Executor::SteadyClock::time_point> Executor::waits_due() const {
  if (!store_.ends_by_time() || !time_.server()) return std::nullopt;
  // Only while no batch reaps (an idle daemon): batches reap every
  // kReapEvery at most. Not while side steps are off after one failed (a
  // reap that fails keeps failing: it is tried again when they are back).
  return std::max({last_waits_, last_reap_ + kReapEvery, side_steps_off_until_}) + kReapEvery;
}

void Executor::end_waits(std::vector<Delivery>& out) {
  last_waits_ = SteadyClock::now();
  const auto changes_before = store_.total_changes();
  const bool done =
      side_transaction("ending waits and deadlines", out, [&](std::vector<Woken>& woken) {
        store_.end_waits(time_.parked_now());  // not the reap of exhausted jobs: reads see them
        claims_.serve(woken);
        // Nothing ended: rolled back, no commit, no fsync.
        if (store_.total_changes() == changes_before) return false;
        persist_clock();
        return true;
      });
  if (!done) side_steps_off_until_ = SteadyClock::now() + kSideStepsOff;
}

void Executor::run_schedules(std::vector<Delivery>& out) {
  if (!schedules_.ready()) return;
  const bool done = side_transaction("enqueueing periodic jobs", out, [&](std::vector<Woken>& woken) {
    schedules_.enqueue_due();
    claims_.serve(woken);
    persist_clock();
    return true;
  });
  if (!done) schedules_.retry_later();
}

void Executor::run_retention(std::vector<Delivery>& out) {
  const bool done = side_transaction("removing finished jobs by retention", out,
                                     [&](std::vector<Woken>&) {
                                       retention_.pass();
                                       return true;
                                     });
  if (!done) retention_.failed();
}

std::optional<Executor::SteadyClock::time_point> Executor::settle_tick() const {
  if (!store_.settle_left()) return std::nullopt;
  return settle_at_;
}

void Executor::run_settle(std::vector<Delivery>& out) {
  // A few milliseconds a step, then the requests that came meanwhile: the
  // serving loop runs the next step at its next turn while some are left.
  // Parked claims are not served in the step's transaction (on PostgreSQL
  // its COMMIT does not wait for the WAL, and a claim's must): the queues
  // of the children it made ready are looked at by retry_parked, when the
  // parked claims' source runs next (after this one, in the same turn).
  Store::SettleStep step;
  std::vector<std::string> freed;
  store_.relax_next_commit();  // no reply waits on a step (Store::relax_next_commit)
  const bool done = side_transaction("settling the children of finished jobs", out,
                                     [&](std::vector<Woken>&) {
                                       step = store_.settle_step(time_.parked_now());
                                       freed = std::move(store_.take_queue_changes().freed);
                                       if (!step.changed) return false;
                                       persist_clock();
                                       return true;
                                     });
  if (done && step.changed) {
    for (const auto& q : freed) claims_.mark_dirty(q);
  }
  const auto now = SteadyClock::now();
  if (!done) {
    // Doubling while the store fails (a database out of reach), up to a minute.
    settle_backoff_ = std::min(std::max(settle_backoff_ * 2, kSettleRetry),
                               std::chrono::milliseconds(60000));
    settle_at_ = now + settle_backoff_;
    return;
  }
  settle_backoff_ = {};
  if (step.left) {
    settle_at_ = now;
  } else if (store_.shared()) {
    settle_at_ = now + kSettlePoll;
  }
}

void Executor::drain_outbox(std::vector<Delivery>& out) {
  OutboxLedger* ledger = store_.outbox_ledger();
  if (!outbox_ || !ledger) return;
  auto h = outbox_->take();
  if (!h) return;
  std::uint64_t drained = 0, rejected = 0;
  std::int64_t high = 0;
  const bool done = side_transaction("draining the outbox", out, [&](std::vector<Woken>& woken) {
    drained = rejected = 0;
    ledger->forget(h->forget);
    const double now = time_.parked_now();
    for (const auto& row : h->rows) {
      high = std::max(high, row.seq);
      // Recorded already: its job was made before a crash (and may be done
      // and removed since); never twice (C3.21).
      if (!ledger->record(row.seq)) continue;
      if (auto why = outbox_row_error(row)) {
        ++rejected;
        spdlog::warn("--outbox: row {} (id {}) cannot be a job and is dropped: {}", row.seq,
                     client_text(row.id), *why);
        continue;
      }
      NewJob job{row.id, row.queue, row.payload ? &*row.payload : nullptr, row.priority,
                 row.delay, row.max_attempts};
      if (row.group) job.group = *row.group;
      job.max_runtime = row.max_runtime;
      if (!store_.enqueue(job, now)) {
        spdlog::info("--outbox: row {}: a job {} is already there (enqueue is idempotent by id)",
                     row.seq, client_text(row.id));
      }
      ++drained;
    }
    claims_.serve(woken);
    persist_clock();
    return true;
  });
  outbox_->done(done);
  if (done) {
    auto& c = outbox_->counts();
    c.drained.fetch_add(drained, std::memory_order_relaxed);
    c.rejected.fetch_add(rejected, std::memory_order_relaxed);
    if (high > c.high_water.load(std::memory_order_relaxed)) c.high_water.store(high);
  }
}

std::vector<Delivery> Executor::drain_parked(const protocol::Error& error) {
  std::vector<Delivery> out;
  claims_.drain(error, out);
  counters_.drain(error, out);
  awaits_.drain(error, out);
  drain_purges(error, out);
  return out;
}

}  // namespace fenceq::daemon
