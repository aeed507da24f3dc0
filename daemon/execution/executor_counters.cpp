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
using executor_detail::kAwaitSweep;
using executor_detail::kScheduleReread;

void Executor::count_writes(const protocol::Request& r, const protocol::Result& result) {
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

std::vector<Delivery> Executor::counted() {
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
    if (!st) st = stats_with(c.queues);
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

}  // namespace fenceq::daemon
