// fenceq's data types, as the daemon answers them: shared by the C++ client's
// public API and the wire codec (one definition for both).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fenceq {

// A job as the daemon stores it (contract C3.2).
struct JobState {
  std::string id;
  std::optional<std::string> owner;   // empty when no lease was taken or it was released
  double until = 0;                   // lease end, seconds (C2.1)
  std::int64_t fence = 0;             // grows by one with every claim, never goes back
  std::optional<std::string> result;  // set by the one successful complete
  bool done = false;
  // What the last renew of the current (or last) lease reported; none until
  // one did, and a new claim clears it. On the wire only when set.
  std::optional<std::string> progress = std::nullopt;
  bool operator==(const JobState&) const = default;
};

// What `ping` answers.
struct ServerInfo {
  int protocol = 1;
  std::string version;
  std::string clock;  // "server" or "client"
  // The reply also carries `ops`: each op's fields (ping with describe: true;
  // the daemon's side of the codec writes them from its op table).
  bool with_ops = false;
  // As a client reads it: each op's fields (ping with describe: true), empty
  // when the reply carried none.
  std::map<std::string, std::vector<std::string>> ops;
  bool operator==(const ServerInfo&) const = default;
};

// A job's payload: bytes, sent as msgpack bin (binary) or str, and given back
// the same way.
struct Payload {
  std::string bytes;
  bool binary = false;
  bool operator==(const Payload&) const = default;
};

// The job that claim_next took for the caller.
// A job's headers (C3.18): str to str, such as a W3C `traceparent`,
// given back with each claim and by `job`; at most kMaxHeadersBytes of
// keys and values in all.
using Headers = std::map<std::string, std::string>;

// A job's saved steps (C3.22): each step's name and the value its
// step_save stored (a payload, or nil), given back with each claim of the
// job and by `job`; none is ever overwritten.
using Steps = std::map<std::string, std::optional<Payload>>;

struct ClaimedJob {
  std::string id;
  std::int64_t fence = 0;
  std::optional<Payload> payload;
  std::int64_t attempts = 0;  // claims so far, this one included
  // The jobs it waited for (`after`, C3.13), in id order; on the wire
  // only when it has some.
  std::vector<std::string> after = {};
  // Its headers (C3.18); on the wire only when it has some.
  Headers headers = {};
  // Its saved steps (C3.22); on the wire only when it has some.
  Steps steps = {};
  // C3.23: the value of the signal that woke it since its last suspend
  // (nil too); on the wire as `signal` only when `signalled`.
  bool signalled = false;
  std::optional<Payload> signal = std::nullopt;
  bool operator==(const ClaimedJob&) const = default;
};

// What complete_next answers: whether the complete was accepted, and the next
// job claimed (whatever the complete's outcome).
struct CompletedAndNext {
  bool completed = false;
  std::optional<ClaimedJob> next;
  bool operator==(const CompletedAndNext&) const = default;
};

// A job to create (enqueue_many): its id and the options enqueue takes.
// Claims a job gets before it is dead when its enqueue (or schedule) does not
// say: a job that fails every time is not retried without end
// (docs/contract.md, "Work queue fields").
// An explicit 0 still means no limit.
inline constexpr std::int64_t kDefaultMaxAttempts = 25;

struct JobSpec {
  std::string id;
  std::string queue = "default";
  std::optional<Payload> payload;
  std::int64_t priority = 0;      // higher first; ties in enqueue order
  double delay = 0;               // seconds before it can be claimed
  std::int64_t max_attempts = kDefaultMaxAttempts;  // claims before it is dead; 0: no limit
  // The unique key (C3.10): while a job of this queue and key is
  // unfinished, or was enqueued within unique_for seconds (> 0), none is
  // created; `replace` hands such a job that is not leased this one's
  // payload, priority, max_attempts and delay instead (debounce).
  std::optional<std::string> key = std::nullopt;
  double unique_for = 0;
  bool replace = false;
  // The job's group (C3.11), such as a customer: claim_next serves the
  // groups of a priority in turn, and a queue's group_* settings limit
  // each group. None: in no group, limited by no group setting.
  std::optional<std::string> group = std::nullopt;
  // The jobs it waits for (C3.13; `after` on the wire): it is blocked
  // until each is done. When one becomes dead or cancelled the job is
  // cancelled too, unless `after_run` (after_failure "run"): then that
  // parent no longer holds it back.
  std::vector<std::string> parents = {};
  bool after_run = false;
  // A hard cap on one attempt, in seconds from its claim (C3.15; 0: none):
  // no renew carries the lease past it, and at it the attempt ends as a
  // failure ("max_runtime exceeded") with the fence raised.
  double max_runtime = 0;
  // Its headers (C3.18): trace context and the like, given back with
  // each claim of it and by `job`.
  Headers headers = {};
  // C3.24: Unix seconds; a job not claimed by then is never claimed, and
  // becomes dead with the error "deadline passed" (0: none).
  double deadline = 0;
  bool operator==(const JobSpec&) const = default;
};

