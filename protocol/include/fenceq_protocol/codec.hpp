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
//
// A Request is its op, the envelope (`now`, `rid`) and the op's own struct
// (req::Claim, req::ClaimNext, ...: one per op, its fields typed):
// built from the struct, which sets the op (Request r{req::Claim{...}}), and
// read by it (r.as<req::Claim>()). The plain ops' structs are generated from
// protocol/ops/ops.json (requests.inc, included below); the others are here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
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

// --- each op's request -------------------------------------------------------
// One struct an op, in namespace req, named by its enum in CamelCase
// (req::Claim, req::ClaimNext, req::AwaitJob): its members are the op's fields,
// typed. The plain ops' structs are generated from protocol/ops/ops.json
// (requests.inc, by emit_codec.py: a field's kind gives its type, a field not
// required is std::optional unless its kind has a default); the ops whose
// codec is hand-written (ops.json: codec custom) have theirs here.

// The op of a request struct (OpOf<req::Claim>::value is Op::claim).
template <class T>
struct OpOf;

namespace req {

// enqueue: the job (its `after` on the wire is `parents`).
struct Enqueue : JobSpec {};
// enqueue_and_wait: the job (no key), then awaited for up to `wait` seconds.
struct EnqueueAndWait : JobSpec {
  double wait = 0;
};
// enqueue_many: 1..kMaxBatchItems jobs, in one transaction.
struct EnqueueMany {
  std::vector<JobSpec> jobs;
};
// complete_many's `next`: then claim up to `max` jobs of `queue` for `ttl`.
struct Next {
  std::string queue;
  double ttl = 0;
  std::int64_t max = 0;
};
// complete_many: each item's complete (its `result`), then maybe `next`.
struct CompleteMany {
  std::vector<LeaseItem> items;
  std::optional<Next> next;
};
// renew_many: each item's renew (its `progress`), for `ttl`.
struct RenewMany {
  std::vector<LeaseItem> items;
  double ttl = 0;
};
// A bulk action's filter (C3.16): purge's (when paged), retry_many's and
// cancel_many's; a page of at most `limit` jobs, answered {count, more}.
struct BulkFilter {
  std::optional<JobStatus> status;  // wire 'state'; none: every state the action changes
  std::string prefix;               // only ids that start with this
  std::optional<std::string> group;
  std::int64_t limit = kDefaultBulkLimit;
};
// purge: finished jobs by age (answered an int), or, with `state`, `prefix`,
// `group` or `limit` (`paged`), a page by the filter.
struct Purge : BulkFilter {
  std::optional<std::string> queue;  // none: every queue
  double older_than = 0;             // finished at least this many seconds ago
  bool paged = false;
};
// retry_many: dead or cancelled jobs of `queue` by the filter, a page at a time.
struct RetryMany : BulkFilter {
  std::string queue;
};
// cancel_many: jobs of `queue` not finished (or dead) by the filter, a page at a time.
struct CancelMany : BulkFilter {
  std::string queue;
};

}  // namespace req

#include "fenceq_protocol/requests.inc"

// Whether T is an op's request struct.
template <class T>
concept OpRequest = requires { OpOf<T>::value; };

namespace detail {
template <std::size_t... I>
constexpr bool body_in_op_order(std::index_sequence<I...>) {
  return ((OpOf<std::variant_alternative_t<I, req::Body>>::value == static_cast<Op>(I)) && ...);
}
}  // namespace detail
static_assert(std::variant_size_v<req::Body> == kOpCount &&
                  detail::body_in_op_order(std::make_index_sequence<kOpCount>{}),
              "req::Body holds one struct per Op, in the enum's order");

// A request: its op, the envelope (`now`, `rid`) and the op's struct. One
// that passed decoding and validation has every field its op needs present,
// typed and within limits. Built from the op's struct, which sets `op`:
//   Request r{req::Claim{id, owner, ttl}};
// and read by it: r.as<req::Claim>().ttl.
struct Request {
  Op op = Op::ping;
  std::optional<double> now;          // only in client clock mode (see TimeUse, ops.hpp)
  std::optional<Rid> rid;
  req::Body body;

  Request() = default;
  template <OpRequest T>
  Request(T b) : op(OpOf<T>::value), body(std::move(b)) {}  // NOLINT: implicit on purpose

  // The op's struct; std::bad_variant_access when `op` is another op's.
  template <OpRequest T>
  const T& as() const { return std::get<T>(body); }
  template <OpRequest T>
  T& as() { return std::get<T>(body); }
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

// Encodes a request for the wire: `op`, then the fields of its struct (one not
// required only when set, or when not its default), `now` and `rid` when set.
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

// The events stream (C3.19): the body frame of one event (its topic frame
// is the queue), and back; decode_event throws fenceq::Error (protocol_error)
// on a body that is not an event map.
std::string encode_event(const Event& e);
Event decode_event(std::string_view body);

}  // namespace fenceq::protocol
