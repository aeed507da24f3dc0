// fenceq wire protocol v1: the one codec shared by fenceqd and the C++ client.
//
// This header (with ops.hpp, the op table it includes) is the single source of
// truth in C++ for ops, error codes, field names and limits (protocol/PROTOCOL.md is the one for people). Untrusted
// bytes go through decode_request(); it never throws, never crashes, and never
// allocates what a length header announces (the msgpack unpacker runs with
// limits and every string is bounded by the frame it arrived in).
//
// One header in three sections, each implemented by the files it names: the
// vocabulary both sides share (vocabulary.cpp), the daemon's side
// (daemon_side.cpp, replies.cpp) and the client's side (client_side.cpp);
// each op's fields, read and written, are op_fields.cpp's. It stays one
// header because neither side can be read without the vocabulary (Request,
// Result and Rid travel both ways), and because the v1 contract in C++ is
// short enough to read whole. The op table is its own header, ops.hpp: one
// row per op, read by the codec and the daemon alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fenceq/types.hpp"
#include "fenceq_protocol/limits.hpp"
#include "fenceq_protocol/ops.hpp"

namespace fenceq::protocol {

// --- the vocabulary both sides share (vocabulary.cpp) ------------------------

inline constexpr int kProtocolVersion = 1;
inline constexpr std::string_view kVersion = FENCEQ_VERSION;
// The limits (kMaxKeyBytes ... kMaxSchedules) are in limits.hpp, which the
// daemon's stores read too.
// Default largest payload frame (--max-message); larger frames are dropped by
// the transport (ZMQ_MAXMSGSIZE) before they reach the codec.
inline constexpr std::size_t kDefaultMaxMessage = 1 << 20;

// The ops and their wire facts (name, writes, use of `now`, lease, answer):
// ops.hpp, one row per op.

// Strict UTF-8 (RFC 3629), as every str of the protocol must be.
bool valid_utf8(std::string_view s);

enum class ErrorCode { bad_request, unknown_op, invalid_argument, unsupported_version, unavailable,
                       internal, outcome_unknown };
std::string_view code_name(ErrorCode code);
std::optional<ErrorCode> code_from_name(std::string_view name);

enum class ClockMode { server, client };
std::string_view clock_name(ClockMode mode);

// `rid` as the client sent it: nil, an integer or a string. Echoed unchanged.
struct Rid {
  std::variant<std::monostate, std::int64_t, std::uint64_t, std::string> value;
  bool operator==(const Rid&) const = default;
};

using fenceq::JobInfo;
using fenceq::JobStatus;
using fenceq::ListOrder;
using fenceq::Payload;
using fenceq::QueueStats;
using fenceq::QueueConfig;
using fenceq::Schedule;
using fenceq::Stats;
using fenceq::CompletedAndNext;
using fenceq::CompletedManyAndNext;
using fenceq::JobSpec;
using fenceq::Enqueued;
using fenceq::LeaseItem;

std::string_view status_name(JobStatus s);
std::optional<JobStatus> status_from_name(std::string_view name);
// A `list` order as on the wire: "id", "created" (oldest first), "-created".
std::string_view order_name(ListOrder order);
std::optional<ListOrder> order_from_name(std::string_view name);

// A request that passed decoding and validation: every field its op needs is
// present, typed and within limits. Fields an op does not use stay default.
struct Request {
  Op op = Op::ping;
  std::string id;
  std::string owner;
  std::int64_t fence = 0;
  double ttl = 0;                     // > 0 and finite for claim, renew, claim_next
  std::optional<std::string> progress;  // renew: kept with the lease when it is current
  std::optional<std::string> result;  // complete only; nullopt is nil
  std::optional<double> now;          // only in client clock mode (see TimeUse, ops.hpp)
  std::optional<Rid> rid;
  // enqueue
  std::string queue{kDefaultQueue};   // also claim_next, and a filter of list and purge
  std::optional<Payload> payload;
  std::int64_t priority = 0;          // higher first; ties in enqueue order
  double delay = 0;                   // >= 0 seconds
  std::int64_t max_attempts = kDefaultMaxAttempts;  // claims before the job is dead; 0: no limit
  std::optional<std::string> key;     // the unique key (JobSpec); also a filter of list
  double unique_for = 0;              // > 0 with key: finished jobs of the last seconds count too
  bool replace = false;               // on_conflict "replace"
  std::optional<std::string> group;   // the job's group (JobSpec); also a filter of list
  std::vector<std::string> parents;   // `after`: the jobs it waits for (JobSpec)
  bool after_run = false;             // after_failure "run" (JobSpec)
  double max_runtime = 0;             // (JobSpec)
  Headers headers;                    // (JobSpec)
  // claim_next
  double wait = 0;                    // 0 .. kMaxWaitSeconds
  std::int64_t max = 0;               // claim_next: up to this many (an array); 0: one
  // enqueue_many
  std::vector<JobSpec> jobs;
  // complete_many, renew_many
  std::vector<LeaseItem> items;
  bool has_next = false;              // complete_many: then claim up to `max` of `queue`, `ttl`
  // fail
  std::string error;
  std::optional<double> retry_in;     // >= 0 seconds; nullopt: exponential backoff
  // list, purge
  bool all_queues = true;             // list/purge without `queue`
  std::optional<JobStatus> status;
  std::int64_t limit = 100;
  std::string after;                  // list: ids greater than this (by id), or the cursor's id
  ListOrder order = ListOrder::id;    // list: by id, or by enqueue time
  std::optional<double> after_created;  // list by enqueue time: with `after`, the cursor
  std::string prefix;                 // list: only ids that start with this
  std::vector<std::string> ids;       // results: the jobs asked about
  bool states_only = false;           // results: no result bodies (issue 56)
  bool describe = false;              // ping: also answer each op's fields (issue 57)
  double older_than = 0;              // purge: finished at least this many seconds ago
  // purge with `state`, `prefix`, `group` or `limit`, retry_many, cancel_many
  // (issue 33): a page of at most `limit` jobs, answered {count, more}
  bool paged = false;
  // queue_config (issue 33): a retention given (nil: kept forever) or left as stored
  std::optional<std::optional<double>> keep_done, keep_dead, keep_cancelled;
  // queue_config: the settings it changes (the others keep their value)
  std::optional<bool> paused;
  std::optional<std::int64_t> max_leased, rate;
  std::optional<double> per;
  std::optional<std::int64_t> group_max_leased, group_rate;
  std::optional<double> group_per;
  // schedule_set, schedule_delete (queue, payload, priority, max_attempts above)
  std::string name;
  std::string cron;
  std::string tz{"UTC"};
};

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;
};

