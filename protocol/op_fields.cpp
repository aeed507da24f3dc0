// Each op's fields: how decode_request reads them (present, typed, within
// bounds, UTF-8) into the op's struct (req::X, codec.hpp), and how
// encode_request writes them from it, side by side, with one row of
// kOpFields per op (its reader and its writer). The plain ops' readers and
// writers are generated from protocol/ops/ops.json (op_codec.inc, by
// emit_codec.py) as calls of get() and put() below; the ops with codec
// custom have theirs here (namespaces read and write).
//
// The codec's files, one concept each: this one; daemon_side.cpp
// (decode_request); replies.cpp (encode_ok, encode_error); client_side.cpp
// (encode_request, reply_rid, decode_reply); vocabulary.cpp (op names, error
// codes, job states, UTF-8).
#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_set>

#include "fields.hpp"

namespace fenceq::protocol::wire {
namespace {

// A job's payload (enqueue, an entry of enqueue_many, schedule_set): bin or
// str as sent, nil or left out for none.
// A payload: bin, str or nil, at most kMaxPayloadBytes (`payload`, and a
// step's `value`, C3.22).
std::optional<Payload> read_payload(const Fields& f, const char* name = "payload") {
  const auto* p = f.find(name);
  if (!p || p->type == msgpack::type::NIL) return std::nullopt;
  if (p->type == msgpack::type::BIN) {
    if (p->via.bin.size > kMaxPayloadBytes) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' is longer than " +
                                              std::to_string(kMaxPayloadBytes) + " bytes");
    }
    return Payload{std::string(p->via.bin.ptr, p->via.bin.size), true};
  }
  if (p->type != msgpack::type::STR) Fields::wrong_type(name, "bin, str or nil", *p);
  return Payload{Fields::checked_str(name, *p, kMaxPayloadBytes), false};
}
std::int64_t read_priority(const Fields& f) {
  return f.integer_in("priority", -(1LL << 31), (1LL << 31) - 1);
}
std::int64_t read_max_attempts(const Fields& f) { return f.integer_in("max_attempts", 0, 1000000); }

// A job's group (enqueue, an entry of enqueue_many, list's filter).
std::string read_group(const Fields& f) {
  auto g = f.str("group", kMaxGroupBytes);
  if (g.empty()) refuse(ErrorCode::invalid_argument, "field 'group' must not be empty");
  return g;
}

// A job's headers (C3.18): a map of str to str, keys and values at most
// kMaxHeadersBytes in all; nil or {} for none.
Headers read_headers(const Fields& f) {
  const auto& h = *f.find("headers");
  Headers out;
  if (h.type == msgpack::type::NIL) return out;
  if (h.type != msgpack::type::MAP) Fields::wrong_type("headers", "map of str to str", h);
  std::size_t bytes = 0;
  for (std::uint32_t i = 0; i < h.via.map.size; ++i) {
    const auto& kv = h.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR || kv.val.type != msgpack::type::STR) {
      Fields::wrong_type("headers", "map of str to str",
                         kv.key.type != msgpack::type::STR ? kv.key : kv.val);
    }
    auto key = Fields::checked_str("headers", kv.key, kMaxHeadersBytes);
    auto val = Fields::checked_str("headers", kv.val, kMaxHeadersBytes);
    bytes += key.size() + val.size();
    if (bytes > kMaxHeadersBytes) {
      refuse(ErrorCode::invalid_argument, "field 'headers' holds more than " +
                                              std::to_string(kMaxHeadersBytes) +
                                              " bytes of keys and values");
    }
    if (key.empty()) refuse(ErrorCode::invalid_argument, "field 'headers' has an empty key");
    if (!out.emplace(std::move(key), std::move(val)).second) {
      refuse(ErrorCode::invalid_argument, "field 'headers' has a key twice");
    }
  }
  return out;
}