// What an enqueue with a key answers: the job created, or the one found
// under its key (or its id) instead. In a batch's answer, `keyed` says
// whether the entry carried a key (a map on the wire) or not (a bool,
// `created`; `id` then empty).
struct Enqueued {
  std::string id;
  bool created = false;
  bool keyed = true;
  bool operator==(const Enqueued&) const = default;
};

// A lease its holder names in a batch (complete_many, renew_many): the job,
// the owner and fence it was claimed under, and for complete_many the result
// to store (nullopt: nil).
struct LeaseItem {
  std::string id;
  std::string owner;
  std::int64_t fence = 0;
  std::optional<std::string> result;
  // renew_many: stored with the lease when renewed (a default member
  // initializer, so that {id, owner, fence, result} still compiles cleanly).
  std::optional<std::string> progress = std::nullopt;
  bool operator==(const LeaseItem&) const = default;
};

// What complete_many with `next` answers: each complete's outcome, in order,
// and the jobs claimed after them.
struct CompletedManyAndNext {
  std::vector<bool> completed;
  std::vector<ClaimedJob> next;
  bool operator==(const CompletedManyAndNext&) const = default;
};

// A job's state as `list` filters by and `stats` counts: ready (claimable
// now), delayed (not before a time), leased, done, dead (out of attempts),
// cancelled (by `cancel`: final, like dead; `retry` revives it).
// suspended: waiting for a signal (C3.23).
enum class JobStatus { ready, delayed, leased, done, dead, cancelled, blocked, suspended };

// One row of `list`.
struct JobInfo {
  std::string id;
  std::string queue;
  JobStatus status = JobStatus::ready;
  std::int64_t priority = 0;
  std::int64_t attempts = 0;
  std::int64_t max_attempts = 0;  // 0: no limit
  std::int64_t fence = 0;
  std::optional<std::string> owner;
  double until = 0;
  double not_before = 0;
  std::optional<std::string> error;  // the last error a `fail` reported
  std::optional<std::string> progress = std::nullopt;  // as JobState::progress
  double created = 0;  // when it was enqueued (Unix seconds; 0 for jobs of a version-1 database)
  std::optional<std::string> key = std::nullopt;  // its unique key; on the wire only when set
  std::optional<std::string> group = std::nullopt;  // its group; on the wire only when set
  bool operator==(const JobInfo&) const = default;
};

// The order of `list` rows: by id, or by when the jobs were enqueued (then by
// id), oldest or newest first.
enum class ListOrder { id, created, created_desc };

// What `job` answers: a job's whole record, its `list` row with its result
// and its payload.
struct JobDetail {
  JobInfo info;
  std::optional<std::string> result;
  std::optional<Payload> payload;
  // C3.13, on the wire only when not empty, each in id order: the jobs
  // it waits (or waited) for, and those of its children that are still
  // blocked (at most kMaxBlockedChildren).
  std::vector<std::string> after = {};
  std::vector<std::string> blocked_children = {};
  Headers headers = {};  // C3.18; on the wire only when it has some
  Steps steps = {};      // C3.22; on the wire only when it has some
  // C3.23, on the wire only when set: the signal that woke it since its
  // last suspend (`signal`), and while it is suspended, when its wait ends
  // and what then (`suspended`: {timeout, on_timeout}).
  bool signalled = false;
  std::optional<Payload> signal = std::nullopt;
  std::optional<double> suspend_timeout = std::nullopt;
  bool suspend_fails = false;
  bool operator==(const JobDetail&) const = default;
};

