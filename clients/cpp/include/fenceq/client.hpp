// fenceq C++ client: talks to a fenceqd over ZeroMQ.
//
// Every write carries the owner and the fence (the token `claim` returned), and
// the daemon refuses any write whose lease is no longer current. A refusal by
// the contract is a value: an empty optional or `false`. Bad arguments, error
// replies, timeouts and transport failures throw fenceq::Error.
//
//   fenceq::Client c;                                  // the endpoint: resolve_endpoint()
//   c.enqueue("job-7");
//   if (auto fence = c.claim("job-7", "worker-a", 30)) {
//     ... do the work, calling c.renew("job-7", "worker-a", *fence, 30) while it runs ...
//     bool stored = c.complete("job-7", "worker-a", *fence, "result");  // false: lease lost
//   }
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fenceq/types.hpp"

namespace fenceq {

// An error reply, a timeout or a transport failure. code() is stable:
// the daemon's codes (bad_request, unknown_op, invalid_argument,
// unsupported_version, unavailable, internal, outcome_unknown) or the client
// codes every fenceq client shares (protocol/PROTOCOL.md, "Client errors"):
// "timeout" (no reply in time; the request may or may not have been applied,
// unless the message says it was not sent: no connection to the daemon
// took it within the timeout, ZMQ_IMMEDIATE),
// "unreachable" (before a Client's first reply: its ipc:// socket file is
// missing, not a socket or not this user's to connect to; nothing was sent),
// "transport" (the socket failed), "bad_reply" (the peer is not a v1 fenceqd),
// "misuse" (a Client used by two threads at once; nothing was sent). A bad
// argument the client refuses itself, before sending, is "invalid_argument".
class Error : public std::runtime_error {
 public:
  Error(std::string code, const std::string& message)
      : std::runtime_error(code + ": " + message), code_(std::move(code)) {}
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

// CURVE, for a tcp:// endpoint (fenceqd serves TCP only with CURVE,
// docs/operating.md "Access"): this client's key pair and the daemon's public key, each as its
// 40 Z85 characters. See curve_keys() to read them from key files.
struct CurveKeys {
  std::string server_public;
  std::string public_key;
  std::string secret_key;
};

struct ClientOptions {
  ClientOptions() = default;
  ClientOptions(std::chrono::milliseconds t) : timeout(t) {}  // NOLINT: ClientOptions{2s}
  // How long one call waits for its reply before throwing Error("timeout").
  std::chrono::milliseconds timeout{5000};
  // Set: the connection is encrypted and authenticated with these keys. A
  // daemon that does not know this client's public key never answers (the
  // calls time out). A malformed key throws Error("invalid_argument") when
  // the Client is made.
  std::optional<CurveKeys> curve;
  // The error saying that nothing serves the endpoint (code "unreachable")
  // ends with how to choose another: "to use another endpoint, " this, then
  // "or set FENCEQ_ENDPOINT" (for an endpoint given explicitly, that the
  // variable is then not read). A program that takes the endpoint its own
  // way says that way here (the fenceq tool: "give --endpoint").
  std::string choose_endpoint = "pass it to fenceq::Client's constructor";
};

// This client's key pair from a key file written by `fenceqd --curve-keygen
// FILE` (its `public-key = "…"` and `secret-key = "…"` lines), with the
// daemon's public key as keygen printed it (`public-key = "…"`) or bare.
// Throws Error("invalid_argument") naming the file and what is wrong.
CurveKeys curve_keys(const std::string& key_file, const std::string& server_public);

// Client::enqueue's options for the work queue (see there).
struct EnqueueOptions {
  std::string queue = "default";
  std::optional<Payload> payload;
  std::int64_t priority = 0;
  double delay = 0;
  std::int64_t max_attempts = kDefaultMaxAttempts;  // 0: no limit
  std::optional<double> now;  // client clock only; default: the latest `now` seen
  // The unique key (C3.10): no job is created while a job of the queue and
  // key is unfinished, or (unique_for > 0 seconds) was enqueued that
  // recently; with `replace` such a job that is not leased takes this one's
  // payload, priority, max_attempts and delay (debounce). enqueue_unique()
  // answers which job holds the key.
  std::optional<std::string> key = std::nullopt;
  double unique_for = 0;
  bool replace = false;
  // The job's group (issue 31; 1..256 bytes), such as a customer: within one
  // priority, claim_next serves the groups with claimable jobs in turn, and
  // the queue's group settings (QueueSettings::group_*) limit each group.
  // None: the job is in no group (jobs without one are served as one group
  // of their own, limited by no group setting).
  std::optional<std::string> group = std::nullopt;
  // The jobs it waits for (issue 32; 1..1000 ids, each existing or an
  // earlier job of the same enqueue_many): it is blocked until each is
  // done, then ready (or delayed by `delay`, counted from then). A parent
  // that becomes dead or cancelled cancels it, unless `after_run`.
  std::vector<std::string> after = {};
  bool after_run = false;
  // A hard cap on one attempt, in seconds from its claim (issue 33; 0:
  // none): renews cannot carry the lease past it, and at it the attempt
  // ends as a failure ("max_runtime exceeded"), the fence raised.
  double max_runtime = 0;
  // Its headers (issue 33): trace context and the like (a W3C
  // `traceparent`), given back with each claim of it and by job(); at most
  // 4 KiB of keys and values.
  Headers headers = {};
  // C3.24: Unix seconds (> 0, < 1e11; 0: none). A job not claimed by then
  // is never claimed: it becomes dead with the error "deadline passed", and
  // its queue's stats count it (QueueTotals::deadline_passed). As JobSpec's.
  double deadline = 0;
};

// Client::suspend's choice of what a wait that times out with no signal
// does (C3.23): the job is ready again with the error "suspend timed out"
// (retry), or dead with it (fail).
enum class OnTimeout { retry, fail };

// Client::list's filter and page (see there).
struct ListOptions {
  std::optional<std::string> queue;
  std::optional<JobStatus> status;
  std::int64_t limit = 100;
  std::string after;  // the cursor: the last row's id
  // By id, or by enqueue time (JobInfo::created) oldest or newest first;
  // then the cursor is the last row's id with its `created` here (both or
  // neither).
  ListOrder order = ListOrder::id;
  std::optional<double> after_created;
  std::string prefix;  // only ids that start with it
  std::optional<std::string> key = std::nullopt;  // only jobs of this unique key
  std::optional<std::string> group = std::nullopt;  // only jobs of this group
};

// Client::queue_config's changes: each setting left empty keeps its value.
struct QueueSettings {
  std::optional<bool> paused = std::nullopt;
  std::optional<std::int64_t> max_leased = std::nullopt;  // 0: no limit
  std::optional<std::int64_t> rate = std::nullopt;  // claims per `per` seconds; 0: no limit
  std::optional<double> per = std::nullopt;
  // Each group's limits (issue 31), as max_leased, rate and per for the
  // whole queue: at most group_max_leased jobs of any one group leased at
  // once, at most group_rate claims of a group in any group_per seconds.
  std::optional<std::int64_t> group_max_leased = std::nullopt;  // 0: no limit
  std::optional<std::int64_t> group_rate = std::nullopt;  // 0: no limit
  std::optional<double> group_per = std::nullopt;
  // Retention (issue 33): the queue's done, dead and cancelled jobs are
  // removed by the daemon this many seconds after they finished;
  // kKeepForever removes a retention (kept until purged).
  std::optional<double> keep_done = std::nullopt;
  std::optional<double> keep_dead = std::nullopt;
  std::optional<double> keep_cancelled = std::nullopt;
};
// QueueSettings::keep_*: no retention, the jobs kept until purged.
inline constexpr double kKeepForever = std::numeric_limits<double>::infinity();

// GroupSettings: a setting removed (nil on the wire): the group follows its
// queue's again.
struct Inherit {
  template <class T>
  constexpr operator std::optional<T>() const {  // NOLINT: implicit by design
    return std::nullopt;
  }
};
inline constexpr Inherit kInherit{};

// Client::group_config's changes (C3.25): one group's own group_max_leased,
// group_rate and group_per over its queue's. Each setting left empty keeps
// the group's stored one; kInherit removes it.
struct GroupSettings {
  std::optional<std::optional<std::int64_t>> max_leased = std::nullopt;  // 0: no cap for it
  std::optional<std::optional<std::int64_t>> rate = std::nullopt;        // 0: no rate for it
  std::optional<std::optional<double>> per = std::nullopt;
};

// Which jobs a bulk action acts on (issue 33): of one state (none: every
// state the action changes), ids that start with `prefix`, of one group;
// at most `limit` (1..10,000) a request.
struct BulkFilter {
  std::optional<JobStatus> state = std::nullopt;
  std::string prefix;
  std::optional<std::string> group = std::nullopt;
  std::int64_t limit = 1000;
};

// Client::schedule_set's job: what each tick enqueues.
struct ScheduleOptions {
  std::string tz = "UTC";  // an IANA zone the cron expression is read in
  std::string queue = "default";
  std::optional<Payload> payload = std::nullopt;
  std::int64_t priority = 0;
  std::int64_t max_attempts = kDefaultMaxAttempts;  // 0: no limit
};

// Which endpoint a Client connects to: every fenceq client and the fenceq
// tool take the first of (docs/operating.md, "Which endpoint a client uses")
//   1. the endpoint given explicitly (Client's constructor), when not empty;
//   2. the environment variable FENCEQ_ENDPOINT, when set and not empty;
//   3. the installed service's socket, kServiceEndpoint, when its file exists
//      (or is there but hidden from this user: /run/fenceq is the group
//      fenceq's, and the error then says "may not connect");
//   4. the development default, kDevelopmentEndpoint (where `make run`
//      serves, relative to the working directory).
inline constexpr const char* kServiceEndpoint = "ipc:///run/fenceq/fenceqd.sock";
inline constexpr const char* kDevelopmentEndpoint = "ipc://var/fenceqd.sock";

// The step of the order that chose an endpoint.
enum class EndpointSource { given, environment, service, development };

struct ResolvedEndpoint {
  std::string endpoint;
  EndpointSource source;
};

// The order itself, on its inputs: `given`, FENCEQ_ENDPOINT's value (`env`,
// nullptr when unset), and whether the service's socket file exists.
ResolvedEndpoint resolve_endpoint(std::string_view given, const char* env,
                                  bool service_socket_exists);
// The order on this process's environment and file system.
ResolvedEndpoint resolve_endpoint(std::string_view given = {});

// The endpoint a Client given none connects to: resolve_endpoint().endpoint.
std::string default_endpoint();

// One connection to a fenceqd. Not thread-safe: use one Client per thread (a
// call made while another thread's call is in progress throws
// Error("misuse")). Connecting is lazy and asynchronous: the constructor does
// not fail when no daemon is there yet; calls then time out. It throws
// Error("invalid_argument") for an endpoint ZeroMQ cannot parse or a bad key.
//
// `now` (every time-taking call): only for a daemon in client clock mode
// (--clock client, C2.2), where it is required; a server-clock daemon refuses
// it with invalid_argument (C2.3).
//
// A call that timed out never lets its late reply be taken for a later call's
// reply: replies are matched by request id.
class Client {
 public:
  // `endpoint` empty: resolve_endpoint()'s order chooses it.
  explicit Client(std::string endpoint = {}, ClientOptions options = {});
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  ServerInfo ping();
  // ping with describe: the daemon's version and, in `ops`, every op it
  // serves with the fields it takes (a batch entry's as "jobs[].id",
  // "next.queue"). A daemon refuses a field it does not know
  // (invalid_argument), so a client newer than its daemon can check first.
  ServerInfo describe();

