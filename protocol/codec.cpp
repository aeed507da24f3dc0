#include "fenceq_protocol/codec.hpp"

#include <msgpack.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

namespace fenceq::protocol {
namespace {

constexpr std::array<std::pair<Op, std::string_view>, 16> kOps{{
    {Op::ping, "ping"},
    {Op::enqueue, "enqueue"},
    {Op::state, "state"},
    {Op::claim, "claim"},
    {Op::renew, "renew"},
    {Op::complete, "complete"},
    {Op::release, "release"},
    {Op::claim_next, "claim_next"},
    {Op::fail, "fail"},
    {Op::check, "check"},
    {Op::retry, "retry"},
    {Op::stats, "stats"},
    {Op::list, "list"},
    {Op::purge, "purge"},
    {Op::metrics, "metrics"},
    {Op::complete_next, "complete_next"},
}};

constexpr std::array<std::pair<JobStatus, std::string_view>, 5> kStatuses{{
    {JobStatus::ready, "ready"},
    {JobStatus::delayed, "delayed"},
    {JobStatus::leased, "leased"},
    {JobStatus::done, "done"},
    {JobStatus::dead, "dead"},
}};

constexpr std::array<std::pair<ErrorCode, std::string_view>, 7> kCodes{{
    {ErrorCode::bad_request, "bad_request"},
    {ErrorCode::unknown_op, "unknown_op"},
    {ErrorCode::invalid_argument, "invalid_argument"},
    {ErrorCode::unsupported_version, "unsupported_version"},
    {ErrorCode::unavailable, "unavailable"},
    {ErrorCode::internal, "internal"},
    {ErrorCode::outcome_unknown, "outcome_unknown"},
}};

// Decoder limits. A request map has a handful of keys; unknown keys may carry
// small values. The unpacker allocates an array or map's slots when it reads
// the header, so these caps bound what a lying header can make it allocate.
// Strings are bounded by the frame itself (ZMQ_MAXMSGSIZE).
constexpr std::size_t kMaxMapEntries = 64;
constexpr std::size_t kMaxArrayItems = 256;
constexpr std::size_t kMaxDepth = 8;
constexpr std::size_t kMaxRidBytes = 256;
constexpr std::size_t kMaxReplyItems = 1 << 20;

// Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF.
bool utf8_strict(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (static_cast<std::size_t>(end - p) <= n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (std::size_t i = 2; i <= n; ++i) {
      if (p[i] < 0x80 || p[i] > 0xBF) return false;
    }
    p += n + 1;
  }
  return true;
}

// Validation failure inside decode_request; never escapes it.
struct Refusal {
  ErrorCode code;
  std::string message;
};

[[noreturn]] void refuse(ErrorCode code, std::string message) {
  throw Refusal{code, std::move(message)};
}

std::string_view type_name(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "bool";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "float";
    case msgpack::type::STR: return "str";
    case msgpack::type::BIN: return "bin";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "map";
    case msgpack::type::EXT: return "ext";
  }
  return "unknown";
}

// The request map with its keys checked: strings, no duplicates.
class Fields {
 public:
  explicit Fields(const msgpack::object& map) : map_(map.via.map) {
    for (std::uint32_t i = 0; i < map_.size; ++i) {
      const auto& key = map_.ptr[i].key;
      if (key.type != msgpack::type::STR) {
        refuse(ErrorCode::bad_request, "request map keys must be strings");
      }
      for (std::uint32_t j = 0; j < i; ++j) {
        if (map_.ptr[j].key.as<std::string_view>() == key.as<std::string_view>()) {
          refuse(ErrorCode::bad_request,
                 "duplicate key '" + std::string(key.as<std::string_view>()) + "'");
        }
      }
    }
  }

  const msgpack::object* find(std::string_view name) const {
    for (std::uint32_t i = 0; i < map_.size; ++i) {
      if (map_.ptr[i].key.as<std::string_view>() == name) return &map_.ptr[i].val;
    }
    return nullptr;
  }

  const msgpack::object& require(std::string_view name) const {
    const auto* v = find(name);
    if (!v) refuse(ErrorCode::bad_request, "missing field '" + std::string(name) + "'");
    return *v;
  }

  std::string str(std::string_view name, std::size_t max_bytes) const {
    const auto& v = require(name);
    return checked_str(name, v, max_bytes);
  }

