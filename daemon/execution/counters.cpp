#include "execution/counters.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include <poll.h>

#include "base/metrics.hpp"
#include "execution/op_facts.hpp"
#include "base/logging.hpp"

namespace fenceq::daemon {

using protocol::Answer;
using protocol::ErrorCode;

void Counters::note_retried(const protocol::Request& r, const ClaimedJob& j) {
  if (j.attempts < kManyAttempts) return;
  ++batch_retried_.claims;
  // The queue it was claimed from (claim: by id, of no queue named).
  std::string queue(protocol::kDefaultQueue);
  if (r.op == protocol::Op::claim_next) queue = r.as<protocol::req::ClaimNext>().queue;
  if (r.op == protocol::Op::complete_next) queue = r.as<protocol::req::CompleteNext>().queue;
  if (r.op == protocol::Op::complete_many) {
    if (const auto& next = r.as<protocol::req::CompleteMany>().next) queue = next->queue;
  }
  batch_retried_.example = "job " + client_text(j.id) + " of queue " + client_text(queue) +
                           " (attempt " + std::to_string(j.attempts) + ")";
}

void Counters::log_retried() {
  retried_.claims += batch_retried_.claims;
  if (!batch_retried_.example.empty()) retried_.example = std::move(batch_retried_.example);
  batch_retried_ = {};
  const auto now = SteadyClock::now();
  if (retried_.claims == 0 || (retried_logged_ && now < *retried_logged_ + kManyAttemptsLogEvery)) {
    return;
  }
  spdlog::warn("{} claim(s) of jobs on their {}th attempt or later since the last such line, "
               "the last: {}; a job that fails (or whose lease runs out) every time is claimed "
               "again without end unless it has max_attempts; fix its worker, or give it "
               "max_attempts (it is then dead once they are used) and a retry delay",
               retried_.claims, kManyAttempts, retried_.example);
  retried_ = {};
  retried_logged_ = now;
}

void Counters::count_writes(const protocol::Request& r, const protocol::Result& result) {
  // Claims of jobs failing over and over, whatever the op that claimed them.
  if (const auto* one = std::get_if<ClaimedJob>(&result)) {
    note_retried(r, *one);
  } else if (const auto* jobs = std::get_if<protocol::ClaimedJobs>(&result)) {
    for (const auto& j : *jobs) note_retried(r, j);
  } else if (const auto* c = std::get_if<protocol::CompletedAndNext>(&result)) {
    if (c->next) note_retried(r, *c->next);
  } else if (const auto* m = std::get_if<protocol::CompletedManyAndNext>(&result)) {
    for (const auto& j : m->next) note_retried(r, j);
  }
  WriteCounts* w = nullptr;
  switch (op_facts(r.op).tally) {
    case Tally::none: return;
    case Tally::renew: w = &batch_writes_.renew; break;
    case Tally::complete: w = &batch_writes_.complete; break;
    case Tally::release: w = &batch_writes_.release; break;
    case Tally::fail: w = &batch_writes_.fail; break;
  }
  // Each job the op judged: one bool, or one per item of a batch.
  auto tally = [w](bool applied) { ++(applied ? w->applied : w->refused); };
  if (const auto* one = std::get_if<bool>(&result)) {
    tally(*one);
  } else if (const auto* c = std::get_if<protocol::CompletedAndNext>(&result)) {
    tally(c->completed);
  } else if (const auto* b = std::get_if<protocol::BoolList>(&result)) {
    for (bool applied : *b) tally(applied);
  } else if (const auto* m = std::get_if<protocol::CompletedManyAndNext>(&result)) {
    for (bool applied : m->completed) tally(applied);
  }
}

void Counters::committed() {
  ++stats_.commits;
  if (events_on_) {
    auto e = store_.event_notes()->take();  // keep_events() checked it
    if (events_.empty()) {
      events_ = std::move(e);
    } else {
      events_.insert(events_.end(), std::make_move_iterator(e.begin()),
                     std::make_move_iterator(e.end()));
    }
  }
  QueueTotals all;
  for (auto& [queue, n] : store_.take_queue_totals()) {
    all += n;
    auto it = totals_.find(queue);
    if (it == totals_.end()) {
      if (totals_.size() >= kMaxCountedQueues) {
        // Every queue name ever used stays (counters never go away while
        // the daemon runs): a bound against a client that makes up names.
        if (!std::exchange(warned_queues_, true)) {
          spdlog::warn("per-queue counters are kept for {} queues at most; queue {} and later "
                       "new ones count only in the global figures until fenceqd restarts",
                       kMaxCountedQueues, client_text(queue));
        }
        continue;
      }
      it = totals_.emplace(std::move(queue), QueueTotals{}).first;
    }
    it->second += n;
  }
  // This thread alone writes them: a load and a store each, no read-modify-write.
  auto add = [](std::atomic<std::uint64_t>& to, std::uint64_t n) {
    if (n) to.store(to.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  };
  add(throughput_.claimed, all.claimed);
  add(throughput_.completed, all.completed);
  add(throughput_.failed, all.failed);
  add(throughput_.commits, 1);
}

void Counters::batch_committed() {
  committed();
  log_retried();
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
    d.number = d.list ? reader_->request_list(*d.list, d.now, d.rid)
                      : reader_->request(time_.parked_now());
  }
}

protocol::Stats Counters::stats_snapshot(double now) {
  return stats_with(store_.queue_stats(now), claims_.size());
}

protocol::Stats Counters::stats_with(std::vector<protocol::QueueStats> queues,
                                     std::size_t waiting_claims) const {
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
  st.waiting_claims = waiting_claims;
  if (event_counts_) {
    st.events_published = event_counts_->published.load(std::memory_order_relaxed);
    st.events_dropped = event_counts_->dropped.load(std::memory_order_relaxed);
  }
  if (outbox_counts_) {
    const auto& o = *outbox_counts_;
    st.outbox = OutboxStats{o.pending.load(std::memory_order_relaxed),
                            o.lag.load(std::memory_order_relaxed),
                            o.drained.load(std::memory_order_relaxed),
                            o.rejected.load(std::memory_order_relaxed),
                            o.high_water.load(std::memory_order_relaxed)};
  }
  st.renew = stats_.renew;
  st.complete = stats_.complete;
  st.release = stats_.release;
  st.fail = stats_.fail;
  st.uptime = std::chrono::duration<double>(SteadyClock::now() - started_).count();
  return st;
}

bool Counters::defer_count(Token token, const std::optional<protocol::Rid>& rid,
                           protocol::Op op) {
  if (!reader_) return false;
  // Counted by the reader once this batch has committed (counted()).
  deferred_.push_back({token, rid, op, 0});
  return true;
}

bool Counters::defer_page(Token token, const std::optional<protocol::Rid>& rid,
                          const protocol::Request& r, double now) {
  if (!reader_) return false;
  // Read by the reader once this batch has committed: a page may read
  // every job, and the serving thread goes on meanwhile.
  deferred_.push_back({token, rid, r.op, 0, r.as<protocol::req::List>(), now});
  return true;
}

void Counters::drop_deferred(const std::vector<Token>& tokens) {
  std::erase_if(deferred_, [&](const Deferred& d) { return in_batch(tokens, d.token); });
}

void Counters::drain(const protocol::Error& error, std::vector<Delivery>& out) {
  for (const auto& d : deferred_) out.push_back({d.token, protocol::encode_error(error, d.rid), {}});
  deferred_.clear();
}

std::vector<Delivery> Counters::counted() {
  const std::size_t waiting_claims = claims_.size();
  std::vector<Delivery> out;
  if (!reader_) return out;
  auto c = reader_->latest();
  for (auto& page : reader_->take_lists()) {
    auto it = std::find_if(deferred_.begin(), deferred_.end(), [&](const Deferred& d) {
      return d.list && d.number == page.number;
    });
    if (it == deferred_.end()) continue;  // its client's batch failed meanwhile
    out.push_back({it->token, std::move(page.reply), {}});
    deferred_.erase(it);
  }
  if (c.number == 0) return out;
  last_counted_ = c.number;
  if (c.error.empty()) last_counts_ = c.queues;
  std::optional<protocol::Stats> st;
  std::erase_if(deferred_, [&](const Deferred& d) {
    if (d.list || d.number == 0 || d.number > c.number) return false;
    if (!c.error.empty()) {
      out.push_back({d.token,
                     protocol::encode_error({ErrorCode::unavailable, "counting jobs failed: " +
                                                                         c.error},
                                            d.rid),
                     {}});
      return true;
    }
    if (!st) st = stats_with(c.queues, waiting_claims);
    // stats answers the counts, metrics the same as Prometheus text.
    const bool as_stats = protocol::op_info(d.op).answer == Answer::stats;
    out.push_back({d.token,
                   as_stats ? protocol::encode_ok(protocol::Result{*st}, d.rid)
                            : protocol::encode_ok(protocol::Result{prometheus_text(*st)}, d.rid),
                   {}});
    return true;
  });
  return out;
}

void Counters::request_count() {
  if (reader_) reader_->request(time_.parked_now());
}

void Counters::count_now(std::chrono::milliseconds budget) {
  if (!reader_) return;
  const auto n = reader_->request(time_.parked_now());
  pollfd p{reader_->fd(), POLLIN, 0};
  const auto until = SteadyClock::now() + budget;
  while (SteadyClock::now() < until) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - SteadyClock::now());
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) break;
    counted();
    if (last_counted_ >= n) break;
  }
}

}  // namespace fenceq::daemon