  // C3.1: true when the job was created; false when the id existed (nothing changed).
  bool enqueue(std::string_view id);

  // C3.2: the committed row; nullopt when the id does not exist.
  std::optional<JobState> state(std::string_view id);

  // C3.3: the new fence, or nullopt when the job is missing, done or leased.
  // ttl <= 0 throws Error("invalid_argument").
  std::optional<std::int64_t> claim(std::string_view id, std::string_view owner, double ttl,
                                    std::optional<double> now = std::nullopt);

  // C3.4: true when this lease was current and now ends at now + ttl; false
  // otherwise (an expired lease is never revived). ttl <= 0 throws.
  // `progress` (str <= 4 KiB), when given, is kept with the lease and shown by
  // state and list; a refused renew stores nothing.
  bool renew(std::string_view id, std::string_view owner, std::int64_t fence, double ttl,
             std::optional<double> now = std::nullopt,
             std::optional<std::string_view> progress = std::nullopt);

  // C3.5: true when this lease was current and `result` is stored; false
  // otherwise, and the stored result is kept. nullopt result stores NULL.
  bool complete(std::string_view id, std::string_view owner, std::int64_t fence,
                std::optional<std::string_view> result,
                std::optional<double> now = std::nullopt);

  // C3.6: true when owner and fence matched a job not done: the lease is
  // dropped and the fence kept.
  bool release(std::string_view id, std::string_view owner, std::int64_t fence);