  static std::string checked_str(std::string_view name, const msgpack::object& v,
                                 std::size_t max_bytes) {
    if (v.type != msgpack::type::STR) wrong_type(name, "str", v);
    if (v.via.str.size > max_bytes) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' is longer than " +
                                              std::to_string(max_bytes) + " bytes");
    }
    std::string s(v.via.str.ptr, v.via.str.size);
    if (!utf8_strict(s)) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' is not valid UTF-8");
    }
    return s;
  }

  // An int (msgpack integer family only; a float is bad_request even when whole).
  std::int64_t integer(std::string_view name) const {
    const auto& v = require(name);
    if (v.type == msgpack::type::NEGATIVE_INTEGER) return v.via.i64;
    if (v.type == msgpack::type::POSITIVE_INTEGER) {
      if (v.via.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' is out of range");
      }
      return static_cast<std::int64_t>(v.via.u64);
    }
    wrong_type(name, "int", v);
  }

  // A number: int or float, finite.
  double number(std::string_view name) const {
    const auto& v = require(name);
    double d;
    switch (v.type) {
      case msgpack::type::POSITIVE_INTEGER: d = static_cast<double>(v.via.u64); break;
      case msgpack::type::NEGATIVE_INTEGER: d = static_cast<double>(v.via.i64); break;
      case msgpack::type::FLOAT32:
      case msgpack::type::FLOAT64: d = v.via.f64; break;
      default: wrong_type(name, "number", v);
    }
    if (!std::isfinite(d)) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must be finite");
    }
    return d;
  }

  bool has(std::string_view name) const { return find(name) != nullptr; }

  // An int within [lo, hi]; invalid_argument outside.
  std::int64_t integer_in(std::string_view name, std::int64_t lo, std::int64_t hi) const {
    auto v = integer(name);
    if (v < lo || v > hi) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must be in [" +
                                              std::to_string(lo) + ", " + std::to_string(hi) +
                                              "]");
    }
    return v;
  }

  // A finite number within [lo, hi]; invalid_argument outside.
  double number_in(std::string_view name, double lo, double hi) const {
    auto v = number(name);
    if (v < lo || v > hi) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must be in [" +
                                              fmt_number(lo) + ", " + fmt_number(hi) + "]");
    }
    return v;
  }

  static std::string fmt_number(double d) {
    auto s = std::to_string(d);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }

  [[noreturn]] static void wrong_type(std::string_view name, std::string_view want,
                                      const msgpack::object& got) {
    refuse(ErrorCode::bad_request, "field '" + std::string(name) + "' must be " +
                                       std::string(want) + ", not " + std::string(type_name(got)));
  }

 private:
  const msgpack::object_map& map_;
};

std::optional<Rid> read_rid(const Fields& f) {
  const auto* v = f.find("rid");
  if (!v) return std::nullopt;
  switch (v->type) {
    case msgpack::type::NIL: return Rid{std::monostate{}};
    case msgpack::type::POSITIVE_INTEGER: return Rid{v->via.u64};
    case msgpack::type::NEGATIVE_INTEGER: return Rid{v->via.i64};
    case msgpack::type::STR: return Rid{Fields::checked_str("rid", *v, kMaxRidBytes)};
    default: Fields::wrong_type("rid", "nil, int or str", *v);
  }
}

// What a client sent, quoted in an error message: at most `max` of its bytes,
// cut on a character boundary; control characters, quotes, backslashes and
// bytes that are not UTF-8 written as \xNN. The message stays valid UTF-8 on
// one line, whatever was sent.
std::string excerpt(std::string_view s, std::size_t max) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size() && i < max) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len > 1 && i + len <= s.size() && i + len <= max && utf8_strict(s.substr(i, len))) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    ++i;
  }
  if (i < s.size()) out += "...";
  return out;
}