// What `results` answers for one job (C3.12): its state and its result
// (nil until a complete stored one).
struct JobOutcome {
  JobStatus status = JobStatus::ready;
  std::optional<std::string> result;
  // The job has a result that this reply does not hold: past the
  // reply's byte budget (kMaxResultsBytes), or asked with states_only. Ask
  // again for it. On the wire only when true.
  bool omitted = false;
  bool operator==(const JobOutcome&) const = default;
};
// `results`: each id asked for, once, in the order asked, with its outcome,
// or nullopt for an id that does not exist.
using JobResults = std::vector<std::pair<std::string, std::optional<JobOutcome>>>;

// What a bulk action answers (C3.16: retry_many, cancel_many, purge with a
// filter): how many jobs it changed, and whether jobs that match are left
// (the next request goes on where this one stopped).
struct BulkOutcome {
  std::int64_t count = 0;
  bool more = false;
  bool operator==(const BulkOutcome&) const = default;
};

// A queue's retention (C3.17): finished jobs older than this many seconds
// (counted from when they finished) are removed by the daemon itself; none:
// kept until purged.
struct Retention {
  std::optional<double> keep_done, keep_dead, keep_cancelled;
  bool any() const { return keep_done || keep_dead || keep_cancelled; }
  bool operator==(const Retention&) const = default;
};

// What happened to one queue's jobs since the daemon started (stats'
// "totals", the fenceq_jobs_*_total counters of /metrics), counted when the
// transaction that did it committed. On PostgreSQL each sidecar counts what
// its own statements did.
struct QueueTotals {
  std::uint64_t claimed = 0;    // jobs claimed: claim, claim_next, the next jobs of complete_next
                                // and complete_many, parked claims served
  std::uint64_t completed = 0;  // completes applied
  std::uint64_t failed = 0;     // fails applied
  std::uint64_t retried = 0;    // fails that left the job claimable again, and retry revivals
  std::uint64_t dead = 0;       // jobs that became dead: a fail on the last attempt, or the
                                // last attempt's lease ended (reaped)
  std::uint64_t expired = 0;    // leases that ended by time: taken over by a claim, or reaped
  std::uint64_t removed = 0;    // finished jobs the queue's retention removed (C3.17)
  std::uint64_t deadline_passed = 0;  // jobs dead because their deadline passed (C3.24)
  // Fenced writes refused because the lease was not the job's current one
  // (batch items one each); a write on an id that does not exist counts
  // only in Stats' global counts.
  struct Refused {
    std::uint64_t renew = 0, complete = 0, release = 0, fail = 0;
    bool operator==(const Refused&) const = default;
  } refused{};
  bool operator==(const QueueTotals&) const = default;
  QueueTotals& operator+=(const QueueTotals& o) {
    claimed += o.claimed;
    completed += o.completed;
    failed += o.failed;
    retried += o.retried;
    dead += o.dead;
    expired += o.expired;
    removed += o.removed;
    deadline_passed += o.deadline_passed;
    refused.renew += o.refused.renew;
    refused.complete += o.refused.complete;
    refused.release += o.refused.release;
    refused.fail += o.refused.fail;
    return *this;
  }
};

// A queue's settings (queue_config; docs/contract.md, "Queue settings"). A
// paused queue hands out no job; `max_leased` > 0: at most that many of its
// jobs leased at once; `rate` > 0: at most `rate` claims in any `per`
// seconds. Zeros: no limit. The group_ settings (C3.11) limit each group of
// the queue alike: at most `group_max_leased` of its jobs leased at once, at
// most `group_rate` claims in any `group_per` seconds.
struct QueueConfig {
  bool paused = false;
  std::int64_t max_leased = 0;
  std::int64_t rate = 0;
  double per = 1;
  std::int64_t group_max_leased = 0;
  std::int64_t group_rate = 0;
  double group_per = 1;
  // How many groups have settings of their own (group_config, C3.25).
  std::int64_t group_overrides = 0;
  // Whether any group setting holds a group's claims back.
  bool group_limited() const {
    return group_max_leased > 0 || group_rate > 0 || group_overrides > 0;
  }
  // Whether claims of the queue are held back at all.
  bool limited() const { return paused || max_leased > 0 || rate > 0 || group_limited(); }
  bool operator==(const QueueConfig&) const = default;
};