  // --- the work queue ---

  // Creates a job in a queue, with an optional payload, priority (higher
  // first; ties in enqueue order), delay (seconds before it can be claimed)
  // and max_attempts (claims before it is dead; default 25; 0: no limit). Like the plain
  // enqueue: false, and nothing changes, when the id exists (C3.1).
  bool enqueue(std::string_view id, const EnqueueOptions& options);

  // enqueue with options.key set (Error("invalid_argument") without one):
  // {the new job's id, true}, or {the id of the job that holds the key or
  // the id, false}; with options.replace that job took this one's fields
  // unless it was leased or finished.
  Enqueued enqueue_unique(std::string_view id, const EnqueueOptions& options);

  // Claims the most urgent claimable job of `queue` exactly as claim() would.
  // With `wait` > 0 seconds the daemon holds the request until a job can be
  // claimed or the wait ends (then nullopt). The call's timeout is extended
  // by `wait`.
  std::optional<ClaimedJob> claim_next(std::string_view queue, std::string_view owner,
                                       double ttl, double wait = 0,
                                       std::optional<double> now = std::nullopt);

  // complete() and then claim_next() in one round trip: `completed` is what
  // complete would answer; `next` the job claim_next took (or none), whatever
  // the complete's outcome. No long-poll: on none, call claim_next with a wait.
  CompletedAndNext complete_and_claim_next(std::string_view id, std::string_view owner,
                                           std::int64_t fence,
                                           std::optional<std::string_view> result,
                                           std::string_view queue, double ttl,
                                           std::optional<double> now = std::nullopt);