Request read_request(const Fields& f, ClockMode clock) {
  if (const auto* v = f.find("v")) {
    if (v->type != msgpack::type::POSITIVE_INTEGER && v->type != msgpack::type::NEGATIVE_INTEGER) {
      Fields::wrong_type("v", "int", *v);
    }
    if (v->type != msgpack::type::POSITIVE_INTEGER || v->via.u64 != kProtocolVersion) {
      refuse(ErrorCode::unsupported_version, "protocol version 'v' must be 1");
    }
  }
  const auto& op_field = f.require("op");
  if (op_field.type != msgpack::type::STR) Fields::wrong_type("op", "str", op_field);
  auto op_text = op_field.as<std::string_view>();
  auto op = op_from_name(op_text);
  if (!op) refuse(ErrorCode::unknown_op, "unknown op '" + excerpt(op_text, 64) + "'");

  Request r;
  r.op = *op;
  // C2.3: in server clock mode any request that carries `now` is refused; in
  // client clock mode the ops that decide on a lease must carry it (C2.2).
  const bool has_now = f.has("now");
  const TimeUse time_use = op_time_use(r.op);
  if (clock == ClockMode::server && has_now) {
    refuse(ErrorCode::invalid_argument,
           "field 'now' is not accepted: the daemon runs the server clock");
  }
  auto id = [&] { r.id = f.str("id", kMaxKeyBytes); };
  auto owner = [&] { r.owner = f.str("owner", kMaxKeyBytes); };
  auto fence = [&] { r.fence = f.integer("fence"); };
  auto ttl = [&] {
    r.ttl = f.number("ttl");
    if (r.ttl <= 0) refuse(ErrorCode::invalid_argument, "field 'ttl' must be > 0");
  };
  auto queue = [&](bool required) {
    if (!required && !f.has("queue")) return;
    r.queue = f.str("queue", kMaxQueueBytes);
    if (r.queue.empty()) refuse(ErrorCode::invalid_argument, "field 'queue' must not be empty");
    r.all_queues = false;
  };
  switch (r.op) {
    case Op::ping:
    case Op::stats:
    case Op::metrics: break;
    case Op::state:
    case Op::retry: id(); break;
    case Op::enqueue:
      id();
      queue(false);
      if (const auto* p = f.find("payload")) {
        if (p->type == msgpack::type::BIN) {
          if (p->via.bin.size > kMaxPayloadBytes) {
            refuse(ErrorCode::invalid_argument, "field 'payload' is longer than " +
                                                    std::to_string(kMaxPayloadBytes) + " bytes");
          }
          r.payload = Payload{std::string(p->via.bin.ptr, p->via.bin.size), true};
        } else if (p->type == msgpack::type::STR) {
          r.payload = Payload{Fields::checked_str("payload", *p, kMaxPayloadBytes), false};
        } else if (p->type != msgpack::type::NIL) {
          Fields::wrong_type("payload", "bin, str or nil", *p);
        }
      }
      if (f.has("priority")) r.priority = f.integer_in("priority", -(1LL << 31), (1LL << 31) - 1);
      if (f.has("delay")) r.delay = f.number_in("delay", 0, 1e9);
      if (f.has("max_attempts")) r.max_attempts = f.integer_in("max_attempts", 0, 1000000);
      break;
    case Op::claim:
      id();
      owner();
      ttl();
      break;
    case Op::renew:
      id();
      owner();
      fence();
      ttl();
      break;
    case Op::complete:
    case Op::complete_next: {
      id();
      owner();
      fence();
      const auto& res = f.require("result");
      if (res.type != msgpack::type::NIL) {
        // The result is bounded by the frame size only (--max-message).
        r.result = Fields::checked_str("result", res, std::numeric_limits<std::size_t>::max());
      }
      if (r.op == Op::complete_next) {
        queue(true);
        ttl();
      }
      break;
    }
    case Op::release:
    case Op::check:
      id();
      owner();
      fence();
      break;
    case Op::claim_next:
      queue(true);
      owner();
      ttl();
      if (f.has("wait")) r.wait = f.number_in("wait", 0, kMaxWaitSeconds);
      break;
    case Op::fail:
      id();
      owner();
      fence();
      r.error = f.str("error", kMaxErrorBytes);
      if (f.has("retry_in")) r.retry_in = f.number_in("retry_in", 0, 1e9);
      break;
    case Op::list:
      queue(false);
      if (f.has("state")) {
        const auto& st = f.require("state");
        if (st.type != msgpack::type::STR) Fields::wrong_type("state", "str", st);
        r.status = status_from_name(st.as<std::string_view>());
        if (!r.status) {
          refuse(ErrorCode::invalid_argument,
                 "field 'state' must be ready, delayed, leased, done or dead");
        }
      }
      if (f.has("limit")) r.limit = f.integer_in("limit", 1, kMaxListLimit);
      if (f.has("after")) r.after = f.str("after", kMaxKeyBytes);
      break;
    case Op::purge:
      queue(false);
      r.older_than = f.number_in("older_than", 0, 1e12);
      break;
  }
  if (clock == ClockMode::client) {
    // Checked on every op (a NaN is refused even where the op ignores it).
    if (has_now) {
      r.now = f.number("now");
    } else if (time_use == TimeUse::required) {
      refuse(ErrorCode::invalid_argument,
             "field 'now' is required: the daemon runs the client clock");
    }
  }
  return r;
}

// Always a msgpack float64: msgpack-c's pack_double() writes whole numbers
// as ints, and the protocol types `until` as float (and clients may rely on it).
void pack_float64(msgpack::sbuffer& buf, double d) {
  std::uint64_t bits;
  static_assert(sizeof bits == sizeof d);
  std::memcpy(&bits, &d, sizeof d);
  char out[9];
  out[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  buf.write(out, sizeof out);
}

template <typename Packer>
void pack_rid(Packer& pk, const Rid& rid) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          pk.pack_nil();
        } else {
          pk.pack(v);
        }
      },
      rid.value);
}

