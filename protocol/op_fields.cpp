// Each op's fields: how decode_request reads them (present, typed, within
// bounds, UTF-8) and how encode_request writes them, side by side, with one
// row of kOpFields per op (its reader and its writer).
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

// A job's group (enqueue, an entry of enqueue_many, list's filter).
std::string read_group(const Fields& f) {
  auto g = f.str("group", kMaxGroupBytes);
  if (g.empty()) refuse(ErrorCode::invalid_argument, "field 'group' must not be empty");
  return g;
}

// A job's headers (issue 33): a map of str to str, keys and values at most
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

// The jobs a job waits for (issue 32): `after`, 1..kMaxAfter distinct ids
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

// --- reading: each op's fields, in the order they are checked ---------------
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

void ping(const Fields& f, Request& r) {
  if (f.has("describe")) r.describe = f.boolean("describe");
}

void enqueue(const Fields& f, Request& r) {
  auto j = read_job(f);
  r.id = std::move(j.id);
  r.all_queues = !f.has("queue");
  r.queue = std::move(j.queue);
  r.payload = std::move(j.payload);
  r.priority = j.priority;
  r.delay = j.delay;
  r.max_attempts = j.max_attempts;
  r.key = std::move(j.key);
  r.unique_for = j.unique_for;
  r.replace = j.replace;
  r.group = std::move(j.group);
  r.parents = std::move(j.parents);
  r.after_run = j.after_run;
  r.max_runtime = j.max_runtime;
  r.headers = std::move(j.headers);
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

// snooze (issue 33): the lease, and the delay before the job can be claimed
// again (as enqueue's).
void snooze(const Fields& f, Request& r) {
  lease(f, r);
  r.delay = f.number_in("delay", 0, 1e9);
}

void fail(const Fields& f, Request& r) {
  lease(f, r);
  r.error = f.str("error", kMaxErrorBytes);
  if (f.has("retry_in")) r.retry_in = f.number_in("retry_in", 0, 1e9);
}

void list(const Fields& f, Request& r) {
  queue(f, r, false);
  if (f.has("state")) {
    r.status = f.named("state", status_from_name, "ready, delayed, leased, done, dead, cancelled or blocked");
  }
  if (f.has("limit")) r.limit = f.integer_in("limit", 1, kMaxListLimit);
  if (f.has("after")) r.after = f.str("after", kMaxKeyBytes);
  if (f.has("prefix")) r.prefix = f.str("prefix", kMaxKeyBytes);
  if (f.has("key")) {
    r.key = f.str("key", kMaxUniqueKeyBytes);
    if (r.key->empty()) refuse(ErrorCode::invalid_argument, "field 'key' must not be empty");
  }
  if (f.has("group")) r.group = read_group(f);
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

// A bulk action's filter (issue 33): its states, `prefix`, `group` and
// `limit`. `states` names the ones the action can change.
void bulk_filter(const Fields& f, Request& r, const std::vector<JobStatus>& states) {
  r.paged = true;
  r.limit = kDefaultBulkLimit;
  if (f.has("state")) {
    r.status = f.named("state", status_from_name, "a job state");
    if (std::find(states.begin(), states.end(), *r.status) == states.end()) {
      std::string names;
      for (auto st : states) names += (names.empty() ? "" : ", ") + std::string(status_name(st));
      refuse(ErrorCode::invalid_argument, "field 'state' must be one of " + names + " for " +
                                              std::string(op_name(r.op)));
    }
  }
  if (f.has("prefix")) r.prefix = f.str("prefix", kMaxKeyBytes);
  if (f.has("group")) r.group = read_group(f);
  if (f.has("limit")) r.limit = f.integer_in("limit", 1, kMaxBulkLimit);
}

// purge: by age (an int answered), or with a filter, a page ({count, more}).
void purge(const Fields& f, Request& r) {
  queue(f, r, false);
  const bool paged = f.has("state") || f.has("prefix") || f.has("group") || f.has("limit");
  if (paged) {
    bulk_filter(f, r, {JobStatus::done, JobStatus::dead, JobStatus::cancelled});
    if (f.has("older_than")) r.older_than = f.number_in("older_than", 0, 1e12);
    return;
  }
  r.older_than = f.number_in("older_than", 0, 1e12);
}

void retry_many(const Fields& f, Request& r) {
  queue(f, r, true);
  bulk_filter(f, r, {JobStatus::dead, JobStatus::cancelled});
}

void cancel_many(const Fields& f, Request& r) {
  queue(f, r, true);
  bulk_filter(f, r, {JobStatus::ready, JobStatus::delayed, JobStatus::leased,
                     JobStatus::blocked, JobStatus::dead});
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

void results(const Fields& f, Request& r) {
  r.ids = f.strs("ids", kMaxResultIds, kMaxKeyBytes);
  for (const auto& id : r.ids) {
    if (id.empty()) refuse(ErrorCode::invalid_argument, "field 'ids' holds an empty id");
  }
  if (f.has("states_only")) r.states_only = f.boolean("states_only");
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
  if (f.has("group_max_leased")) {
    r.group_max_leased = f.integer_in("group_max_leased", 0, kMaxLeasedLimit);
  }
  if (f.has("group_rate")) r.group_rate = f.integer_in("group_rate", 0, kMaxRate);
  if (f.has("group_per")) {
    r.group_per = f.number_in("group_per", 0, kMaxRatePer);
    if (*r.group_per <= 0) refuse(ErrorCode::invalid_argument, "field 'group_per' must be > 0");
  }
  // Retention (issue 33): seconds, or nil for none (kept until purged).
  auto keep = [&](const char* name, std::optional<std::optional<double>>& out) {
    const auto* v = f.find(name);
    if (!v) return;
    if (v->type == msgpack::type::NIL) {
      out = std::optional<double>();
      return;
    }
    out = f.number_in(name, 0, kMaxKeepSeconds);
  };
  keep("keep_done", r.keep_done);
  keep("keep_dead", r.keep_dead);
  keep("keep_cancelled", r.keep_cancelled);
}

double read_wait(const Fields& f) {
  return f.has("wait") ? f.number_in("wait", 0, kMaxWaitSeconds) : 0;
}

void await_job(const Fields& f, Request& r) {
  id(f, r);
  r.wait = read_wait(f);
}

// enqueue's fields and await's `wait`.
void enqueue_and_wait(const Fields& f, Request& r) {
  enqueue(f, r);
  if (r.key) {
    refuse(ErrorCode::invalid_argument,
           "enqueue_and_wait takes no 'key': enqueue with the key, then await the id it answers");
  }
  r.wait = read_wait(f);
}

void schedule_name(const Fields& f, Request& r) { r.name = f.str("name", kMaxScheduleName); }

void schedule_set(const Fields& f, Request& r) {
  schedule_name(f, r);
  if (r.name.empty()) refuse(ErrorCode::invalid_argument, "field 'name' must not be empty");
  r.cron = f.str("cron", kMaxCronBytes);
  if (f.has("tz")) {
    r.tz = f.str("tz", kMaxTzBytes);
    if (r.tz.empty()) {
      refuse(ErrorCode::invalid_argument, "field 'tz' must not be empty (leave it out for UTC)");
    }
  }
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

// --- writing: each op's fields in a fixed order -------------------------------
// Optional ones only when they differ from their default, so that a request
// reads like the call that made it.
namespace write {

void id(const Request& r, Body& b) { b.str("id", r.id); }
// A lease's fields: the job, its owner and the fence of its claim.
void lease(const Request& r, Body& b) {
  b.str("id", r.id);
  b.str("owner", r.owner);
  b.i64("fence", r.fence);
}
// A filter's queue: none for every queue.
void queue_filter(const Request& r, Body& b) {
  if (!r.all_queues) b.str("queue", r.queue);
}

void nothing(const Request&, Body&) {}

void ping(const Request& r, Body& b) {
  if (r.describe) b.boolean("describe", true);
}

void results(const Request& r, Body& b) {
  auto& pk = b.key("ids");
  pk.pack_array(static_cast<std::uint32_t>(r.ids.size()));
  for (const auto& id : r.ids) pk.pack(id);
  if (r.states_only) b.boolean("states_only", true);
}

void enqueue(const Request& r, Body& b) {
  b.str("id", r.id);
  queue_filter(r, b);
  b.payload(r.payload);
  if (r.priority != 0) b.i64("priority", r.priority);
  if (r.delay != 0) b.f64("delay", r.delay);
  if (r.max_attempts != kDefaultMaxAttempts) b.i64("max_attempts", r.max_attempts);
  if (r.key) {
    b.str("key", *r.key);
    if (r.unique_for > 0) b.f64("unique_for", r.unique_for);
    if (r.replace) b.str("on_conflict", "replace");
  }
  if (r.group) b.str("group", *r.group);
  if (!r.parents.empty()) {
    auto& pk = b.key("after");
    pk.pack_array(static_cast<std::uint32_t>(r.parents.size()));
    for (const auto& p : r.parents) pk.pack(p);
    if (r.after_run) b.str("after_failure", "run");
  }
  if (r.max_runtime > 0) b.f64("max_runtime", r.max_runtime);
  if (!r.headers.empty()) pack::headers(b.key("headers"), r.headers);
}

void claim(const Request& r, Body& b) {
  b.str("id", r.id);
  b.str("owner", r.owner);
  b.f64("ttl", r.ttl);
}

void renew(const Request& r, Body& b) {
  lease(r, b);
  b.f64("ttl", r.ttl);
  if (r.progress) b.str("progress", *r.progress);
}

void snooze(const Request& r, Body& b) {
  lease(r, b);
  b.f64("delay", r.delay);
}

void complete(const Request& r, Body& b) {
  lease(r, b);
  pack::opt_str(b.key("result"), r.result);
}

void claim_next(const Request& r, Body& b) {
  b.str("queue", r.queue);
  b.str("owner", r.owner);
  b.f64("ttl", r.ttl);
  if (r.wait > 0) b.f64("wait", r.wait);
  if (r.max > 0) b.i64("max", r.max);
}

void fail(const Request& r, Body& b) {
  lease(r, b);
  b.str("error", r.error);
  if (r.retry_in) b.f64("retry_in", *r.retry_in);
}

void list(const Request& r, Body& b) {
  queue_filter(r, b);
  if (r.status) b.str("state", std::string(status_name(*r.status)));
  b.i64("limit", r.limit);
  if (!r.after.empty()) b.str("after", r.after);
  if (r.order != ListOrder::id) b.str("order", std::string(order_name(r.order)));
  if (r.after_created) b.f64("after_created", *r.after_created);
  if (!r.prefix.empty()) b.str("prefix", r.prefix);
  if (r.key) b.str("key", *r.key);
  if (r.group) b.str("group", *r.group);
}

// A bulk action's filter (purge's when paged, retry_many's, cancel_many's).
void bulk_filter(const Request& r, Body& b) {
  if (r.status) b.str("state", std::string(status_name(*r.status)));
  if (!r.prefix.empty()) b.str("prefix", r.prefix);
  if (r.group) b.str("group", *r.group);
  b.i64("limit", r.limit);
}

void purge(const Request& r, Body& b) {
  queue_filter(r, b);
  if (!r.paged || r.older_than > 0) b.f64("older_than", r.older_than);
  if (r.paged) bulk_filter(r, b);
}

void retry_many(const Request& r, Body& b) {
  b.str("queue", r.queue);
  bulk_filter(r, b);
}

void complete_next(const Request& r, Body& b) {
  b.str("id", r.id);
  b.str("queue", r.queue);
  b.str("owner", r.owner);
  b.i64("fence", r.fence);
  b.f64("ttl", r.ttl);
  pack::opt_str(b.key("result"), r.result);
}

void enqueue_many(const Request& r, Body& b) {
  auto& pk = b.key("jobs");
  pk.pack_array(static_cast<std::uint32_t>(r.jobs.size()));
  for (const auto& j : r.jobs) {
    const bool q = j.queue != kDefaultQueue;
    pk.pack_map(1 + q + (j.payload ? 1 : 0) + (j.priority != 0) + (j.delay != 0) +
                (j.max_attempts != kDefaultMaxAttempts) +
                key_fields(j.key, j.unique_for, j.replace) + (j.group ? 1 : 0) +
                after_fields(j.parents, j.after_run) + (j.max_runtime > 0) +
                (j.headers.empty() ? 0 : 1));
    pk.pack("id");
    pk.pack(j.id);
    if (q) {
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
  }
}

// complete_many's and renew_many's entries: complete's fields, or renew's.
void items(const Request& r, Body& b, bool with_result) {
  auto& pk = b.key("items");
  pk.pack_array(static_cast<std::uint32_t>(r.items.size()));
  for (const auto& l : r.items) {
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

void complete_many(const Request& r, Body& b) {
  items(r, b, true);
  if (!r.has_next) return;
  auto& pk = b.key("next");
  pk.pack_map(3);
  pk.pack("queue");
  pk.pack(r.queue);
  pk.pack("ttl");
  pack::float64(b.buf, r.ttl);
  pk.pack("max");
  pk.pack(r.max);
}

void renew_many(const Request& r, Body& b) {
  items(r, b, false);
  b.f64("ttl", r.ttl);
}

void queue_config(const Request& r, Body& b) {
  b.str("queue", r.queue);
  if (r.paused) b.boolean("paused", *r.paused);
  if (r.max_leased) b.i64("max_leased", *r.max_leased);
  if (r.rate) b.i64("rate", *r.rate);
  if (r.per) b.f64("per", *r.per);
  if (r.group_max_leased) b.i64("group_max_leased", *r.group_max_leased);
  if (r.group_rate) b.i64("group_rate", *r.group_rate);
  if (r.group_per) b.f64("group_per", *r.group_per);
  for (const auto& [name, keep] : {std::pair{"keep_done", &r.keep_done},
                                   std::pair{"keep_dead", &r.keep_dead},
                                   std::pair{"keep_cancelled", &r.keep_cancelled}}) {
    if (!*keep) continue;
    if (**keep) {
      b.f64(name, ***keep);
    } else {
      b.key(name).pack_nil();
    }
  }
}

void await_job(const Request& r, Body& b) {
  b.str("id", r.id);
  b.f64("wait", r.wait);
}

void enqueue_and_wait(const Request& r, Body& b) {
  enqueue(r, b);
  b.f64("wait", r.wait);
}

void schedule_name(const Request& r, Body& b) { b.str("name", r.name); }

void schedule_set(const Request& r, Body& b) {
  b.str("name", r.name);
  b.str("cron", r.cron);
  if (r.tz != "UTC") b.str("tz", r.tz);
  if (r.queue != kDefaultQueue) b.str("queue", r.queue);
  b.payload(r.payload);
  if (r.priority != 0) b.i64("priority", r.priority);
  if (r.max_attempts != kDefaultMaxAttempts) b.i64("max_attempts", r.max_attempts);
}

}  // namespace write

struct OpFields {
  Op op;
  void (*read)(const Fields&, Request&);
  void (*write)(const Request&, Body&);
};

constexpr std::array<OpFields, kOpCount> kOpFields{{
    {Op::ping, read::ping, write::ping},
    {Op::enqueue, read::enqueue, write::enqueue},
    {Op::state, read::id, write::id},
    {Op::claim, read::claim, write::claim},
    {Op::renew, read::renew, write::renew},
    {Op::complete, read::complete, write::complete},
    {Op::release, read::lease, write::lease},
    {Op::claim_next, read::claim_next, write::claim_next},
    {Op::fail, read::fail, write::fail},
    {Op::check, read::lease, write::lease},
    {Op::retry, read::id, write::id},
    {Op::stats, read::nothing, write::nothing},
    {Op::list, read::list, write::list},
    {Op::purge, read::purge, write::purge},
    {Op::metrics, read::nothing, write::nothing},
    {Op::complete_next, read::complete_next, write::complete_next},
    {Op::enqueue_many, read::enqueue_many, write::enqueue_many},
    {Op::complete_many, read::complete_many, write::complete_many},
    {Op::renew_many, read::renew_many, write::renew_many},
    {Op::cancel, read::id, write::id},
    {Op::job, read::id, write::id},
    {Op::queue_config, read::queue_config, write::queue_config},
    {Op::await_job, read::await_job, write::await_job},
    {Op::schedule_set, read::schedule_set, write::schedule_set},
    {Op::schedule_delete, read::schedule_name, write::schedule_name},
    {Op::schedule_list, read::nothing, write::nothing},
    {Op::enqueue_and_wait, read::enqueue_and_wait, write::enqueue_and_wait},
    {Op::results, read::results, write::results},
    {Op::snooze, read::snooze, write::snooze},
    {Op::retry_many, read::retry_many, write::retry_many},
    {Op::cancel_many, read::cancel_many, write::retry_many},
}};
static_assert(one_row_per_op(kOpFields), "kOpFields needs one row per Op, in the enum's order");

}  // namespace

void read_fields(const Fields& f, Request& r) {
  kOpFields[static_cast<std::size_t>(r.op)].read(f, r);
}

void write_fields(const Request& r, Body& b) {
  kOpFields[static_cast<std::size_t>(r.op)].write(r, b);
}

}  // namespace fenceq::protocol::wire