  // --- batches: up to 1000 jobs in one request, one round trip, one commit;
  // every job judged exactly as the single op would judge it (a stale one
  // fails alone). A refused entry (a bad field) refuses the whole request
  // with Error("invalid_argument" or "bad_request") naming its index.

  // enqueue for each job, in order: true when created, false when the id
  // (or a job's key) was taken (nothing created).
  std::vector<bool> enqueue_many(const std::vector<JobSpec>& jobs,
                                 std::optional<double> now = std::nullopt);
  // The same, with each job's answer: a job with a key gets the id of the
  // job created or found (keyed true); one without, {"", created, false}.
  std::vector<Enqueued> enqueue_many_unique(const std::vector<JobSpec>& jobs,
                                            std::optional<double> now = std::nullopt);
  // A fan-out and its fan-in in one enqueue_many (issue 32): `parts`, then
  // `child` waiting for every one of them (besides its own `parents`). The
  // child reads their results with results() once it is claimed. Answers
  // as enqueue_many, the child's last.
  std::vector<bool> enqueue_fan_in(std::vector<JobSpec> parts, JobSpec child,
                                   std::optional<double> now = std::nullopt);

  // Claims up to `max` (1..1000) of the most urgent claimable jobs of
  // `queue`, each as claim_next would (its own fence, lease and attempt);
  // most urgent first, empty when there is none. With `wait` > 0 the daemon
  // holds the request until at least one job can be claimed. A `max`
  // outside 1..1000 throws Error("invalid_argument") before anything is sent.
  std::vector<ClaimedJob> claim_next_many(std::string_view queue, std::string_view owner,
                                          double ttl, std::int64_t max, double wait = 0,
                                          std::optional<double> now = std::nullopt);