template <typename Packer>
void pack_opt_str(Packer& pk, const std::optional<std::string>& s) {
  if (s) {
    pk.pack(*s);
  } else {
    pk.pack_nil();
  }
}

template <typename Packer>
void pack_payload(Packer& pk, const std::optional<Payload>& p) {
  if (!p) {
    pk.pack_nil();
  } else if (p->binary) {
    pk.pack_bin(static_cast<std::uint32_t>(p->bytes.size()));
    pk.pack_bin_body(p->bytes.data(), static_cast<std::uint32_t>(p->bytes.size()));
  } else {
    pk.pack(p->bytes);
  }
}

template <typename Packer>
void pack_next_job(Packer& pk, const ClaimedJob& v) {
  pk.pack_map(4);
  pk.pack("id");
  pk.pack(v.id);
  pk.pack("fence");
  pk.pack(v.fence);
  pk.pack("payload");
  pack_payload(pk, v.payload);
  pk.pack("attempts");
  pk.pack(v.attempts);
}

template <typename Packer>
void pack_result(Packer& pk, msgpack::sbuffer& buf, const Result& result) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          pk.pack_nil();
        } else if constexpr (std::is_same_v<T, bool>) {
          v ? pk.pack_true() : pk.pack_false();
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          pk.pack(v);
        } else if constexpr (std::is_same_v<T, JobState>) {
          pk.pack_map(6);
          pk.pack("id");
          pk.pack(v.id);
          pk.pack("owner");
          pack_opt_str(pk, v.owner);
          pk.pack("until");
          pack_float64(buf, v.until);
          pk.pack("fence");
          pk.pack(v.fence);
          pk.pack("result");
          pack_opt_str(pk, v.result);
          pk.pack("done");
          v.done ? pk.pack_true() : pk.pack_false();
        } else if constexpr (std::is_same_v<T, ServerInfo>) {
          pk.pack_map(3);
          pk.pack("protocol");
          pk.pack(v.protocol);
          pk.pack("version");
          pk.pack(v.version);
          pk.pack("clock");
          pk.pack(v.clock);
        } else if constexpr (std::is_same_v<T, ClaimedJob>) {
          pack_next_job(pk, v);
        } else if constexpr (std::is_same_v<T, CompletedAndNext>) {
          pk.pack_map(2);
          pk.pack("completed");
          v.completed ? pk.pack_true() : pk.pack_false();
          pk.pack("next");
          if (v.next) {
            pack_next_job(pk, *v.next);
          } else {
            pk.pack_nil();
          }
        } else if constexpr (std::is_same_v<T, Stats>) {
          pk.pack_map(8);
          pk.pack("queues");
          pk.pack_map(static_cast<std::uint32_t>(v.queues.size()));
          for (const auto& q : v.queues) {
            pk.pack(q.queue);
            pk.pack_map(6);
            pk.pack("ready");
            pk.pack(q.ready);
            pk.pack("delayed");
            pk.pack(q.delayed);
            pk.pack("leased");
            pk.pack(q.leased);
            pk.pack("done");
            pk.pack(q.done);
            pk.pack("dead");
            pk.pack(q.dead);
            pk.pack("oldest_ready_age");
            pack_float64(buf, q.oldest_ready_age);
          }
          pk.pack("requests");
          pk.pack(v.requests);
          pk.pack("commits");
          pk.pack(v.commits);
          pk.pack("batches");
          pk.pack(v.batches);
          pk.pack("failed_commits");
          pk.pack(v.failed_commits);
          pk.pack("mean_batch");
          pack_float64(buf, v.mean_batch);
          pk.pack("waiting_claims");
          pk.pack(v.waiting_claims);
          pk.pack("uptime");
          pack_float64(buf, v.uptime);
        } else if constexpr (std::is_same_v<T, JobList>) {
          pk.pack_array(static_cast<std::uint32_t>(v.size()));
          for (const auto& j : v) {
            pk.pack_map(11);
            pk.pack("id");
            pk.pack(j.id);
            pk.pack("queue");
            pk.pack(j.queue);
            pk.pack("state");
            pk.pack(status_name(j.status));
            pk.pack("priority");
            pk.pack(j.priority);
            pk.pack("attempts");
            pk.pack(j.attempts);
            pk.pack("max_attempts");
            pk.pack(j.max_attempts);
            pk.pack("fence");
            pk.pack(j.fence);
            pk.pack("owner");
            pack_opt_str(pk, j.owner);
            pk.pack("until");
            pack_float64(buf, j.until);
            pk.pack("not_before");
            pack_float64(buf, j.not_before);
            pk.pack("error");
            pack_opt_str(pk, j.error);
          }
        } else {
          static_assert(std::is_same_v<T, std::string>);
          pk.pack(v);
        }
      },
      result);
}