// One group's own settings (group_config, C3.25): each one set replaces the
// queue's group_max_leased, group_rate or group_per for that group; nullopt
// follows the queue's.
struct GroupOverride {
  std::optional<std::int64_t> max_leased;
  std::optional<std::int64_t> rate;
  std::optional<double> per;
  bool operator==(const GroupOverride&) const = default;
};

struct QueueStats {
  std::string queue;
  std::int64_t ready = 0, delayed = 0, leased = 0, done = 0, dead = 0;
  std::int64_t cancelled = 0;  // 0 from a daemon older than this client
  std::int64_t blocked = 0;    // waiting for other jobs (C3.13); on the wire only when > 0
  std::int64_t suspended = 0;  // waiting for a signal (C3.23); on the wire only when > 0
  double oldest_ready_age = 0;  // seconds the oldest ready job has waited; 0 if none
  // Counters since the daemon started; zeros from a daemon older than this
  // client. A queue with counters and no job left is listed with zero gauges.
  QueueTotals totals{};
  // The queue's settings, when any was set (queue_config); on the wire as
  // the keys paused, max_leased, rate and per, only then.
  std::optional<QueueConfig> config = std::nullopt;
  // Groups with a ready job (C3.11); on the wire only when > 0.
  std::int64_t groups_waiting = 0;
  // Its groups' own settings (C3.25), the first kMaxStatsOverrides by group
  // name (config->group_overrides counts them all); on the wire as
  // group_config only when there are any.
  std::vector<std::pair<std::string, GroupOverride>> group_config{};
  // Its retention (C3.17); on the wire as keep_done, keep_dead and
  // keep_cancelled, each only when set.
  Retention retention{};
  bool operator==(const QueueStats&) const = default;
};

// The fenced writes of one op since the daemon started: applied, or refused
// because the lease they carried was not the job's current one (stale,
// expired, released, or never held). Batch items count one each.
struct WriteCounts {
  std::uint64_t applied = 0, refused = 0;
  bool operator==(const WriteCounts&) const = default;
};

// A periodic job (schedule_set): at each tick of `cron` in zone `tz`, one job
// of `queue` whose id is `name@<tick as YYYY-MM-DDTHH:MMZ>`.
struct Schedule {
  std::string name;
  std::string cron;
  std::string tz = "UTC";
  std::string queue = "default";
  std::optional<Payload> payload;
  std::int64_t priority = 0;
  std::int64_t max_attempts = 0;
  // schedule_list only: the next tick (Unix seconds; 0: none within 5 years)
  // and the last tick enqueued (nullopt: none yet).
  double next = 0;
  std::optional<double> last;
  bool operator==(const Schedule&) const = default;
};

// One message of the events stream (fenceqd --events; PROTOCOL.md, "Events"):
// a committed change of a job.
struct Event {
  std::uint64_t seq = 0;  // 1, 2, ... per daemon run
  double t = 0;           // the daemon's wall clock when published (Unix seconds)
  std::string event;      // enqueued, claimed, completed, failed, retried, dead, ...
  std::string id, queue;
  std::int64_t fence = 0;
  std::optional<std::string> owner;  // claimed only
  std::optional<std::string> group;
  bool operator==(const Event&) const = default;
};

// With --outbox (C3.21): the application's outbox, drained into jobs.
struct OutboxStats {
  std::int64_t pending = 0;      // rows in the outbox at the drain's last look
  double lag = 0;                // seconds: the age of the oldest of them (0: none)
  std::uint64_t drained = 0;     // rows made jobs since the daemon started
  std::uint64_t rejected = 0;    // rows dropped since then: they could not be jobs
  std::int64_t high_water = 0;   // the highest seq drained since then
  bool operator==(const OutboxStats&) const = default;
};

// What `stats` answers.
struct Stats {
  std::vector<QueueStats> queues;
  std::uint64_t requests = 0, commits = 0, batches = 0, failed_commits = 0;
  double mean_batch = 0;             // requests per batch since start
  std::uint64_t waiting_claims = 0;  // claim_next requests parked right now
  double uptime = 0;                 // seconds
  // With --events (C3.19): events published, and dropped for a slow subscriber.
  std::optional<std::uint64_t> events_published, events_dropped;
  std::optional<OutboxStats> outbox;  // with --outbox only
  // renew, complete, release, fail (the ops that carry owner and fence).
  WriteCounts renew, complete, release, fail;
  bool operator==(const Stats&) const = default;
};

}  // namespace fenceq