  // complete for each item (id, owner, fence, result), in order.
  std::vector<bool> complete_many(const std::vector<LeaseItem>& items,
                                  std::optional<double> now = std::nullopt);

  // complete_many, then claim_next_many of up to `max` jobs of `queue` for
  // the last item's owner, in one round trip. No wait.
  CompletedManyAndNext complete_many_and_claim(const std::vector<LeaseItem>& items,
                                               std::string_view queue, double ttl,
                                               std::int64_t max,
                                               std::optional<double> now = std::nullopt);

  // renew for each item (id, owner, fence, progress; the result is ignored) to now + ttl.
  std::vector<bool> renew_many(const std::vector<LeaseItem>& items, double ttl,
                               std::optional<double> now = std::nullopt);

  // The current lease reports a failure: the error is kept, the lease ends, and
  // the job is claimable again after `retry_in` seconds (default: exponential
  // backoff), or dead once its max_attempts are used. False when the lease is
  // not current.
  bool fail(std::string_view id, std::string_view owner, std::int64_t fence,
            std::string_view error, std::optional<double> retry_in = std::nullopt,
            std::optional<double> now = std::nullopt);

  // Issue 33: the current lease ends without using its attempt (attempts
  // goes back down by one), the fence is kept, and the job can be claimed
  // again `delay` seconds (>= 0) from now: "not now, later". False when the
  // lease is not current.
  bool snooze(std::string_view id, std::string_view owner, std::int64_t fence, double delay,
              std::optional<double> now = std::nullopt);

  // C3.22: saves a step's result, `value` (a payload, or nullopt for nil),
  // under the current lease: true when this lease was current and the job
  // had no step named `step` (1..256 bytes), which every later claim of the
  // job then carries (ClaimedJob::steps, and JobDetail::steps from job());
  // false otherwise, nothing changed: a stale, expired or released lease
  // saves nothing, and a saved step is never overwritten, not even by the
  // lease that saved it. Past a job's bounds (64 steps, 256 KiB of values)
  // throws Error("invalid_argument").
  bool step_save(std::string_view id, std::string_view owner, std::int64_t fence,
                 std::string_view step, const std::optional<Payload>& value,
                 std::optional<double> now = std::nullopt);

  // C3.23: ends the current lease and suspends the job until a signal() with
  // the token this answers (32 hex digits) wakes it, or `timeout` seconds
  // (1 to 2,592,000: 30 days) pass; the attempt is given back (as snooze
  // gives it) and the fence kept. No claim takes a suspended job (listed and
  // counted as JobStatus::suspended; job() says when its wait ends). A
  // signal makes it ready at once, and its claims from then on carry the
  // signal's value (ClaimedJob::signalled and ::signal). When the wait
  // times out it is ready again with the error "suspend timed out" and no
  // signal (OnTimeout::retry), or dead (OnTimeout::fail). nullopt when this
  // lease was not current (stale, expired or released): nothing changed. A
  // suspend is the end of the attempt: the lease is gone, so the worker
  // completes, fails or releases nothing after it. A timeout out of range
  // throws Error("invalid_argument").
  std::optional<std::string> suspend(std::string_view id, std::string_view owner,
                                     std::int64_t fence, double timeout,
                                     OnTimeout on_timeout = OnTimeout::retry,
                                     std::optional<double> now = std::nullopt);