// --- reply decoding helpers (client side) ---

[[noreturn]] void bad_reply(const std::string& what) { throw ReplyFormatError("bad reply: " + what); }

std::optional<std::string> opt_str(const msgpack::object& o, const char* what) {
  if (o.type == msgpack::type::NIL) return std::nullopt;
  if (o.type != msgpack::type::STR) bad_reply(std::string(what) + " is not str or nil");
  return std::string(o.via.str.ptr, o.via.str.size);
}

std::int64_t as_int(const msgpack::object& o, const char* what) {
  if (o.type == msgpack::type::POSITIVE_INTEGER &&
      o.via.u64 <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return static_cast<std::int64_t>(o.via.u64);
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return o.via.i64;
  bad_reply(std::string(what) + " is not an int");
}

double as_number(const msgpack::object& o, const char* what) {
  if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64) return o.via.f64;
  return static_cast<double>(as_int(o, what));
}

const msgpack::object* map_get(const msgpack::object& m, std::string_view key) {
  for (std::uint32_t i = 0; i < m.via.map.size; ++i) {
    const auto& k = m.via.map.ptr[i].key;
    if (k.type == msgpack::type::STR && k.as<std::string_view>() == key) {
      return &m.via.map.ptr[i].val;
    }
  }
  return nullptr;
}

const msgpack::object& map_need(const msgpack::object& m, std::string_view key) {
  const auto* v = map_get(m, key);
  if (!v) bad_reply("missing '" + std::string(key) + "'");
  return *v;
}

bool as_bool(const msgpack::object& o, const char* what) {
  if (o.type != msgpack::type::BOOLEAN) bad_reply(std::string(what) + " is not a bool");
  return o.via.boolean;
}