// The jobs a job waits for (C3.13): `after`, 1..kMaxAfter distinct ids
// other than its own, and `after_failure`.
void read_after(const Fields& f, JobSpec& j) {
  if (f.has("after")) {
    j.parents = f.strs("after", kMaxAfter, kMaxKeyBytes);
    std::unordered_set<std::string_view> seen;
    for (const auto& p : j.parents) {
      if (p.empty()) refuse(ErrorCode::invalid_argument, "field 'after' holds an empty id");
      if (p == j.id) refuse(ErrorCode::invalid_argument, "field 'after' names the job itself");
      if (!seen.insert(p).second) {
        refuse(ErrorCode::invalid_argument, "field 'after' names '" + p + "' twice");
      }
    }
  }
  if (f.has("after_failure")) {
    if (j.parents.empty()) refuse(ErrorCode::invalid_argument, "field 'after_failure' needs 'after'");
    const auto how = f.str("after_failure", 16);
    if (how != "cancel" && how != "run") {
      refuse(ErrorCode::invalid_argument,
             "field 'after_failure' must be \"cancel\" or \"run\", not \"" + how + "\"");
    }
    j.after_run = how == "run";
  }
}

// enqueue's fields, in `f`: the request itself, or an entry of enqueue_many.
JobSpec read_job(const Fields& f) {
  JobSpec j;
  j.id = f.str("id", kMaxKeyBytes);
  if (is_tick_id(j.id)) {
    refuse(ErrorCode::invalid_argument,
           "field 'id': NAME@YYYY-MM-DDTHH:MMZ is a periodic job's id, the schedules' alone");
  }
  if (f.has("queue")) {
    j.queue = f.str("queue", kMaxQueueBytes);
    if (j.queue.empty()) refuse(ErrorCode::invalid_argument, "field 'queue' must not be empty");
  }
  j.payload = read_payload(f);
  if (f.has("priority")) j.priority = read_priority(f);
  if (f.has("delay")) j.delay = f.number_in("delay", 0, 1e9);
  if (f.has("max_attempts")) j.max_attempts = read_max_attempts(f);
  if (f.has("key")) {
    j.key = f.str("key", kMaxUniqueKeyBytes);
    if (j.key->empty()) refuse(ErrorCode::invalid_argument, "field 'key' must not be empty");
  }
  if (f.has("unique_for")) {
    if (!j.key) refuse(ErrorCode::invalid_argument, "field 'unique_for' needs a 'key'");
    j.unique_for = f.number_in("unique_for", 0, kMaxUniqueFor);
    if (j.unique_for <= 0) refuse(ErrorCode::invalid_argument, "field 'unique_for' must be > 0");
  }
  if (f.has("on_conflict")) {
    if (!j.key) refuse(ErrorCode::invalid_argument, "field 'on_conflict' needs a 'key'");
    const auto how = f.str("on_conflict", 16);
    if (how != "skip" && how != "replace") {
      refuse(ErrorCode::invalid_argument,
             "field 'on_conflict' must be \"skip\" or \"replace\", not \"" + how + "\"");
    }
    j.replace = how == "replace";
  }
  if (f.has("group")) j.group = read_group(f);
  read_after(f, j);
  if (f.has("max_runtime")) {
    j.max_runtime = f.number_in("max_runtime", 0, 1e9);
    if (j.max_runtime <= 0) refuse(ErrorCode::invalid_argument, "field 'max_runtime' must be > 0");
  }
  if (f.has("headers")) j.headers = read_headers(f);
  if (f.has("deadline")) {
    j.deadline = f.number_in("deadline", 0, kMaxDeadline);
    if (j.deadline <= 0) refuse(ErrorCode::invalid_argument, "field 'deadline' must be > 0");
  }
  return j;
}

// A job's unique-key fields, written only when it has a key.
template <typename Packer>
void write_key(Packer& pk, const std::optional<std::string>& key, double unique_for,
               bool replace, msgpack::sbuffer& buf) {
  if (!key) return;
  pk.pack("key");
  pk.pack(*key);
  if (unique_for > 0) {
    pk.pack("unique_for");
    pack::float64(buf, unique_for);
  }
  if (replace) {
    pk.pack("on_conflict");
    pk.pack("replace");
  }
}
std::uint32_t key_fields(const std::optional<std::string>& key, double unique_for, bool replace) {
  return key ? 1 + (unique_for > 0) + replace : 0;
}