using JobList = std::vector<JobInfo>;

// The result R of a successful reply: nil, a bool, an int (a fence, a count),
// a job, ping info, a claimed job, stats, a job list, text (metrics), and the
// batches' arrays of bools and of claimed jobs.
using BoolList = std::vector<bool>;
using ClaimedJobs = std::vector<ClaimedJob>;
using ScheduleList = std::vector<Schedule>;
// enqueue_many's answer when an entry carried a key: one per entry.
using EnqueuedList = std::vector<Enqueued>;
using Result = std::variant<std::monostate, bool, std::int64_t, JobState, ServerInfo,
                            ClaimedJob, Stats, JobList, std::string, CompletedAndNext, BoolList,
                            ClaimedJobs, CompletedManyAndNext, JobDetail, ScheduleList,
                            Enqueued, EnqueuedList, JobResults, BulkOutcome>;

// --- the daemon's side (daemon_side.cpp, replies.cpp) ------------------------

// The outcome of decoding one payload frame. Exactly one of request/error is
// meaningful: `request` when it has a value, `error` otherwise. `rid` is set
// whenever the frame carried a well-formed one, so that even an error reply
// can be matched by a pipelining client.
struct Decoded {
  std::optional<Rid> rid;
  std::optional<Request> request;
  Error error;
};

// Decodes and validates one request payload. Never throws.
// `clock` decides whether `now` is required (client) or refused (server), C2.2/C2.3.
Decoded decode_request(std::string_view payload, ClockMode clock);

// The reply to a request that succeeded, and to one that did not; `rid` is
// echoed when the request carried one.
std::string encode_ok(const Result& result, const std::optional<Rid>& rid);
std::string encode_error(const Error& error, const std::optional<Rid>& rid);

// --- the client's side (client_side.cpp) -------------------------------------

// Encodes a request for the wire. Fields are written only when `op` uses them;
// `now` only when set.
std::string encode_request(const Request& request);

// A reply as a client sees it.
struct Reply {
  std::optional<Rid> rid;
  bool ok = false;
  Result result;
  std::string error_code;  // as sent; may be a code this build does not know
  std::string error_message;
};

// Thrown by decode_reply when the bytes are not a well-formed v1 reply to `op`.
struct ReplyFormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The rid of a reply, without decoding the rest; nullopt when it has none or
// is not a reply. For pipelining clients that must find the request first.
std::optional<Rid> reply_rid(std::string_view payload);

// Decodes the reply to the request of `op` that carried `rid`, typing `result`
// by `op`. Returns nullopt for a reply with any other rid (the late reply of a
// request that timed out): it is not parsed further. Throws ReplyFormatError
// when the bytes are not a well-formed v1 reply.
std::optional<Reply> decode_reply(std::string_view payload, Op op, const Rid& rid);

// The events stream (issue 33): the body frame of one event (its topic frame
// is the queue), and back; decode_event throws fenceq::Error (protocol_error)
// on a body that is not an event map.
std::string encode_event(const Event& e);
Event decode_event(std::string_view body);

}  // namespace fenceq::protocol