Result read_result(const msgpack::object& r, Op op) {
  switch (op) {
    case Op::ping: {
      if (r.type != msgpack::type::MAP) bad_reply("ping result is not a map");
      ServerInfo p;
      p.protocol = static_cast<int>(as_int(map_need(r, "protocol"), "protocol"));
      p.version = opt_str(map_need(r, "version"), "version").value_or("");
      p.clock = opt_str(map_need(r, "clock"), "clock").value_or("");
      return p;
    }
    case Op::state: {
      if (r.type == msgpack::type::NIL) return std::monostate{};
      if (r.type != msgpack::type::MAP) bad_reply("state result is not a map or nil");
      JobState j;
      j.id = opt_str(map_need(r, "id"), "id").value_or("");
      j.owner = opt_str(map_need(r, "owner"), "owner");
      j.until = as_number(map_need(r, "until"), "until");
      j.fence = as_int(map_need(r, "fence"), "fence");
      j.result = opt_str(map_need(r, "result"), "result");
      j.done = as_bool(map_need(r, "done"), "done");
      return j;
    }
    case Op::claim:
      if (r.type == msgpack::type::NIL) return std::monostate{};
      return as_int(r, "fence");
    case Op::enqueue:
    case Op::renew:
    case Op::complete:
    case Op::release:
    case Op::fail:
    case Op::check:
    case Op::retry: return as_bool(r, "result");
    case Op::purge: return as_int(r, "result");
    case Op::metrics: {
      auto text = opt_str(r, "result");
      if (!text) bad_reply("metrics result is nil");
      return *text;
    }
    case Op::complete_next: {
      if (r.type != msgpack::type::MAP) bad_reply("complete_next result is not a map");
      CompletedAndNext c;
      c.completed = as_bool(map_need(r, "completed"), "completed");
      auto next = read_result(map_need(r, "next"), Op::claim_next);
      if (auto* j = std::get_if<ClaimedJob>(&next)) c.next = std::move(*j);
      return c;
    }
    case Op::claim_next: {
      if (r.type == msgpack::type::NIL) return std::monostate{};
      if (r.type != msgpack::type::MAP) bad_reply("claim_next result is not a map or nil");
      ClaimedJob j;
      j.id = opt_str(map_need(r, "id"), "id").value_or("");
      j.fence = as_int(map_need(r, "fence"), "fence");
      const auto& p = map_need(r, "payload");
      if (p.type == msgpack::type::BIN) {
        j.payload = Payload{std::string(p.via.bin.ptr, p.via.bin.size), true};
      } else if (p.type != msgpack::type::NIL) {
        j.payload = Payload{opt_str(p, "payload").value_or(""), false};
      }
      j.attempts = as_int(map_need(r, "attempts"), "attempts");
      return j;
    }
    case Op::stats: {
      if (r.type != msgpack::type::MAP) bad_reply("stats result is not a map");
      Stats st;
      const auto& qs = map_need(r, "queues");
      if (qs.type != msgpack::type::MAP) bad_reply("queues is not a map");
      for (std::uint32_t i = 0; i < qs.via.map.size; ++i) {
        const auto& kv = qs.via.map.ptr[i];
        if (kv.val.type != msgpack::type::MAP) bad_reply("queue stats is not a map");
        QueueStats q;
        q.queue = opt_str(kv.key, "queue").value_or("");
        q.ready = as_int(map_need(kv.val, "ready"), "ready");
        q.delayed = as_int(map_need(kv.val, "delayed"), "delayed");
        q.leased = as_int(map_need(kv.val, "leased"), "leased");
        q.done = as_int(map_need(kv.val, "done"), "done");
        q.dead = as_int(map_need(kv.val, "dead"), "dead");
        q.oldest_ready_age = as_number(map_need(kv.val, "oldest_ready_age"), "oldest_ready_age");
        st.queues.push_back(std::move(q));
      }
      st.requests = static_cast<std::uint64_t>(as_int(map_need(r, "requests"), "requests"));
      st.commits = static_cast<std::uint64_t>(as_int(map_need(r, "commits"), "commits"));
      st.batches = static_cast<std::uint64_t>(as_int(map_need(r, "batches"), "batches"));
      st.failed_commits =
          static_cast<std::uint64_t>(as_int(map_need(r, "failed_commits"), "failed_commits"));
      st.mean_batch = as_number(map_need(r, "mean_batch"), "mean_batch");
      st.waiting_claims =
          static_cast<std::uint64_t>(as_int(map_need(r, "waiting_claims"), "waiting_claims"));
      st.uptime = as_number(map_need(r, "uptime"), "uptime");
      return st;
    }
    case Op::list: {
      if (r.type != msgpack::type::ARRAY) bad_reply("list result is not an array");
      JobList out;
      for (std::uint32_t i = 0; i < r.via.array.size; ++i) {
        const auto& m = r.via.array.ptr[i];
        if (m.type != msgpack::type::MAP) bad_reply("list item is not a map");
        JobInfo j;
        j.id = opt_str(map_need(m, "id"), "id").value_or("");
        j.queue = opt_str(map_need(m, "queue"), "queue").value_or("");
        auto st = status_from_name(opt_str(map_need(m, "state"), "state").value_or(""));
        if (!st) bad_reply("unknown job state");
        j.status = *st;
        j.priority = as_int(map_need(m, "priority"), "priority");
        j.attempts = as_int(map_need(m, "attempts"), "attempts");
        j.max_attempts = as_int(map_need(m, "max_attempts"), "max_attempts");
        j.fence = as_int(map_need(m, "fence"), "fence");
        j.owner = opt_str(map_need(m, "owner"), "owner");
        j.until = as_number(map_need(m, "until"), "until");
        j.not_before = as_number(map_need(m, "not_before"), "not_before");
        j.error = opt_str(map_need(m, "error"), "error");
        out.push_back(std::move(j));
      }
      return out;
    }
  }
  bad_reply("unknown op");
}

}  // namespace

std::string_view op_name(Op op) {
  for (const auto& [o, name] : kOps) {
    if (o == op) return name;
  }
  return "?";
}

std::optional<Op> op_from_name(std::string_view name) {
  for (const auto& [o, n] : kOps) {
    if (n == name) return o;
  }
  return std::nullopt;
}

TimeUse op_time_use(Op op) {
  switch (op) {
    case Op::claim:
    case Op::renew:
    case Op::complete:
    case Op::claim_next:
    case Op::fail:
    case Op::check:
    case Op::complete_next: return TimeUse::required;
    case Op::enqueue:
    case Op::purge:
    case Op::list:
    case Op::stats:
    case Op::metrics: return TimeUse::optional;
    case Op::ping:
    case Op::state:
    case Op::release:
    case Op::retry: return TimeUse::none;
  }
  return TimeUse::none;
}

bool valid_utf8(std::string_view s) { return utf8_strict(s); }

bool op_writes(Op op) {
  switch (op) {
    case Op::enqueue:
    case Op::claim:
    case Op::renew:
    case Op::complete:
    case Op::release:
    case Op::claim_next:
    case Op::fail:
    case Op::retry:
    case Op::purge:
    case Op::complete_next: return true;
    default: return false;
  }
}

std::string_view status_name(JobStatus st) {
  for (const auto& [x, name] : kStatuses) {
    if (x == st) return name;
  }
  return "?";
}

