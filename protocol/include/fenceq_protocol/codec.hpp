// fenceq wire protocol v1: the one codec shared by fenceqd and the C++ client.
//
// This header is the single source of truth in C++ for op names, error codes,
// field names and limits (protocol/PROTOCOL.md is the one for people). Untrusted
// bytes go through decode_request(); it never throws, never crashes, and never
// allocates what a length header announces (the msgpack unpacker runs with
// limits and every string is bounded by the frame it arrived in).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

namespace fenceq::protocol {

inline constexpr int kProtocolVersion = 1;
inline constexpr std::string_view kVersion = FENCEQ_VERSION;
// Longest `id` and `owner`, in bytes (protocol-v1, invalid_argument above it).
inline constexpr std::size_t kMaxKeyBytes = 1024;
// Default largest payload frame (--max-message); larger frames are dropped by
// the transport (ZMQ_MAXMSGSIZE) before they reach the codec.
inline constexpr std::size_t kDefaultMaxMessage = 1 << 20;

enum class Op { ping, enqueue, state, claim, renew, complete, release };
std::string_view op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);
// True for the ops whose semantics need a time (C2): claim, renew, complete.
bool op_needs_time(Op op);

enum class ErrorCode { bad_request, unknown_op, invalid_argument, unsupported_version, unavailable,
                       internal };
std::string_view code_name(ErrorCode code);
std::optional<ErrorCode> code_from_name(std::string_view name);

enum class ClockMode { server, client };
std::string_view clock_name(ClockMode mode);

// `rid` as the client sent it: nil, an integer or a string. Echoed unchanged.
struct Rid {
  std::variant<std::monostate, std::int64_t, std::uint64_t, std::string> value;
  bool operator==(const Rid&) const = default;
};

// A request that passed decoding and validation: every field its op needs is
// present, typed and within limits. Fields an op does not use stay default.
struct Request {
  Op op = Op::ping;
  std::string id;
  std::string owner;
  std::int64_t fence = 0;
  double ttl = 0;                     // > 0 and finite for claim and renew
  std::optional<std::string> result;  // complete only; nullopt is nil
  std::optional<double> now;          // present exactly when the clock is the client's and
                                      // the op needs a time
  std::optional<Rid> rid;
};

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;
};

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

// A job as stored (C3.2).
struct JobRow {
  std::string id;
  std::optional<std::string> owner;
  double until = 0;
  std::int64_t fence = 0;
  std::optional<std::string> result;
  bool done = false;
  bool operator==(const JobRow&) const = default;
};

struct PingInfo {
  int protocol = kProtocolVersion;
  std::string version;
  std::string clock;
  bool operator==(const PingInfo&) const = default;
};

// The result R of a successful reply: nil, a bool, a fence, a job, or ping info.
using Result = std::variant<std::monostate, bool, std::int64_t, JobRow, PingInfo>;

std::string encode_ok(const Result& result, const std::optional<Rid>& rid);
std::string encode_error(const Error& error, const std::optional<Rid>& rid);

// --- the client's side -------------------------------------------------------

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

// Decodes the reply to the request of `op` that carried `rid`, typing `result`
// by `op`. Returns nullopt for a reply with any other rid (the late reply of a
// request that timed out): it is not parsed further. Throws ReplyFormatError
// when the bytes are not a well-formed v1 reply.
std::optional<Reply> decode_reply(std::string_view payload, Op op, const Rid& rid);

}  // namespace fenceq::protocol
