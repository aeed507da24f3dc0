// The daemon's side of the codec: decode_request, the one way untrusted bytes
// become a Request (msgpack with limits, then every field checked against its
// op: present, typed, within bounds, UTF-8), by the op's reader (kReaders).
//
// The codec's files, one concept each: this one; replies.cpp (encode_ok,
// encode_error: the daemon's replies); client_side.cpp (encode_request,
// reply_rid, decode_reply); vocabulary.cpp (op names, error codes, job
// states, UTF-8) that all use. They share one header,
// fenceq_protocol/codec.hpp, in sections of the same names.
#include "fenceq_protocol/codec.hpp"

#include <msgpack.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "pack.hpp"

namespace fenceq::protocol {
namespace {

// Decoder limits. A request map has a handful of keys; unknown keys may carry
// small values. The unpacker allocates an array or map's slots when it reads
// the header, so these caps bound what a lying header can make it allocate.
// Strings are bounded by the frame itself (ZMQ_MAXMSGSIZE).
constexpr std::size_t kMaxMapEntries = 64;
// Twice a batch's size: a batch a little too large is refused by its op with
// invalid_argument ("must hold 1 to 1000 entries"), a much larger array here.
constexpr std::size_t kMaxArrayItems = 2 * kMaxBatchItems;
constexpr std::size_t kMaxDepth = 8;
constexpr std::size_t kMaxRidBytes = 256;

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
    if (v.type == msgpack::type::POSITIVE_INTEGER) {
      d = static_cast<double>(v.via.u64);
    } else if (v.type == msgpack::type::NEGATIVE_INTEGER) {
      d = static_cast<double>(v.via.i64);
    } else if (v.type == msgpack::type::FLOAT32 || v.type == msgpack::type::FLOAT64) {
      d = v.via.f64;
    } else {
      wrong_type(name, "number", v);
    }
    if (!std::isfinite(d)) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must be finite");
    }
    return d;
  }

  bool has(std::string_view name) const { return find(name) != nullptr; }

  bool boolean(std::string_view name) const {
    const auto& v = require(name);
    if (v.type != msgpack::type::BOOLEAN) wrong_type(name, "bool", v);
    return v.via.boolean;
  }

  // The array `name` of 1..max maps (a batch's entries).
  const msgpack::object_array& entries(std::string_view name, std::size_t max) const {
    const auto& v = require(name);
    if (v.type != msgpack::type::ARRAY) wrong_type(name, "array", v);
    if (v.via.array.size == 0 || v.via.array.size > max) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must hold 1 to " +
                                              std::to_string(max) + " entries");
    }
    for (std::uint32_t i = 0; i < v.via.array.size; ++i) {
      if (v.via.array.ptr[i].type != msgpack::type::MAP) {
        refuse(ErrorCode::bad_request, std::string(name) + "[" + std::to_string(i) +
                                           "] must be a map, not " +
                                           std::string(type_name(v.via.array.ptr[i])));
      }
    }
    return v.via.array;
  }

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

  // A str that names one of a vocabulary's values (`from`: its reader);
  // invalid_argument, saying which ones (`known`), for any other str.
  template <typename T>
  T named(std::string_view name, std::optional<T> (*from)(std::string_view),
          std::string_view known) const {
    const auto& v = require(name);
    if (v.type != msgpack::type::STR) wrong_type(name, "str", v);
    auto value = from(v.as<std::string_view>());
    if (!value) {
      refuse(ErrorCode::invalid_argument,
             "field '" + std::string(name) + "' must be " + std::string(known));
    }
    return *value;
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
  if (v->type == msgpack::type::NIL) return Rid{std::monostate{}};
  if (v->type == msgpack::type::POSITIVE_INTEGER) return Rid{v->via.u64};
  if (v->type == msgpack::type::NEGATIVE_INTEGER) return Rid{v->via.i64};
  if (v->type == msgpack::type::STR) return Rid{Fields::checked_str("rid", *v, kMaxRidBytes)};
  Fields::wrong_type("rid", "nil, int or str", *v);
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
    if (len > 1 && i + len <= s.size() && i + len <= max && valid_utf8(s.substr(i, len))) {
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

// A job's payload (enqueue, an entry of enqueue_many, schedule_set): bin or
// str as sent, nil or left out for none.
std::optional<Payload> read_payload(const Fields& f) {
  const auto* p = f.find("payload");
  if (!p || p->type == msgpack::type::NIL) return std::nullopt;
  if (p->type == msgpack::type::BIN) {
    if (p->via.bin.size > kMaxPayloadBytes) {
      refuse(ErrorCode::invalid_argument, "field 'payload' is longer than " +
                                              std::to_string(kMaxPayloadBytes) + " bytes");
    }
    return Payload{std::string(p->via.bin.ptr, p->via.bin.size), true};
  }
  if (p->type != msgpack::type::STR) Fields::wrong_type("payload", "bin, str or nil", *p);
  return Payload{Fields::checked_str("payload", *p, kMaxPayloadBytes), false};
}
std::int64_t read_priority(const Fields& f) {
  return f.integer_in("priority", -(1LL << 31), (1LL << 31) - 1);
}
std::int64_t read_max_attempts(const Fields& f) { return f.integer_in("max_attempts", 0, 1000000); }

// enqueue's fields, in `f`: the request itself, or an entry of enqueue_many.
JobSpec read_job(const Fields& f) {
  JobSpec j;
  j.id = f.str("id", kMaxKeyBytes);
  if (f.has("queue")) {
    j.queue = f.str("queue", kMaxQueueBytes);
    if (j.queue.empty()) refuse(ErrorCode::invalid_argument, "field 'queue' must not be empty");
  }
  j.payload = read_payload(f);
  if (f.has("priority")) j.priority = read_priority(f);
  if (f.has("delay")) j.delay = f.number_in("delay", 0, 1e9);
  if (f.has("max_attempts")) j.max_attempts = read_max_attempts(f);
  return j;
}

// complete's and renew's lease fields, in an entry of complete_many or
// renew_many; the result only for complete_many.
LeaseItem read_lease(const Fields& f, bool with_result) {
  LeaseItem l;
  l.id = f.str("id", kMaxKeyBytes);
  l.owner = f.str("owner", kMaxKeyBytes);
  l.fence = f.integer("fence");
  if (with_result) {
    const auto& res = f.require("result");
    if (res.type != msgpack::type::NIL) {
      l.result = Fields::checked_str("result", res, std::numeric_limits<std::size_t>::max());
    }
  } else if (f.has("progress")) {
    l.progress = f.str("progress", kMaxProgressBytes);
  }
  return l;
}

// Reads each entry of the array `name`; a refusal names the entry:
// "jobs[3]: field 'id' ...".
template <typename Read>
void each_entry(const Fields& f, std::string_view name, Read read) {
  const auto& entries = f.entries(name, kMaxBatchItems);
  for (std::uint32_t i = 0; i < entries.size; ++i) {
    try {
      read(Fields(entries.ptr[i]));
    } catch (Refusal& r) {
      r.message = std::string(name) + "[" + std::to_string(i) + "]: " + r.message;
      throw;
    }
  }
}

// --- each op's fields --------------------------------------------------------
// One reader per op, in kReaders' rows: each reads its op's fields into the
// request in the order they are checked (the first refusal is the answer).
namespace read {

void id(const Fields& f, Request& r) { r.id = f.str("id", kMaxKeyBytes); }
void owner(const Fields& f, Request& r) { r.owner = f.str("owner", kMaxKeyBytes); }
void fence(const Fields& f, Request& r) { r.fence = f.integer("fence"); }
void ttl(const Fields& f, Request& r) {
  r.ttl = f.number("ttl");
  if (r.ttl <= 0) refuse(ErrorCode::invalid_argument, "field 'ttl' must be > 0");
}
// The queue the op acts on: `required`, or a filter (all queues without it).
void queue(const Fields& f, Request& r, bool required) {
  if (!required && !f.has("queue")) return;
  r.queue = f.str("queue", kMaxQueueBytes);
  if (r.queue.empty()) refuse(ErrorCode::invalid_argument, "field 'queue' must not be empty");
  r.all_queues = false;
}
// A lease's fields: the job, its owner and the fence of its claim.
void lease(const Fields& f, Request& r) {
  id(f, r);
  owner(f, r);
  fence(f, r);
}

void nothing(const Fields&, Request&) {}

void enqueue(const Fields& f, Request& r) {
  auto j = read_job(f);
  r.id = std::move(j.id);
  r.all_queues = !f.has("queue");
  r.queue = std::move(j.queue);
  r.payload = std::move(j.payload);
  r.priority = j.priority;
  r.delay = j.delay;
  r.max_attempts = j.max_attempts;
}

void claim(const Fields& f, Request& r) {
  id(f, r);
  owner(f, r);
  ttl(f, r);
}

void renew(const Fields& f, Request& r) {
  lease(f, r);
  ttl(f, r);
  if (f.has("progress")) r.progress = f.str("progress", kMaxProgressBytes);
}

void complete(const Fields& f, Request& r) {
  lease(f, r);
  const auto& res = f.require("result");
  if (res.type != msgpack::type::NIL) {
    // The result is bounded by the frame size only (--max-message).
    r.result = Fields::checked_str("result", res, std::numeric_limits<std::size_t>::max());
  }
}

void claim_next(const Fields& f, Request& r) {
  queue(f, r, true);
  owner(f, r);
  ttl(f, r);
  if (f.has("wait")) r.wait = f.number_in("wait", 0, kMaxWaitSeconds);
  if (f.has("max")) r.max = f.integer_in("max", 1, kMaxBatchItems);
}

void fail(const Fields& f, Request& r) {
  lease(f, r);
  r.error = f.str("error", kMaxErrorBytes);
  if (f.has("retry_in")) r.retry_in = f.number_in("retry_in", 0, 1e9);
}

void list(const Fields& f, Request& r) {
  queue(f, r, false);
  if (f.has("state")) {
    r.status = f.named("state", status_from_name, "ready, delayed, leased, done, dead or cancelled");
  }
  if (f.has("limit")) r.limit = f.integer_in("limit", 1, kMaxListLimit);
  if (f.has("after")) r.after = f.str("after", kMaxKeyBytes);
  if (f.has("prefix")) r.prefix = f.str("prefix", kMaxKeyBytes);
  if (f.has("order")) r.order = f.named("order", order_from_name, "id, created or -created");
  if (f.has("after_created")) r.after_created = f.number("after_created");
  // By enqueue time the cursor is the last row's (created, id): both or neither.
  if (r.order == ListOrder::id && r.after_created) {
    refuse(ErrorCode::invalid_argument, "field 'after_created' needs order created or -created");
  }
  if (r.order != ListOrder::id && f.has("after") != r.after_created.has_value()) {
    refuse(ErrorCode::invalid_argument,
           "in order " + std::string(order_name(r.order)) +
               " the cursor is 'after' (the last row's id) with 'after_created' (its created)");
  }
}

void purge(const Fields& f, Request& r) {
  queue(f, r, false);
  r.older_than = f.number_in("older_than", 0, 1e12);
}

void complete_next(const Fields& f, Request& r) {
  complete(f, r);
  queue(f, r, true);
  ttl(f, r);
}

void enqueue_many(const Fields& f, Request& r) {
  each_entry(f, "jobs", [&](const Fields& e) { r.jobs.push_back(read_job(e)); });
}

void complete_many(const Fields& f, Request& r) {
  each_entry(f, "items", [&](const Fields& e) { r.items.push_back(read_lease(e, true)); });
  if (!f.has("next")) return;
  const auto& n = f.require("next");
  if (n.type != msgpack::type::MAP) Fields::wrong_type("next", "map", n);
  try {
    Fields next(n);
    r.queue = next.str("queue", kMaxQueueBytes);
    if (r.queue.empty()) refuse(ErrorCode::invalid_argument, "field 'queue' must not be empty");
    r.ttl = next.number("ttl");
    if (r.ttl <= 0) refuse(ErrorCode::invalid_argument, "field 'ttl' must be > 0");
    r.max = next.integer_in("max", 1, kMaxBatchItems);
  } catch (Refusal& e) {
    e.message = "next: " + e.message;
    throw;
  }
  r.has_next = true;
}

void renew_many(const Fields& f, Request& r) {
  each_entry(f, "items", [&](const Fields& e) { r.items.push_back(read_lease(e, false)); });
  ttl(f, r);
}

void queue_config(const Fields& f, Request& r) {
  queue(f, r, true);
  if (f.has("paused")) r.paused = f.boolean("paused");
  if (f.has("max_leased")) r.max_leased = f.integer_in("max_leased", 0, kMaxLeasedLimit);
  if (f.has("rate")) r.rate = f.integer_in("rate", 0, kMaxRate);
  if (f.has("per")) {
    r.per = f.number_in("per", 0, kMaxRatePer);
    if (*r.per <= 0) refuse(ErrorCode::invalid_argument, "field 'per' must be > 0");
  }
}

void await_job(const Fields& f, Request& r) {
  id(f, r);
  r.wait = f.has("wait") ? f.number_in("wait", 0, kMaxWaitSeconds) : 0;
}

void schedule_name(const Fields& f, Request& r) { r.name = f.str("name", kMaxScheduleName); }

void schedule_set(const Fields& f, Request& r) {
  schedule_name(f, r);
  if (r.name.empty()) refuse(ErrorCode::invalid_argument, "field 'name' must not be empty");
  r.cron = f.str("cron", kMaxCronBytes);
  if (f.has("tz")) r.tz = f.str("tz", kMaxTzBytes);
  // The job's fields, as enqueue takes them (no id: each tick makes one).
  if (f.has("queue")) {
    r.queue = f.str("queue", kMaxQueueBytes);
    if (r.queue.empty()) refuse(ErrorCode::invalid_argument, "field 'queue' must not be empty");
  }
  r.payload = read_payload(f);
  if (f.has("priority")) r.priority = read_priority(f);
  if (f.has("max_attempts")) r.max_attempts = read_max_attempts(f);
}

}  // namespace read

struct Reader {
  Op op;
  void (*read)(const Fields&, Request&);
};

constexpr std::array<Reader, kOpCount> kReaders{{
    {Op::ping, read::nothing},
    {Op::enqueue, read::enqueue},
    {Op::state, read::id},
    {Op::claim, read::claim},
    {Op::renew, read::renew},
    {Op::complete, read::complete},
    {Op::release, read::lease},
    {Op::claim_next, read::claim_next},
    {Op::fail, read::fail},
    {Op::check, read::lease},
    {Op::retry, read::id},
    {Op::stats, read::nothing},
    {Op::list, read::list},
    {Op::purge, read::purge},
    {Op::metrics, read::nothing},
    {Op::complete_next, read::complete_next},
    {Op::enqueue_many, read::enqueue_many},
    {Op::complete_many, read::complete_many},
    {Op::renew_many, read::renew_many},
    {Op::cancel, read::id},
    {Op::job, read::id},
    {Op::queue_config, read::queue_config},
    {Op::await_job, read::await_job},
    {Op::schedule_set, read::schedule_set},
    {Op::schedule_delete, read::schedule_name},
    {Op::schedule_list, read::nothing},
}};
static_assert(one_row_per_op(kReaders), "kReaders needs one row per Op, in the enum's order");

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
  if (clock == ClockMode::server && has_now) {
    refuse(ErrorCode::invalid_argument,
           "field 'now' is not accepted: the daemon runs the server clock");
  }
  kReaders[static_cast<std::size_t>(r.op)].read(f, r);
  if (clock == ClockMode::client) {
    // Checked on every op (a NaN is refused even where the op ignores it).
    if (has_now) {
      r.now = f.number("now");
    } else if (op_time_use(r.op) == TimeUse::required) {
      refuse(ErrorCode::invalid_argument,
             "field 'now' is required: the daemon runs the client clock");
    }
  }
  return r;
}

}  // namespace

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

}  // namespace fenceq::protocol

