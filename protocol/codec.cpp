#include "fenceq_protocol/codec.hpp"

#include <msgpack.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

namespace fenceq::protocol {
namespace {

constexpr std::array<std::pair<Op, std::string_view>, 7> kOps{{
    {Op::ping, "ping"},
    {Op::enqueue, "enqueue"},
    {Op::state, "state"},
    {Op::claim, "claim"},
    {Op::renew, "renew"},
    {Op::complete, "complete"},
    {Op::release, "release"},
}};

constexpr std::array<std::pair<ErrorCode, std::string_view>, 6> kCodes{{
    {ErrorCode::bad_request, "bad_request"},
    {ErrorCode::unknown_op, "unknown_op"},
    {ErrorCode::invalid_argument, "invalid_argument"},
    {ErrorCode::unsupported_version, "unsupported_version"},
    {ErrorCode::unavailable, "unavailable"},
    {ErrorCode::internal, "internal"},
}};

// Decoder limits. A request map has a handful of keys; unknown keys may carry
// small values. The unpacker allocates an array or map's slots when it reads
// the header, so these caps bound what a lying header can make it allocate.
// Strings are bounded by the frame itself (ZMQ_MAXMSGSIZE).
constexpr std::size_t kMaxMapEntries = 64;
constexpr std::size_t kMaxArrayItems = 256;
constexpr std::size_t kMaxDepth = 8;
constexpr std::size_t kMaxRidBytes = 256;

// Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
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
    if (!valid_utf8(s)) {
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
  if (!op) {
    // Bounded: an op name is echoed back, so cut what a client sent.
    refuse(ErrorCode::unknown_op, "unknown op '" + std::string(op_text.substr(0, 64)) + "'");
  }

  Request r;
  r.op = *op;
  // C2.3: in server clock mode any request that carries `now` is refused; in
  // client clock mode the ops that need a time must carry it (C2.2).
  const bool has_now = f.find("now") != nullptr;
  if (clock == ClockMode::server && has_now) {
    refuse(ErrorCode::invalid_argument,
           "field 'now' is not accepted: the daemon runs the server clock");
  }
  switch (r.op) {
    case Op::ping: break;
    case Op::enqueue:
    case Op::state: r.id = f.str("id", kMaxKeyBytes); break;
    case Op::claim:
      r.id = f.str("id", kMaxKeyBytes);
      r.owner = f.str("owner", kMaxKeyBytes);
      r.ttl = f.number("ttl");
      break;
    case Op::renew:
      r.id = f.str("id", kMaxKeyBytes);
      r.owner = f.str("owner", kMaxKeyBytes);
      r.fence = f.integer("fence");
      r.ttl = f.number("ttl");
      break;
    case Op::complete: {
      r.id = f.str("id", kMaxKeyBytes);
      r.owner = f.str("owner", kMaxKeyBytes);
      r.fence = f.integer("fence");
      const auto& res = f.require("result");
      if (res.type != msgpack::type::NIL) {
        // The result is bounded by the frame size only (--max-message).
        r.result = Fields::checked_str("result", res, std::numeric_limits<std::size_t>::max());
      }
      break;
    }
    case Op::release:
      r.id = f.str("id", kMaxKeyBytes);
      r.owner = f.str("owner", kMaxKeyBytes);
      r.fence = f.integer("fence");
      break;
  }
  if ((r.op == Op::claim || r.op == Op::renew) && r.ttl <= 0) {
    refuse(ErrorCode::invalid_argument, "field 'ttl' must be > 0");
  }
  if (op_needs_time(r.op) && clock == ClockMode::client) {
    if (!has_now) {
      refuse(ErrorCode::invalid_argument,
             "field 'now' is required: the daemon runs the client clock");
    }
    r.now = f.number("now");
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
        } else if constexpr (std::is_same_v<T, JobRow>) {
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
        } else {
          static_assert(std::is_same_v<T, PingInfo>);
          pk.pack_map(3);
          pk.pack("protocol");
          pk.pack(v.protocol);
          pk.pack("version");
          pk.pack(v.version);
          pk.pack("clock");
          pk.pack(v.clock);
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
      PingInfo p;
      p.protocol = static_cast<int>(as_int(map_need(r, "protocol"), "protocol"));
      p.version = opt_str(map_need(r, "version"), "version").value_or("");
      p.clock = opt_str(map_need(r, "clock"), "clock").value_or("");
      return p;
    }
    case Op::state: {
      if (r.type == msgpack::type::NIL) return std::monostate{};
      if (r.type != msgpack::type::MAP) bad_reply("state result is not a map or nil");
      JobRow j;
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
    case Op::release: return as_bool(r, "result");
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

bool op_needs_time(Op op) { return op == Op::claim || op == Op::renew || op == Op::complete; }

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
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  const bool has_id = r.op != Op::ping;
  const bool has_owner = has_id && r.op != Op::enqueue && r.op != Op::state;
  const bool has_fence = r.op == Op::renew || r.op == Op::complete || r.op == Op::release;
  const bool has_ttl = r.op == Op::claim || r.op == Op::renew;
  const bool has_result = r.op == Op::complete;
  std::uint32_t n = 1 + has_id + has_owner + has_fence + has_ttl + has_result +
                    r.now.has_value() + r.rid.has_value();
  pk.pack_map(n);
  pk.pack("op");
  pk.pack(op_name(r.op));
  if (has_id) {
    pk.pack("id");
    pk.pack(r.id);
  }
  if (has_owner) {
    pk.pack("owner");
    pk.pack(r.owner);
  }
  if (has_fence) {
    pk.pack("fence");
    pk.pack(r.fence);
  }
  if (has_ttl) {
    pk.pack("ttl");
    pack_float64(buf, r.ttl);
  }
  if (has_result) {
    pk.pack("result");
    pack_opt_str(pk, r.result);
  }
  if (r.now) {
    pk.pack("now");
    pack_float64(buf, *r.now);
  }
  if (r.rid) {
    pk.pack("rid");
    pack_rid(pk, *r.rid);
  }
  return std::string(buf.data(), buf.size());
}

std::optional<Reply> decode_reply(std::string_view payload, Op op, const Rid& expect) {
  msgpack::object_handle handle;
  try {
    std::size_t offset = 0;
    msgpack::unpack_limit limit(kMaxArrayItems, kMaxMapEntries, payload.size(), payload.size(),
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
