#include "base/metrics.hpp"

#include <fmt/format.h>

namespace fenceq::daemon {
namespace {

// Label values escape backslash, double quote and newline.
std::string label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// The families of daemon options: --events, --outbox.
void optional_families(std::string& out, const protocol::Stats& st) {
  auto it = std::back_inserter(out);
  if (st.events_published) {  // with --events
    family(out, "fenceq_events_published_total", "counter",
           "Job events published on the --events socket.");
    fmt::format_to(it, "fenceq_events_published_total {}\n", *st.events_published);
    family(out, "fenceq_events_dropped_total", "counter",
           "Job events dropped: a subscriber was 10,000 events behind.");
    fmt::format_to(it, "fenceq_events_dropped_total {}\n", st.events_dropped.value_or(0));
  }
  if (st.outbox) {  // with --outbox
    family(out, "fenceq_outbox_pending", "gauge",
           "Rows in the application's outbox at the drain's last look.");
    fmt::format_to(it, "fenceq_outbox_pending {}\n", st.outbox->pending);
    family(out, "fenceq_outbox_lag_seconds", "gauge",
           "Age of the oldest row in the application's outbox (0: none).");
    fmt::format_to(it, "fenceq_outbox_lag_seconds {}\n", st.outbox->lag);
    family(out, "fenceq_outbox_drained_total", "counter", "Outbox rows made jobs.");
    fmt::format_to(it, "fenceq_outbox_drained_total {}\n", st.outbox->drained);
    family(out, "fenceq_outbox_rejected_total", "counter",
           "Outbox rows dropped: they could not be jobs (logged).");
    fmt::format_to(it, "fenceq_outbox_rejected_total {}\n", st.outbox->rejected);
  }
}

}  // namespace

std::string prometheus_text(const protocol::Stats& st) {
  std::string out;
  auto it = std::back_inserter(out);
  family(out, "fenceq_jobs", "gauge", "Jobs by queue and state.");
  for (const auto& q : st.queues) {
    const auto name = label(q.queue);
    for (auto [state, n] : {std::pair{"ready", q.ready}, {"delayed", q.delayed},
                            {"leased", q.leased}, {"done", q.done}, {"dead", q.dead},
                            {"cancelled", q.cancelled}, {"blocked", q.blocked},
                            {"suspended", q.suspended}}) {
      fmt::format_to(it, "fenceq_jobs{{queue=\"{}\",state=\"{}\"}} {}\n", name, state, n);
    }
  }
  family(out, "fenceq_oldest_ready_age_seconds", "gauge",
         "How long the oldest claimable job of a queue has waited.");
  for (const auto& q : st.queues) {
    fmt::format_to(it, "fenceq_oldest_ready_age_seconds{{queue=\"{}\"}} {}\n", label(q.queue),
                   q.oldest_ready_age);
  }
  // Per queue, since the daemon started (stats' "totals"); a queue with no
  // job left keeps its counters.
  struct PerQueue {
    const char* name;
    const char* help;
    std::uint64_t QueueTotals::*field;
  };
  static constexpr PerQueue kPerQueue[] = {
      {"fenceq_jobs_claimed_total",
       "Jobs claimed (claim, claim_next, the next jobs of complete_next and complete_many).",
       &QueueTotals::claimed},
      {"fenceq_jobs_completed_total", "Completes applied (the job is done).",
       &QueueTotals::completed},
      {"fenceq_jobs_failed_total", "Fails applied (the current lease reported a failure).",
       &QueueTotals::failed},
      {"fenceq_jobs_retried_total",
       "Jobs made claimable again: a fail with attempts left, or retry of a dead job.",
       &QueueTotals::retried},
      {"fenceq_jobs_dead_total",
       "Jobs that became dead: a fail on the last attempt, or the last attempt's lease ended.",
       &QueueTotals::dead},
      {"fenceq_leases_expired_total",
       "Leases that ran out unfinished, counted when a claim took the job over or the job died "
       "of it.",
       &QueueTotals::expired},
      {"fenceq_jobs_removed_total",
       "Finished jobs the queue's retention (keep_done, keep_dead, keep_cancelled) removed.",
       &QueueTotals::removed},
      {"fenceq_jobs_deadline_passed_total",
       "Jobs that became dead because their deadline passed before a claim took them.",
       &QueueTotals::deadline_passed},
  };
  for (const auto& f : kPerQueue) {
    family(out, f.name, "counter", f.help);
    for (const auto& q : st.queues) {
      fmt::format_to(it, "{}{{queue=\"{}\"}} {}\n", f.name, label(q.queue), q.totals.*f.field);
    }
  }
  family(out, "fenceq_stale_writes_refused_total", "counter",
         "Fenced writes refused because their lease was not the job's current one (stale, "
         "expired, released, never held), by queue and op; batch items one each.");
  for (const auto& q : st.queues) {
    const auto name = label(q.queue);
    for (auto [op, n] : {std::pair<const char*, std::uint64_t>{"renew", q.totals.refused.renew},
                         {"complete", q.totals.refused.complete},
                         {"release", q.totals.refused.release},
                         {"fail", q.totals.refused.fail}}) {
      fmt::format_to(it, "fenceq_stale_writes_refused_total{{queue=\"{}\",op=\"{}\"}} {}\n",
                     name, op, n);
    }
  }
  family(out, "fenceq_requests_total", "counter", "Requests served.");
  fmt::format_to(it, "fenceq_requests_total {}\n", st.requests);
  family(out, "fenceq_batches_total", "counter", "Batches of requests applied together.");
  fmt::format_to(it, "fenceq_batches_total {}\n", st.batches);
  family(out, "fenceq_commits_total", "counter", "Transactions committed.");
  fmt::format_to(it, "fenceq_commits_total {}\n", st.commits);
  family(out, "fenceq_failed_commits_total", "counter",
         "Transactions that failed and were rolled back.");
  fmt::format_to(it, "fenceq_failed_commits_total {}\n", st.failed_commits);
  family(out, "fenceq_mean_batch_size", "gauge", "Requests per batch since start.");
  fmt::format_to(it, "fenceq_mean_batch_size {}\n", st.mean_batch);
  family(out, "fenceq_fenced_writes_total", "counter",
         "Writes carrying owner and fence (batch items one each), by op: applied, or refused "
         "because the lease was not the job's current one (stale, expired, released, never held).");
  for (const auto& [op, w] : {std::pair<const char*, const WriteCounts&>{"renew", st.renew},
                              {"complete", st.complete},
                              {"release", st.release},
                              {"fail", st.fail}}) {
    fmt::format_to(it, "fenceq_fenced_writes_total{{op=\"{}\",outcome=\"applied\"}} {}\n", op,
                   w.applied);
    fmt::format_to(it, "fenceq_fenced_writes_total{{op=\"{}\",outcome=\"refused\"}} {}\n", op,
                   w.refused);
  }
  family(out, "fenceq_waiting_claims", "gauge", "claim_next requests parked, waiting for a job.");
  fmt::format_to(it, "fenceq_waiting_claims {}\n", st.waiting_claims);
  optional_families(out, st);
  family(out, "fenceq_uptime_seconds", "gauge", "Seconds since the daemon started.");
  fmt::format_to(it, "fenceq_uptime_seconds {}\n", st.uptime);
  return out;
}

}  // namespace fenceq::daemon
