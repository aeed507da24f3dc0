#include "execution/parked_claims.hpp"

#include <algorithm>

namespace fenceq::daemon {

namespace {

// How often a parked claim of a queue whose limits held it back looks again
// (a lease ending elsewhere, a complete on another sidecar, the rate
// window moving on), in seconds.
constexpr double kLimitPoll = 0.05;

}  // namespace

protocol::Result ParkedClaims::nothing_for(const protocol::Request& r) {
  // In the shape the claim asked for: nil, or an empty array (`max`); nil
  // for an await (a parked await_job or enqueue_and_wait).
  if (r.op == protocol::Op::claim_next && r.as<protocol::req::ClaimNext>().max) {
    return protocol::Result{protocol::ClaimedJobs{}};
  }
  return protocol::Result{};
}

bool ParkedClaims::park(Token token, const protocol::Request& request) {
  if (by_token_.size() >= kMaxParked) return false;
  const auto& r = request.as<protocol::req::ClaimNext>();
  auto wait = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(r.wait));
  const bool first = !waiting_.contains(r.queue);
  insert({token, request, SteadyClock::now() + wait}, false);
  // The queue's wake time; a queue with claims parked already has it.
  if (first) {
    set_wake(waiting_.at(r.queue), r.queue, parked_wake(r.queue, time_.claim_time(request)));
  }
  return true;
}

void ParkedClaims::put_back(Parked p) {
  const auto queue = p.request.as<protocol::req::ClaimNext>().queue;
  insert(std::move(p), true);
  mark_dirty(queue);
}

void ParkedClaims::insert(Parked p, bool at_front) {
  auto& w = waiting_[p.request.as<protocol::req::ClaimNext>().queue];
  const Token token = p.token;
  const auto deadline = p.deadline;
  auto it = w.claims.insert(at_front ? w.claims.begin() : w.claims.end(), std::move(p));
  by_token_[token] = it;
  deadlines_.insert({deadline, token});
}

std::optional<ParkedClaims::Parked> ParkedClaims::unpark(Token token) {
  auto found = by_token_.find(token);
  if (found == by_token_.end()) return std::nullopt;
  auto it = found->second;
  Parked p = std::move(*it);
  by_token_.erase(found);
  deadlines_.erase({p.deadline, token});
  auto w = waiting_.find(p.request.as<protocol::req::ClaimNext>().queue);
  w->second.claims.erase(it);
  if (w->second.claims.empty()) {
    set_wake(w->second, w->first, std::nullopt);
    limited_waiting_.erase(w->first);
    waiting_.erase(w);
  }
  return p;
}

void ParkedClaims::mark_dirty(const std::string& queue) {
  auto w = waiting_.find(queue);
  if (w == waiting_.end() || w->second.dirty) return;
  w->second.dirty = true;
  dirty_.push_back(queue);
}

void ParkedClaims::mark_all_dirty() {
  for (const auto& [queue, w] : waiting_) mark_dirty(queue);
}

void ParkedClaims::mark_limited_dirty() {
  for (const auto& q : limited_waiting_) mark_dirty(q);
}

void ParkedClaims::set_wake(Waiters& w, const std::string& queue, std::optional<double> at) {
  if (w.wake_at != kNever) wakes_.erase({w.wake_at, queue});
  w.wake_at = at.value_or(kNever);
  if (w.wake_at != kNever) wakes_.insert({w.wake_at, queue});
}

bool ParkedClaims::due() const {
  return !dirty_.empty() || (!wakes_.empty() && wakes_.begin()->first <= time_.parked_now());
}

void ParkedClaims::serve(std::vector<Woken>& woken) {
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
  const double now = time_.parked_now();
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
      const auto& c = p.request.as<protocol::req::ClaimNext>();
      const double t = time_.claim_time(p.request);
      auto jobs = store_.claim_next(q, c.owner, t, c.ttl, c.max.value_or(1));
      if (jobs.empty()) {
        set_wake(w->second, q, parked_wake(q, t));
        break;
      }
      auto parked = unpark(p.token);
      woken.push_back({std::move(*parked), std::move(jobs)});
    }
  }
}

void ParkedClaims::expire(SteadyClock::time_point now, std::vector<Delivery>& out) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    auto p = unpark(deadlines_.begin()->second);
    out.push_back({p->token, protocol::encode_ok(nothing_for(p->request), p->request.rid), {}});
  }
}

void ParkedClaims::drain(const protocol::Error& error, std::vector<Delivery>& out) {
  while (!by_token_.empty()) {
    auto p = unpark(by_token_.begin()->first);
    out.push_back({p->token, protocol::encode_error(error, p->request.rid), {}});
  }
}

std::optional<ParkedClaims::SteadyClock::time_point> ParkedClaims::next_tick() const {
  if (by_token_.empty()) return std::nullopt;
  if (!dirty_.empty()) return SteadyClock::time_point::min();  // at once (Source::kAtOnce)
  auto next = deadlines_.begin()->first;
  if (time_.server() && !wakes_.empty()) {
    // Store time to steady time: how long until the wake time comes.
    const double in = std::max(0.0, wakes_.begin()->first - time_.parked_now());
    const auto at = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                             std::chrono::duration<double>(std::min(in, 3600.0)));
    next = std::min(next, at);
  }
  return next;
}

Delivery ParkedClaims::deliver(Woken& w) {
  const auto& c = w.parked.request.as<protocol::req::ClaimNext>();
  std::vector<Lease> claimed;
  for (const auto& j : w.jobs) claimed.push_back({j.id, c.owner, j.fence});
  const auto& rid = w.parked.request.rid;
  // In the shape the request asked for: one job, or an array (`max`).
  auto reply = c.max
                   ? protocol::encode_ok(protocol::Result{std::move(w.jobs)}, rid)
                   : protocol::encode_ok(protocol::Result{std::move(w.jobs.front())}, rid);
  return {w.parked.token, std::move(reply), std::move(claimed)};
}

// --- queue settings ------------------------------------------------------------

std::optional<double> ParkedClaims::parked_wake(const std::string& q, double now) {
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