std::optional<JobStatus> status_from_name(std::string_view name) {
  for (const auto& [x, n] : kStatuses) {
    if (n == name) return x;
  }
  return std::nullopt;
}

std::string_view code_name(ErrorCode code) {
  for (const auto& [c, name] : kCodes) {
    if (c == code) return name;
  }
  return "internal";
}

std::optional<ErrorCode> code_from_name(std::string_view name) {
  for (const auto& [c, n] : kCodes) {
    if (n == name) return c;
  }
  return std::nullopt;
}

std::string_view clock_name(ClockMode mode) {
  return mode == ClockMode::server ? "server" : "client";
}

Decoded decode_request(std::string_view payload, ClockMode clock) {
  Decoded out;
  try {
    msgpack::object_handle handle;
    std::size_t offset = 0;
    try {
      msgpack::unpack_limit limit(kMaxArrayItems, kMaxMapEntries, payload.size(), payload.size(),
                                  payload.size(), kMaxDepth);
      handle = msgpack::unpack(payload.data(), payload.size(), offset, nullptr, nullptr, limit);
    } catch (const msgpack::insufficient_bytes&) {
      refuse(ErrorCode::bad_request, "payload is truncated msgpack");
    } catch (const msgpack::depth_size_overflow&) {
      refuse(ErrorCode::bad_request, "payload is nested too deeply");
    } catch (const msgpack::size_overflow&) {
      refuse(ErrorCode::bad_request, "payload exceeds the decoder's size limits");
    } catch (const msgpack::unpack_error&) {
      refuse(ErrorCode::bad_request, "payload is not msgpack");
    }
    if (offset != payload.size()) {
      refuse(ErrorCode::bad_request, "payload has bytes after the msgpack value");
    }
    const msgpack::object& root = handle.get();
    if (root.type != msgpack::type::MAP) {
      refuse(ErrorCode::bad_request, "payload must be a msgpack map, not " +
                                         std::string(type_name(root)));
    }
    Fields fields(root);
    out.rid = read_rid(fields);
    out.request = read_request(fields, clock);
    out.request->rid = out.rid;
  } catch (Refusal& r) {
    out.request.reset();
    out.error = Error{r.code, std::move(r.message)};
  } catch (const std::bad_alloc&) {
    out.request.reset();
    out.error = Error{ErrorCode::bad_request, "payload too large to decode"};
  } catch (const std::exception& e) {
    // Any other library surprise is still the client's bad input, not a crash.
    out.request.reset();
    out.error = Error{ErrorCode::bad_request, std::string("payload rejected: ") + e.what()};
  }
  return out;
}

std::string encode_ok(const Result& result, const std::optional<Rid>& rid) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(rid ? 3 : 2);
  pk.pack("ok");
  pk.pack_true();
  pk.pack("result");
  pack_result(pk, buf, result);
  if (rid) {
    pk.pack("rid");
    pack_rid(pk, *rid);
  }
  return std::string(buf.data(), buf.size());
}

std::string encode_error(const Error& error, const std::optional<Rid>& rid) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(rid ? 3 : 2);
  pk.pack("ok");
  pk.pack_false();
  pk.pack("error");
  pk.pack_map(2);
  pk.pack("code");
  pk.pack(code_name(error.code));
  pk.pack("message");
  pk.pack(error.message);
  if (rid) {
    pk.pack("rid");
    pack_rid(pk, *rid);
  }
  return std::string(buf.data(), buf.size());
}