  // C3.23: wakes the job suspended with `token` (1..256 bytes): true exactly
  // once per token (the job is ready at once, and its claims carry `value`,
  // a payload or nullopt for nil); false for a token used before, unknown,
  // or whose wait timed out, nothing changed. An empty token throws
  // Error("invalid_argument").
  bool signal(std::string_view token, const std::optional<Payload>& value = std::nullopt,
              std::optional<double> now = std::nullopt);

  // True when (owner, fence) is the job's current lease: what a system outside
  // the store asks before it acts on a token (C2.4). Changes nothing.
  bool check(std::string_view id, std::string_view owner, std::int64_t fence,
             std::optional<double> now = std::nullopt);

  // Operator: revives a dead job (attempts start over, the fence continues).
  // False when the job is not dead.
  bool retry(std::string_view id);

  // Operator: cancels a job that is not done: it becomes cancelled (final,
  // listed as `cancelled`; retry revives it), its lease ends and its fence
  // goes up by one, so the holder's renew, complete, fail and check are
  // refused from then on. False when the job is missing, done or cancelled.
  bool cancel(std::string_view id);

  // Waits up to `wait` seconds (0..3600) for the job to be finished (done,
  // dead or cancelled) and returns its whole record; nullopt when the wait
  // ends first. Throws Error("invalid_argument") when there is no such job.
  // The call's timeout is extended by `wait`.
  std::optional<JobDetail> await_job(std::string_view id, double wait);

  // Enqueues a job (as enqueue does) and awaits it, in one request
  // (enqueue_and_wait; two against a daemon without it): its record once it
  // is finished, nullopt when `wait` ends first. A job already there is
  // awaited all the same.
  std::optional<JobDetail> enqueue_and_wait(std::string_view id, const EnqueueOptions& options,
                                            double wait);

  // Operator: changes a queue's settings (pause, max_leased, rate per `per`
  // seconds, and each group's group_max_leased and group_rate per
  // group_per); they are stored and hold every claim of the queue back, on
  // every sidecar of a shared database.
  bool queue_config(std::string_view queue, const QueueSettings& settings);
  // Operator (C3.25): one group's own limits over the queue's group_*: a
  // tenant on a larger plan ({.max_leased = 10}), one held to a slower
  // rate; {.max_leased = kInherit} gives it the queue's again. Stored,
  // honoured by every claim path on every sidecar.
  bool group_config(std::string_view queue, std::string_view group, const GroupSettings& settings);
  bool pause(std::string_view queue) { return queue_config(queue, {.paused = true}); }
  bool resume(std::string_view queue) { return queue_config(queue, {.paused = false}); }

  // Operator: periodic jobs. At each tick of `cron` (5 fields: minute hour
  // day-of-month month day-of-week) one job `name@YYYY-MM-DDTHH:MMZ` is
  // enqueued, once whatever restarts or sidecars. Replaces one of that name.
  bool schedule_set(std::string_view name, std::string_view cron,
                    const ScheduleOptions& options = {});
  bool schedule_delete(std::string_view name);
  std::vector<Schedule> schedule_list();

  // Operator: counts per queue and state, and the daemon's figures.
  Stats stats();

  // Operator: one page of jobs in id order (ids after `after`) or by enqueue
  // time, optionally of one queue, one state, an id prefix, a unique key and
  // a group; at most `limit` (1..1000).
  std::vector<JobInfo> list(const ListOptions& options = {});