// The jobs a job waits for, written only when it has any.
template <typename Packer>
void write_after(Packer& pk, const std::vector<std::string>& parents, bool after_run) {
  if (parents.empty()) return;
  pk.pack("after");
  pk.pack_array(static_cast<std::uint32_t>(parents.size()));
  for (const auto& p : parents) pk.pack(p);
  if (after_run) {
    pk.pack("after_failure");
    pk.pack("run");
  }
}
std::uint32_t after_fields(const std::vector<std::string>& parents, bool after_run) {
  return parents.empty() ? 0 : 1 + after_run;
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

// --- the generic reader and writer of a plain field ---------------------------
// protocol/ops/emit_codec.py writes each op's reader and writer (op_codec.inc)
// as calls of these: get() for a field the request carries, with the bounds
// its kind declares (ops.json "kinds"), put() for one a writer leaves out at
// its default, put_always() for a required one.
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::size_t kUnbounded = std::numeric_limits<std::size_t>::max();

struct Str {
  std::size_t bytes = kUnbounded;
  bool nonempty = false;
};
struct Int {
  std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  std::int64_t hi = std::numeric_limits<std::int64_t>::max();
};
struct Num {
  double lo = -kInf, hi = kInf;
  bool positive = false;  // and > 0
};
struct Bool {};

std::string get_str(const Fields& f, const char* name, Str s) {
  auto v = f.str(name, s.bytes);
  if (s.nonempty && v.empty()) {
    refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must not be empty");
  }
  return v;
}
std::int64_t get_int(const Fields& f, const char* name, Int b) {
  if (b.lo == std::numeric_limits<std::int64_t>::min() &&
      b.hi == std::numeric_limits<std::int64_t>::max()) {
    return f.integer(name);
  }
  return f.integer_in(name, b.lo, b.hi);
}
double get_num(const Fields& f, const char* name, Num b) {
  const double v = std::isinf(b.lo) && std::isinf(b.hi) ? f.number(name)
                                                         : f.number_in(name, b.lo, b.hi);
  if (b.positive && v <= 0) {
    refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must be > 0");
  }
  return v;
}

void get(const Fields& f, const char* name, std::string& out, Str s) { out = get_str(f, name, s); }
void get(const Fields& f, const char* name, std::optional<std::string>& out, Str s) {
  out = get_str(f, name, s);
}
void get(const Fields& f, const char* name, std::int64_t& out, Int b) { out = get_int(f, name, b); }
void get(const Fields& f, const char* name, std::optional<std::int64_t>& out, Int b) {
  out = get_int(f, name, b);
}
void get(const Fields& f, const char* name, double& out, Num b) { out = get_num(f, name, b); }
void get(const Fields& f, const char* name, std::optional<double>& out, Num b) {
  out = get_num(f, name, b);
}
void get(const Fields& f, const char* name, bool& out, Bool) { out = f.boolean(name); }
void get(const Fields& f, const char* name, std::optional<bool>& out, Bool) {
  out = f.boolean(name);
}

void put_always(Body& b, const char* name, const std::string& v) { b.str(name, v); }
void put_always(Body& b, const char* name, std::int64_t v) { b.i64(name, v); }
void put_always(Body& b, const char* name, double v) { b.f64(name, v); }
void put_always(Body& b, const char* name, bool v) { b.boolean(name, v); }
template <typename T>
void put(Body& b, const char* name, const std::optional<T>& v) {
  if (v) put_always(b, name, *v);
}
void put(Body& b, const char* name, const std::string& v, std::string_view def = {}) {
  if (v != def) b.str(name, v);
}
void put(Body& b, const char* name, std::int64_t v, std::int64_t def = 0) {
  if (v != def) b.i64(name, v);
}
void put(Body& b, const char* name, double v, double def = 0) {
  if (v != def) b.f64(name, v);
}
void put(Body& b, const char* name, bool v, bool def = false) {
  if (v != def) b.boolean(name, v);
}

// --- the kinds read and written by hand (ops.json: codec custom) --------------
// Each takes the field's name and its member of the op's struct.
namespace custom {

// complete's result: str or nil, bounded by the frame only (--max-message).
void result(const Fields& f, const char* name, std::optional<std::string>& out) {
  const auto& res = f.require(name);
  if (res.type != msgpack::type::NIL) {
    out = Fields::checked_str(name, res, std::numeric_limits<std::size_t>::max());
  }
}
// A filter's queue: every queue without it.
void queue_filter(const Fields& f, const char* name, std::optional<std::string>& out) {
  if (!f.has(name)) return;
  out = get_str(f, name, Str{kMaxQueueBytes, true});
}
// results' ids: 1..kMaxResultIds ids, none empty.
void ids(const Fields& f, const char* name, std::vector<std::string>& out) {
  out = f.strs(name, kMaxResultIds, kMaxKeyBytes);
  for (const auto& id : out) {
    if (id.empty()) refuse(ErrorCode::invalid_argument, "field 'ids' holds an empty id");
  }
}
void payload(const Fields& f, const char*, std::optional<Payload>& out) { out = read_payload(f); }
// A step's value (C3.22): a payload that must be there (nil saves nil).
void step_value(const Fields& f, const char* name, std::optional<Payload>& out) {
  (void)f.require(name);
  out = read_payload(f, name);
}
// signal's value (C3.23): a payload, nil when left out.
void signal_value(const Fields& f, const char* name, std::optional<Payload>& out) {
  out = read_payload(f, name);
}
// suspend's on_timeout (C3.23): "retry" (the default) or "fail" (true).
void on_timeout(const Fields& f, const char* name, bool& out) {
  if (!f.has(name)) return;
  const auto how = f.str(name, 16);
  if (how != "retry" && how != "fail") {
    refuse(ErrorCode::invalid_argument,
           "field 'on_timeout' must be \"retry\" or \"fail\", not \"" + how + "\"");
  }
  out = how == "fail";
}
// A field that is a value or nil (nil: none, or the override removed):
// out stays empty when it is absent; read() reads a value.
template <class T, class Read>
void value_or_nil(const Fields& f, const char* name, std::optional<std::optional<T>>& out,
                  Read read) {
  const auto* v = f.find(name);
  if (!v) return;
  if (v->type == msgpack::type::NIL) {
    out = std::optional<T>();
    return;
  }
  out = read();
}
// A retention (queue_config): seconds, or nil for none (kept until purged).
void keep(const Fields& f, const char* name, std::optional<std::optional<double>>& out) {
  value_or_nil(f, name, out, [&] { return f.number_in(name, 0, kMaxKeepSeconds); });
}
// group_config (C3.25): a setting, or nil to remove the group's own.
void override_leased(const Fields& f, const char* name,
                     std::optional<std::optional<std::int64_t>>& out) {
  value_or_nil(f, name, out, [&] { return f.integer_in(name, 0, kMaxLeasedLimit); });
}
void override_rate(const Fields& f, const char* name,
                   std::optional<std::optional<std::int64_t>>& out) {
  value_or_nil(f, name, out, [&] { return f.integer_in(name, 0, kMaxRate); });
}
void override_per(const Fields& f, const char* name, std::optional<std::optional<double>>& out) {
  value_or_nil(f, name, out, [&] {
    const double per = f.number_in(name, 0, kMaxRatePer);
    if (!(per > 0)) refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must be > 0");
    return per;
  });
}
void state(const Fields& f, const char* name, std::optional<JobStatus>& out) {
  if (f.has(name)) {
    out = f.named(name, status_from_name,
                  "ready, delayed, leased, done, dead, cancelled, blocked or suspended");
  }
}
void order(const Fields& f, const char* name, ListOrder& out) {
  if (f.has(name)) out = f.named(name, order_from_name, "id, created or -created");
}

}  // namespace custom

namespace custom_out {

void result(Body& b, const char* name, const std::optional<std::string>& v) {
  pack::opt_str(b.key(name), v);
}
void queue_filter(Body& b, const char* name, const std::optional<std::string>& v) {
  if (v) b.str(name, *v);
}
void ids(Body& b, const char* name, const std::vector<std::string>& v) {
  auto& pk = b.key(name);
  pk.pack_array(static_cast<std::uint32_t>(v.size()));
  for (const auto& id : v) pk.pack(id);
}
void payload(Body& b, const char*, const std::optional<Payload>& v) { b.payload(v); }
void step_value(Body& b, const char* name, const std::optional<Payload>& v) {
  pack::payload(b.key(name), v);  // nil too: the field is required
}
void signal_value(Body& b, const char* name, const std::optional<Payload>& v) {
  if (v) pack::payload(b.key(name), v);
}
void on_timeout(Body& b, const char* name, bool fail) {
  if (fail) b.str(name, "fail");
}
void keep(Body& b, const char* name, const std::optional<std::optional<double>>& v) {
  if (!v) return;
  if (*v) {
    b.f64(name, **v);
  } else {
    b.key(name).pack_nil();
  }
}
void override_leased(Body& b, const char* name, const std::optional<std::optional<std::int64_t>>& v) {
  if (!v) return;
  if (*v) {
    b.i64(name, **v);
  } else {
    b.key(name).pack_nil();
  }
}
void override_rate(Body& b, const char* name, const std::optional<std::optional<std::int64_t>>& v) {
  override_leased(b, name, v);
}
void override_per(Body& b, const char* name, const std::optional<std::optional<double>>& v) {
  keep(b, name, v);
}
void state(Body& b, const char* name, const std::optional<JobStatus>& v) {
  if (v) b.str(name, std::string(status_name(*v)));
}
void order(Body& b, const char* name, ListOrder v) {
  if (v != ListOrder::id) b.str(name, std::string(order_name(v)));
}

}  // namespace custom_out

// --- the checks of fields that depend on each other (ops.json: check) ----------
namespace checks {

// list: by enqueue time the cursor is the last row's (created, id): both or neither.
void list(const Fields& f, req::List& q) {
  if (q.order == ListOrder::id && q.after_created) {
    refuse(ErrorCode::invalid_argument, "field 'after_created' needs order created or -created");
  }
  if (q.order != ListOrder::id && f.has("after") != q.after_created.has_value()) {
    refuse(ErrorCode::invalid_argument,
           "in order " + std::string(order_name(q.order)) +
               " the cursor is 'after' (the last row's id) with 'after_created' (its created)");
  }
}

}  // namespace checks

// --- the ops read and written by hand (ops.json: codec custom) -----------------
namespace read {

// The queue a bulk action acts on (retry_many, cancel_many).
std::string queue(const Fields& f) {
  auto q = f.str("queue", kMaxQueueBytes);
  if (q.empty()) refuse(ErrorCode::invalid_argument, "field 'queue' must not be empty");
  return q;
}

void enqueue(const Fields& f, req::Enqueue& q) { static_cast<JobSpec&>(q) = read_job(f); }

// A bulk action's filter (C3.16): its states, `prefix`, `group` and
// `limit`. `states` names the ones the action `op` can change.
void bulk_filter(const Fields& f, req::BulkFilter& q, Op op, const std::vector<JobStatus>& states) {
  q.limit = kDefaultBulkLimit;
  if (f.has("state")) {
    q.status = f.named("state", status_from_name, "a job state");
    if (std::find(states.begin(), states.end(), *q.status) == states.end()) {
      std::string names;
      for (auto st : states) names += (names.empty() ? "" : ", ") + std::string(status_name(st));
      refuse(ErrorCode::invalid_argument, "field 'state' must be one of " + names + " for " +
                                              std::string(op_name(op)));
    }
  }
  if (f.has("prefix")) q.prefix = f.str("prefix", kMaxKeyBytes);
  if (f.has("group")) q.group = read_group(f);
  if (f.has("limit")) q.limit = f.integer_in("limit", 1, kMaxBulkLimit);
}

// purge: by age (an int answered), or with a filter, a page ({count, more}).
void purge(const Fields& f, req::Purge& q) {
  if (f.has("queue")) q.queue = read::queue(f);
  q.paged = f.has("state") || f.has("prefix") || f.has("group") || f.has("limit");
  if (q.paged) {
    bulk_filter(f, q, Op::purge, {JobStatus::done, JobStatus::dead, JobStatus::cancelled});
    if (f.has("older_than")) q.older_than = f.number_in("older_than", 0, 1e12);
    return;
  }
  q.older_than = f.number_in("older_than", 0, 1e12);
}

void retry_many(const Fields& f, req::RetryMany& q) {
  q.queue = read::queue(f);
  bulk_filter(f, q, Op::retry_many, {JobStatus::dead, JobStatus::cancelled});
}

void cancel_many(const Fields& f, req::CancelMany& q) {
  q.queue = read::queue(f);
  bulk_filter(f, q, Op::cancel_many, {JobStatus::ready, JobStatus::delayed, JobStatus::leased,
                                      JobStatus::blocked, JobStatus::suspended, JobStatus::dead});
}

void enqueue_many(const Fields& f, req::EnqueueMany& q) {
  each_entry(f, "jobs", [&](const Fields& e) { q.jobs.push_back(read_job(e)); });
}

void complete_many(const Fields& f, req::CompleteMany& q) {
  each_entry(f, "items", [&](const Fields& e) { q.items.push_back(read_lease(e, true)); });
  if (!f.has("next")) return;
  const auto& n = f.require("next");
  if (n.type != msgpack::type::MAP) Fields::wrong_type("next", "map", n);
  req::Next next;
  try {
    Fields nf(n);
    next.queue = nf.str("queue", kMaxQueueBytes);
    if (next.queue.empty()) refuse(ErrorCode::invalid_argument, "field 'queue' must not be empty");
    next.ttl = get_num(nf, "ttl", Num{-kInf, kInf, true});
    next.max = nf.integer_in("max", 1, kMaxBatchItems);
  } catch (Refusal& e) {
    e.message = "next: " + e.message;
    throw;
  }
  q.next = std::move(next);
}

void renew_many(const Fields& f, req::RenewMany& q) {
  each_entry(f, "items", [&](const Fields& e) { q.items.push_back(read_lease(e, false)); });
  q.ttl = get_num(f, "ttl", Num{-kInf, kInf, true});
}

double read_wait(const Fields& f) {
  return f.has("wait") ? f.number_in("wait", 0, kMaxWaitSeconds) : 0;
}

// enqueue's fields and await's `wait`.
void enqueue_and_wait(const Fields& f, req::EnqueueAndWait& q) {
  static_cast<JobSpec&>(q) = read_job(f);
  if (q.key) {
    refuse(ErrorCode::invalid_argument,
           "enqueue_and_wait takes no 'key': enqueue with the key, then await the id it answers");
  }
  q.wait = read_wait(f);
}

}  // namespace read

// Optional fields only when they differ from their default, so that a request
// reads like the call that made it.
namespace write {

// A job's fields (enqueue, enqueue_and_wait): its queue only when not the default.
void job(const JobSpec& j, Body& b) {
  b.str("id", j.id);
  if (j.queue != kDefaultQueue) b.str("queue", j.queue);
  b.payload(j.payload);
  if (j.priority != 0) b.i64("priority", j.priority);
  if (j.delay != 0) b.f64("delay", j.delay);
  if (j.max_attempts != kDefaultMaxAttempts) b.i64("max_attempts", j.max_attempts);
  if (j.key) {
    b.str("key", *j.key);
    if (j.unique_for > 0) b.f64("unique_for", j.unique_for);
    if (j.replace) b.str("on_conflict", "replace");
  }
  if (j.group) b.str("group", *j.group);
  if (!j.parents.empty()) {
    auto& pk = b.key("after");
    pk.pack_array(static_cast<std::uint32_t>(j.parents.size()));
    for (const auto& p : j.parents) pk.pack(p);
    if (j.after_run) b.str("after_failure", "run");
  }
  if (j.max_runtime > 0) b.f64("max_runtime", j.max_runtime);
  if (!j.headers.empty()) pack::headers(b.key("headers"), j.headers);
  if (j.deadline > 0) b.f64("deadline", j.deadline);
}

void enqueue(const req::Enqueue& q, Body& b) { job(q, b); }

// A bulk action's filter (purge's when paged, retry_many's, cancel_many's).
void bulk_filter(const req::BulkFilter& q, Body& b) {
  if (q.status) b.str("state", std::string(status_name(*q.status)));
  if (!q.prefix.empty()) b.str("prefix", q.prefix);
  if (q.group) b.str("group", *q.group);
  b.i64("limit", q.limit);
}

void purge(const req::Purge& q, Body& b) {
  if (q.queue) b.str("queue", *q.queue);
  if (!q.paged || q.older_than > 0) b.f64("older_than", q.older_than);
  if (q.paged) bulk_filter(q, b);
}

void retry_many(const req::RetryMany& q, Body& b) {
  b.str("queue", q.queue);
  bulk_filter(q, b);
}

void cancel_many(const req::CancelMany& q, Body& b) {
  b.str("queue", q.queue);
  bulk_filter(q, b);
}

void enqueue_many(const req::EnqueueMany& q, Body& b) {
  auto& pk = b.key("jobs");
  pk.pack_array(static_cast<std::uint32_t>(q.jobs.size()));
  for (const auto& j : q.jobs) {
    const bool has_queue = j.queue != kDefaultQueue;
    pk.pack_map(1 + has_queue + (j.payload ? 1 : 0) + (j.priority != 0) + (j.delay != 0) +
                (j.max_attempts != kDefaultMaxAttempts) +
                key_fields(j.key, j.unique_for, j.replace) + (j.group ? 1 : 0) +
                after_fields(j.parents, j.after_run) + (j.max_runtime > 0) +
                (j.headers.empty() ? 0 : 1) + (j.deadline > 0));
    pk.pack("id");
    pk.pack(j.id);
    if (has_queue) {
      pk.pack("queue");
      pk.pack(j.queue);
    }
    if (j.payload) {
      pk.pack("payload");
      pack::payload(pk, j.payload);
    }
    if (j.priority != 0) {
      pk.pack("priority");
      pk.pack(j.priority);
    }
    if (j.delay != 0) {
      pk.pack("delay");
      pack::float64(b.buf, j.delay);
    }
    if (j.max_attempts != kDefaultMaxAttempts) {
      pk.pack("max_attempts");
      pk.pack(j.max_attempts);
    }
    write_key(pk, j.key, j.unique_for, j.replace, b.buf);
    if (j.group) {
      pk.pack("group");
      pk.pack(*j.group);
    }
    write_after(pk, j.parents, j.after_run);
    if (j.max_runtime > 0) {
      pk.pack("max_runtime");
      pack::float64(b.buf, j.max_runtime);
    }
    if (!j.headers.empty()) {
      pk.pack("headers");
      pack::headers(pk, j.headers);
    }
    if (j.deadline > 0) {
      pk.pack("deadline");
      pack::float64(b.buf, j.deadline);
    }
  }
}

// complete_many's and renew_many's entries: complete's fields, or renew's.
void items(const std::vector<LeaseItem>& items, Body& b, bool with_result) {
  auto& pk = b.key("items");
  pk.pack_array(static_cast<std::uint32_t>(items.size()));
  for (const auto& l : items) {
    const bool with_progress = !with_result && l.progress;
    pk.pack_map(with_result || with_progress ? 4 : 3);
    pk.pack("id");
    pk.pack(l.id);
    pk.pack("owner");
    pk.pack(l.owner);
    pk.pack("fence");
    pk.pack(l.fence);
    if (with_result) {
      pk.pack("result");
      pack::opt_str(pk, l.result);
    }
    if (with_progress) {
      pk.pack("progress");
      pk.pack(*l.progress);
    }
  }
}

void complete_many(const req::CompleteMany& q, Body& b) {
  items(q.items, b, true);
  if (!q.next) return;
  auto& pk = b.key("next");
  pk.pack_map(3);
  pk.pack("queue");
  pk.pack(q.next->queue);
  pk.pack("ttl");
  pack::float64(b.buf, q.next->ttl);
  pk.pack("max");
  pk.pack(q.next->max);
}

void renew_many(const req::RenewMany& q, Body& b) {
  items(q.items, b, false);
  b.f64("ttl", q.ttl);
}

void enqueue_and_wait(const req::EnqueueAndWait& q, Body& b) {
  job(q, b);
  b.f64("wait", q.wait);
}

}  // namespace write

// One row per op: its reader, which makes the request's body that op's
// struct and reads its fields into it, and its writer.
struct OpFields {
  Op op;
  void (*read)(const Fields&, Request&);
  void (*write)(const Request&, Body&);
};

template <class T, void (*Read)(const Fields&, T&)>
void read_as(const Fields& f, Request& r) {
  Read(f, r.body.emplace<T>());
}
template <class T, void (*Write)(const T&, Body&)>
void write_as(const Request& r, Body& b) {
  Write(r.as<T>(), b);
}

#include "fenceq_protocol/op_codec.inc"
static_assert(one_row_per_op(kOpFields), "kOpFields needs one row per Op, in the enum's order");

}  // namespace

void read_fields(const Fields& f, Request& r) {
  kOpFields[static_cast<std::size_t>(r.op)].read(f, r);
}

void write_fields(const Request& r, Body& b) {
  kOpFields[static_cast<std::size_t>(r.op)].write(r, b);
}

}  // namespace fenceq::protocol::wire