std::string encode_request(const Request& r) {
  // Fields in a fixed order; optional ones only when they differ from their
  // default, so that a request reads like the call that made it.
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  std::vector<std::function<void()>> fields;
  auto add = [&](const char* key, std::function<void()> value) {
    fields.push_back([&pk, key, value = std::move(value)] {
      pk.pack(key);
      value();
    });
  };
  auto str = [&](const char* key, std::string v) {
    add(key, [&pk, v = std::move(v)] { pk.pack(v); });
  };
  auto i64 = [&](const char* key, std::int64_t v) { add(key, [&pk, v] { pk.pack(v); }); };
  auto f64 = [&](const char* key, double v) { add(key, [&buf, v] { pack_float64(buf, v); }); };

  str("op", std::string(op_name(r.op)));
  const Op op = r.op;
  if (op != Op::ping && op != Op::stats && op != Op::metrics && op != Op::claim_next &&
      op != Op::list && op != Op::purge) {
    str("id", r.id);
  }
  if (op == Op::claim_next || op == Op::complete_next ||
      (!r.all_queues && (op == Op::enqueue || op == Op::list || op == Op::purge))) {
    str("queue", r.queue);
  }
  if (op == Op::claim || op == Op::renew || op == Op::complete || op == Op::release ||
      op == Op::claim_next || op == Op::fail || op == Op::check || op == Op::complete_next) {
    str("owner", r.owner);
  }
  if (op == Op::renew || op == Op::complete || op == Op::release || op == Op::fail ||
      op == Op::check || op == Op::complete_next) {
    i64("fence", r.fence);
  }
  if (op == Op::claim || op == Op::renew || op == Op::claim_next || op == Op::complete_next) {
    f64("ttl", r.ttl);
  }
  if (op == Op::complete || op == Op::complete_next) {
    add("result", [&pk, &r] { pack_opt_str(pk, r.result); });
  }
  if (op == Op::enqueue) {
    if (r.payload) add("payload", [&pk, &r] { pack_payload(pk, r.payload); });
    if (r.priority != 0) i64("priority", r.priority);
    if (r.delay != 0) f64("delay", r.delay);
    if (r.max_attempts != 0) i64("max_attempts", r.max_attempts);
  }
  if (op == Op::claim_next && r.wait > 0) f64("wait", r.wait);
  if (op == Op::fail) {
    str("error", r.error);
    if (r.retry_in) f64("retry_in", *r.retry_in);
  }
  if (op == Op::list) {
    if (r.status) str("state", std::string(status_name(*r.status)));
    i64("limit", r.limit);
    if (!r.after.empty()) str("after", r.after);
  }
  if (op == Op::purge) f64("older_than", r.older_than);
  if (r.now) f64("now", *r.now);
  if (r.rid) add("rid", [&pk, &r] { pack_rid(pk, *r.rid); });

  pk.pack_map(static_cast<std::uint32_t>(fields.size()));
  for (auto& f : fields) f();
  return std::string(buf.data(), buf.size());
}

std::optional<Rid> reply_rid(std::string_view payload) {
  try {
    std::size_t offset = 0;
    msgpack::unpack_limit limit(kMaxReplyItems, kMaxReplyItems, payload.size(), payload.size(),
                                payload.size(), kMaxDepth);
    auto handle =
        msgpack::unpack(payload.data(), payload.size(), offset, nullptr, nullptr, limit);
    const auto& root = handle.get();
    if (root.type != msgpack::type::MAP) return std::nullopt;
    const auto* rid = map_get(root, "rid");
    if (!rid) return std::nullopt;
    switch (rid->type) {
      case msgpack::type::NIL: return Rid{std::monostate{}};
      case msgpack::type::POSITIVE_INTEGER: return Rid{rid->via.u64};
      case msgpack::type::NEGATIVE_INTEGER: return Rid{rid->via.i64};
      case msgpack::type::STR: return Rid{std::string(rid->as<std::string_view>())};
      default: return std::nullopt;
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<Reply> decode_reply(std::string_view payload, Op op, const Rid& expect) {
  msgpack::object_handle handle;
  try {
    std::size_t offset = 0;
    // Replies carry lists (up to kMaxListLimit jobs) and a map per queue.
    msgpack::unpack_limit limit(kMaxReplyItems, kMaxReplyItems, payload.size(), payload.size(),
                                payload.size(), kMaxDepth);
    handle = msgpack::unpack(payload.data(), payload.size(), offset, nullptr, nullptr, limit);
  } catch (const std::exception& e) {
    bad_reply(std::string("not msgpack: ") + e.what());
  }
  const auto& root = handle.get();
  if (root.type != msgpack::type::MAP) bad_reply("not a map");
  Reply reply;
  if (const auto* rid = map_get(root, "rid")) {
    switch (rid->type) {
      case msgpack::type::NIL: reply.rid = Rid{std::monostate{}}; break;
      case msgpack::type::POSITIVE_INTEGER: reply.rid = Rid{rid->via.u64}; break;
      case msgpack::type::NEGATIVE_INTEGER: reply.rid = Rid{rid->via.i64}; break;
      case msgpack::type::STR: reply.rid = Rid{std::string(rid->as<std::string_view>())}; break;
      default: bad_reply("rid has a bad type");
    }
  }
  if (reply.rid != expect) return std::nullopt;
  reply.ok = as_bool(map_need(root, "ok"), "ok");
  if (reply.ok) {
    reply.result = read_result(map_need(root, "result"), op);
  } else {
    const auto& err = map_need(root, "error");
    if (err.type != msgpack::type::MAP) bad_reply("error is not a map");
    reply.error_code = opt_str(map_need(err, "code"), "code").value_or("");
    reply.error_message = opt_str(map_need(err, "message"), "message").value_or("");
  }
  return reply;
}

}  // namespace fenceq::protocol