  // Operator: one job's whole record (its `list` row, result and payload),
  // or nullopt when the id does not exist.
  std::optional<JobDetail> job(std::string_view id);

  // The state and result of each of `ids` (1..1000), in one round trip: a
  // fan-in job reads its parents' results. Each id once, in the order
  // first asked; nullopt for an id that does not exist.
  JobResults results(const std::vector<std::string>& ids);

  // Operator: removes done and dead jobs that finished at least `older_than`
  // seconds ago (of one queue, or all); returns how many. A later enqueue of
  // a purged id continues from its fence (C1.2).
  std::int64_t purge(double older_than, std::optional<std::string> queue = std::nullopt);

  // Operator, bulk actions by filter (issue 33): one page each, {count,
  // more}; call again while `more`. retry_many revives dead and cancelled
  // jobs as retry does, cancel_many cancels as cancel does (fenced),
  // purge_many removes finished jobs (done, dead, cancelled) at least
  // `older_than` seconds old, of `queue` or all, keeping their fences.
  BulkOutcome retry_many(std::string_view queue, const BulkFilter& filter = {});
  BulkOutcome cancel_many(std::string_view queue, const BulkFilter& filter = {});
  BulkOutcome purge_many(std::optional<std::string> queue, const BulkFilter& filter = {},
                         double older_than = 0);

  // The daemon's figures in the Prometheus text format.
  std::string metrics();

  const std::string& endpoint() const;
  // Which step of resolve_endpoint()'s order chose endpoint().
  EndpointSource endpoint_source() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// C3.22's step helper: runs one step of a claimed job at most once per job,
// across attempts, as Python's job.step, Node's job.step and Go's Job.Step.
// When `job.steps` holds `name` (an earlier attempt saved it, and the claim
// handed it back; or this one did), its value is answered and `fn` is not
// called. Otherwise `fn()` runs (no argument; it answers the step's value:
// a Payload, or nullopt for nil) and its value is saved with step_save
// under the lease (job.id, `owner`, job.fence), recorded in job.steps and
// answered: a job retried after a failure skips the steps it saved, so an
// irreversible one (a charge, an email) is not done again.
//
// A refused save throws Error("lease_lost") (a client code: the lease is no
// longer current, or a step of that name was saved meanwhile; nothing is
// recorded): the caller runs nothing further of the job and stores nothing
// (its complete would be refused too); the attempt that holds the job runs
// the step itself or finds its value. A name that is empty or longer than
// 256 bytes throws Error("invalid_argument") before `fn` runs; past a job's
// bounds (64 steps, 256 KiB of values) the daemon's invalid_argument.
// "At most once" is for what is saved: an attempt that ends between fn()
// and its save runs again; make such a step idempotent where that costs
// (a payment API's idempotency key: the job's id and the step's name).
// `now`: the client's clock, for a daemon that runs it (as step_save).
template <class Fn>
std::optional<Payload> step(Client& client, ClaimedJob& job, std::string_view owner,
                            std::string_view name, Fn&& fn,
                            std::optional<double> now = std::nullopt) {
  if (name.empty() || name.size() > 256) {
    throw Error("invalid_argument", "a step's name is 1 to 256 bytes");
  }
  if (auto saved = job.steps.find(std::string(name)); saved != job.steps.end()) {
    return saved->second;
  }
  std::optional<Payload> value = std::forward<Fn>(fn)();
  if (!client.step_save(job.id, owner, job.fence, name, value, now)) {
    throw Error("lease_lost", "step " + std::string(name) + " of job " + job.id +
                                  " was not saved: the lease (fence " +
                                  std::to_string(job.fence) +
                                  ") is no longer current, or the step was saved meanwhile");
  }
  job.steps.emplace(std::string(name), value);
  return value;
}

}  // namespace fenceq
