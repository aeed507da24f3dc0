// The client's side of the codec: encode_request, which writes a Request (its
// op's struct, by the op's writer in op_fields.cpp) as a client sends it, and reply_rid / decode_reply, which read what fenceqd
// answers, typed by the op that was asked. Used by every C++ program that
// talks to fenceqd: the client library, fenceq-bench, and the daemon's HTTP
// endpoint, which asks the daemon's own loop for its metrics.
//
// The codec's files, one concept each: this one; daemon_side.cpp
// (decode_request); op_fields.cpp (each op's fields, read and written);
// replies.cpp (encode_ok, encode_error); vocabulary.cpp (op names, error
// codes, job states, UTF-8) that all use. They share one header,
// fenceq_protocol/codec.hpp, in sections of the same names.
#include "fenceq_protocol/codec.hpp"

#include <msgpack.hpp>

#include <limits>
#include <utility>

#include "fields.hpp"
#include "pack.hpp"

namespace fenceq::protocol {
namespace {

// Reply limits. Replies carry lists (up to kMaxListLimit jobs) and a map per
// queue; a lying array or map header still makes the unpacker allocate no
// more than these caps.
constexpr std::size_t kMaxReplyItems = 1 << 20;
constexpr std::size_t kMaxReplyDepth = 8;

// Throws what msgpack throws when `payload` is not one msgpack value within
// the limits; bytes after it are ignored.
msgpack::object_handle unpack_reply(std::string_view payload) {
  std::size_t offset = 0;
  msgpack::unpack_limit limit(kMaxReplyItems, kMaxReplyItems, payload.size(), payload.size(),
                              payload.size(), kMaxReplyDepth);
  return msgpack::unpack(payload.data(), payload.size(), offset, nullptr, nullptr, limit);
}

[[noreturn]] void bad_reply(const std::string& what) {
  throw ReplyFormatError("bad reply: " + what);
}

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

// A reply's rid; nullopt when it is not nil, an int or a str.
std::optional<Rid> rid_of(const msgpack::object& v) {
  if (v.type == msgpack::type::NIL) return Rid{std::monostate{}};
  if (v.type == msgpack::type::POSITIVE_INTEGER) return Rid{v.via.u64};
  if (v.type == msgpack::type::NEGATIVE_INTEGER) return Rid{v.via.i64};
  if (v.type == msgpack::type::STR) return Rid{std::string(v.as<std::string_view>())};
  return std::nullopt;
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

BoolList read_bools(const msgpack::object& r, const char* what) {
  if (r.type != msgpack::type::ARRAY) bad_reply(std::string(what) + " is not an array");
  BoolList out;
  out.reserve(r.via.array.size);
  for (std::uint32_t i = 0; i < r.via.array.size; ++i) out.push_back(as_bool(r.via.array.ptr[i], what));
  return out;
}

// A payload as sent: bin (binary), str (text) or nil (none).
std::optional<Payload> read_payload(const msgpack::object& p) {
  if (p.type == msgpack::type::BIN) return Payload{std::string(p.via.bin.ptr, p.via.bin.size), true};
  if (p.type == msgpack::type::NIL) return std::nullopt;
  return Payload{opt_str(p, "payload").value_or(""), false};
}

// One `list` row (also the first fields of `job`'s answer).
JobInfo read_job_row(const msgpack::object& m) {
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
  if (const auto* p = map_get(m, "progress")) j.progress = opt_str(*p, "progress");
  // Absent from older daemons.
  if (const auto* c = map_get(m, "created")) j.created = as_number(*c, "created");
  if (const auto* k = map_get(m, "key")) j.key = opt_str(*k, "key");
  if (const auto* g = map_get(m, "group")) j.group = opt_str(*g, "group");
  return j;
}

// --- each answer's shape -----------------------------------------------------
// One reader per Answer (ops.hpp): what the result of an op that answers it is.

// An array of job ids (`after`, `blocked_children`).
std::vector<std::string> read_ids(const msgpack::object& r, const char* what) {
  if (r.type != msgpack::type::ARRAY) bad_reply(std::string(what) + " is not an array");
  std::vector<std::string> out;
  out.reserve(r.via.array.size);
  for (std::uint32_t i = 0; i < r.via.array.size; ++i) {
    auto id = opt_str(r.via.array.ptr[i], what);
    if (!id) bad_reply(std::string(what) + " holds a nil");
    out.push_back(std::move(*id));
  }
  return out;
}

// A claimed job's map.
// A job's headers (C3.18): a map of str to str.
Headers read_headers(const msgpack::object& h) {
  if (h.type != msgpack::type::MAP) bad_reply("headers is not a map");
  Headers out;
  for (std::uint32_t i = 0; i < h.via.map.size; ++i) {
    auto k = opt_str(h.via.map.ptr[i].key, "headers key");
    auto v = opt_str(h.via.map.ptr[i].val, "headers value");
    if (!k || !v) bad_reply("headers holds a nil");
    out.emplace(std::move(*k), std::move(*v));
  }
  return out;
}

// A job's steps (C3.22): a map of str to payload.
Steps read_steps(const msgpack::object& s) {
  if (s.type != msgpack::type::MAP) bad_reply("steps is not a map");
  Steps out;
  for (std::uint32_t i = 0; i < s.via.map.size; ++i) {
    auto k = opt_str(s.via.map.ptr[i].key, "steps key");
    if (!k) bad_reply("steps has a nil key");
    out.emplace(std::move(*k), read_payload(s.via.map.ptr[i].val));
  }
  return out;
}

ClaimedJob read_claimed_job(const msgpack::object& r) {
  ClaimedJob j;
  j.id = opt_str(map_need(r, "id"), "id").value_or("");
  j.fence = as_int(map_need(r, "fence"), "fence");
  j.payload = read_payload(map_need(r, "payload"));
  j.attempts = as_int(map_need(r, "attempts"), "attempts");
  // Only for a job that waited for others (C3.13).
  if (const auto* a = map_get(r, "after")) j.after = read_ids(*a, "after");
  if (const auto* h = map_get(r, "headers")) j.headers = read_headers(*h);  // C3.18
  if (const auto* s = map_get(r, "steps")) j.steps = read_steps(*s);        // C3.22
  if (const auto* s = map_get(r, "signal")) {                               // C3.23
    j.signalled = true;
    j.signal = read_payload(*s);
  }
  return j;
}

ClaimedJobs read_jobs(const msgpack::object& r, const char* what) {
  if (r.type != msgpack::type::ARRAY) bad_reply(std::string(what) + " is not an array");
  ClaimedJobs out;
  out.reserve(r.via.array.size);
  for (std::uint32_t i = 0; i < r.via.array.size; ++i) {
    const auto& m = r.via.array.ptr[i];
    if (m.type != msgpack::type::MAP) bad_reply(std::string(what) + " holds a non-map");
    out.push_back(read_claimed_job(m));
  }
  return out;
}

// claim_next's: a job, nil, or an array of jobs (`max`).
Result read_claimed(const msgpack::object& r) {
  if (r.type == msgpack::type::NIL) return std::monostate{};
  if (r.type == msgpack::type::ARRAY) return read_jobs(r, "claim_next result");  // `max`
  if (r.type != msgpack::type::MAP) bad_reply("claim_next result is not a map, array or nil");
  return read_claimed_job(r);
}

Result read_flags_next(const msgpack::object& r) {
  if (r.type == msgpack::type::ARRAY) return read_bools(r, "result");
  if (r.type != msgpack::type::MAP) bad_reply("complete_many result is not an array or map");
  CompletedManyAndNext c;
  c.completed = read_bools(map_need(r, "completed"), "completed");
  c.next = read_jobs(map_need(r, "next"), "next");
  return c;
}

Result read_info(const msgpack::object& r) {
  if (r.type != msgpack::type::MAP) bad_reply("ping result is not a map");
  ServerInfo p;
  p.protocol = static_cast<int>(as_int(map_need(r, "protocol"), "protocol"));
  p.version = opt_str(map_need(r, "version"), "version").value_or("");
  p.clock = opt_str(map_need(r, "clock"), "clock").value_or("");
  if (const auto* ops = map_get(r, "ops")) {
    if (ops->type != msgpack::type::MAP) bad_reply("ping's ops is not a map");
    for (std::uint32_t i = 0; i < ops->via.map.size; ++i) {
      const auto& kv = ops->via.map.ptr[i];
      auto name = opt_str(kv.key, "ops").value_or("");
      if (kv.val.type != msgpack::type::ARRAY) bad_reply("ping's ops." + name + " is not an array");
      auto& fields = p.ops[name];
      for (std::uint32_t k = 0; k < kv.val.via.array.size; ++k) {
        fields.push_back(opt_str(kv.val.via.array.ptr[k], "ops").value_or(""));
      }
    }
  }
  return p;
}

Result read_lease_state(const msgpack::object& r) {
  if (r.type == msgpack::type::NIL) return std::monostate{};
  if (r.type != msgpack::type::MAP) bad_reply("state result is not a map or nil");
  JobState j;
  j.id = opt_str(map_need(r, "id"), "id").value_or("");
  j.owner = opt_str(map_need(r, "owner"), "owner");
  j.until = as_number(map_need(r, "until"), "until");
  j.fence = as_int(map_need(r, "fence"), "fence");
  j.result = opt_str(map_need(r, "result"), "result");
  j.done = as_bool(map_need(r, "done"), "done");
  // Only when a renew stored one (docs/contract.md, "Progress").
  if (const auto* p = map_get(r, "progress")) j.progress = opt_str(*p, "progress");
  return j;
}

Result read_completed_next(const msgpack::object& r) {
  if (r.type != msgpack::type::MAP) bad_reply("complete_next result is not a map");
  CompletedAndNext c;
  c.completed = as_bool(map_need(r, "completed"), "completed");
  auto next = read_claimed(map_need(r, "next"));
  if (auto* j = std::get_if<ClaimedJob>(&next)) c.next = std::move(*j);
  return c;
}

// One queue's entry of `stats` (`queue`: its key).
QueueStats read_queue_stats(const msgpack::object& queue, const msgpack::object& m) {
  if (m.type != msgpack::type::MAP) bad_reply("queue stats is not a map");
  QueueStats q;
  q.queue = opt_str(queue, "queue").value_or("");
  q.ready = as_int(map_need(m, "ready"), "ready");
  q.delayed = as_int(map_need(m, "delayed"), "delayed");
  q.leased = as_int(map_need(m, "leased"), "leased");
  q.done = as_int(map_need(m, "done"), "done");
  q.dead = as_int(map_need(m, "dead"), "dead");
  // Absent from older daemons: 0.
  if (const auto* c = map_get(m, "cancelled")) q.cancelled = as_int(*c, "cancelled");
  if (const auto* b = map_get(m, "blocked")) q.blocked = as_int(*b, "blocked");
  if (const auto* s = map_get(m, "suspended")) q.suspended = as_int(*s, "suspended");
  q.oldest_ready_age = as_number(map_need(m, "oldest_ready_age"), "oldest_ready_age");
  // Only for a queue with settings (queue_config).
  if (const auto* paused = map_get(m, "paused")) {
    QueueConfig c;
    c.paused = as_bool(*paused, "paused");
    c.max_leased = as_int(map_need(m, "max_leased"), "max_leased");
    c.rate = as_int(map_need(m, "rate"), "rate");
    c.per = as_number(map_need(m, "per"), "per");
    // Only for a queue with group settings (C3.11).
    if (const auto* g = map_get(m, "group_max_leased")) {
      c.group_max_leased = as_int(*g, "group_max_leased");
      c.group_rate = as_int(map_need(m, "group_rate"), "group_rate");
      c.group_per = as_number(map_need(m, "group_per"), "group_per");
    }
    // Only for a queue with groups' own settings (C3.25).
    if (const auto* n = map_get(m, "group_overrides")) {
      c.group_overrides = as_int(*n, "group_overrides");
    }
    q.config = c;
  }
  if (const auto* g = map_get(m, "group_config")) {
    if (g->type != msgpack::type::MAP) bad_reply("group_config is not a map");
    for (const auto& kv : g->via.map) {
      GroupOverride o;
      const auto& om = kv.val;
      if (om.type != msgpack::type::MAP) bad_reply("group_config's value is not a map");
      if (const auto* v = map_get(om, "max_leased")) o.max_leased = as_int(*v, "max_leased");
      if (const auto* v = map_get(om, "rate")) o.rate = as_int(*v, "rate");
      if (const auto* v = map_get(om, "per")) o.per = as_number(*v, "per");
      auto group = opt_str(kv.key, "group_config's key");
      if (!group) bad_reply("group_config's key is nil");
      q.group_config.emplace_back(std::move(*group), o);
    }
  }
  if (const auto* g = map_get(m, "groups_waiting")) q.groups_waiting = as_int(*g, "groups_waiting");
  // Only when set (C3.17).
  for (auto [name, keep] : {std::pair{"keep_done", &q.retention.keep_done},
                            {"keep_dead", &q.retention.keep_dead},
                            {"keep_cancelled", &q.retention.keep_cancelled}}) {
    if (const auto* k = map_get(m, name)) *keep = as_number(*k, name);
  }
  // Absent from older daemons: zeros. A counter this client does not
  // know is ignored, as every unknown key.
  if (const auto* t = map_get(m, "totals")) {
    if (t->type != msgpack::type::MAP) bad_reply("totals is not a map");
    auto count = [&](const msgpack::object& o, const char* name, std::uint64_t& to) {
      if (const auto* v = map_get(o, name)) to = static_cast<std::uint64_t>(as_int(*v, name));
    };
    count(*t, "claimed", q.totals.claimed);
    count(*t, "completed", q.totals.completed);
    count(*t, "failed", q.totals.failed);
    count(*t, "retried", q.totals.retried);
    count(*t, "dead", q.totals.dead);
    count(*t, "expired", q.totals.expired);
    count(*t, "removed", q.totals.removed);
    count(*t, "deadline_passed", q.totals.deadline_passed);
    if (const auto* r = map_get(*t, "refused")) {
      if (r->type != msgpack::type::MAP) bad_reply("totals.refused is not a map");
      count(*r, "renew", q.totals.refused.renew);
      count(*r, "complete", q.totals.refused.complete);
      count(*r, "release", q.totals.refused.release);
      count(*r, "fail", q.totals.refused.fail);
    }
  }
  return q;
}

Result read_stats(const msgpack::object& r) {
  if (r.type != msgpack::type::MAP) bad_reply("stats result is not a map");
  Stats st;
  const auto& qs = map_need(r, "queues");
  if (qs.type != msgpack::type::MAP) bad_reply("queues is not a map");
  for (std::uint32_t i = 0; i < qs.via.map.size; ++i) {
    const auto& kv = qs.via.map.ptr[i];
    st.queues.push_back(read_queue_stats(kv.key, kv.val));
  }
  auto count = [&](const char* name) {
    return static_cast<std::uint64_t>(as_int(map_need(r, name), name));
  };
  st.requests = count("requests");
  st.commits = count("commits");
  st.batches = count("batches");
  st.failed_commits = count("failed_commits");
  st.mean_batch = as_number(map_need(r, "mean_batch"), "mean_batch");
  st.waiting_claims = count("waiting_claims");
  st.uptime = as_number(map_need(r, "uptime"), "uptime");
  if (const auto* e = map_get(r, "events")) {  // with --events only
    if (e->type != msgpack::type::MAP) bad_reply("events is not a map");
    st.events_published = static_cast<std::uint64_t>(as_int(map_need(*e, "published"), "published"));
    st.events_dropped = static_cast<std::uint64_t>(as_int(map_need(*e, "dropped"), "dropped"));
  }
  if (const auto* o = map_get(r, "outbox")) {  // with --outbox only
    if (o->type != msgpack::type::MAP) bad_reply("outbox is not a map");
    OutboxStats ob;
    ob.pending = as_int(map_need(*o, "pending"), "pending");
    ob.lag = as_number(map_need(*o, "lag"), "lag");
    ob.drained = static_cast<std::uint64_t>(as_int(map_need(*o, "drained"), "drained"));
    ob.rejected = static_cast<std::uint64_t>(as_int(map_need(*o, "rejected"), "rejected"));
    ob.high_water = as_int(map_need(*o, "high_water"), "high_water");
    st.outbox = ob;
  }
  // Absent from older daemons: zeros.
  if (const auto* w = map_get(r, "writes")) {
    if (w->type != msgpack::type::MAP) bad_reply("writes is not a map");
    for (auto [name, to] : {std::pair<const char*, WriteCounts*>{"renew", &st.renew},
                            {"complete", &st.complete},
                            {"release", &st.release},
                            {"fail", &st.fail}}) {
      const auto* op = map_get(*w, name);
      if (!op) continue;
      if (op->type != msgpack::type::MAP) bad_reply("writes entry is not a map");
      to->applied = static_cast<std::uint64_t>(as_int(map_need(*op, "applied"), "applied"));
      to->refused = static_cast<std::uint64_t>(as_int(map_need(*op, "refused"), "refused"));
    }
  }
  return st;
}

Result read_text(const msgpack::object& r) {
  auto text = opt_str(r, "result");
  if (!text) bad_reply("metrics result is nil");
  return *text;
}

Result read_job_rows(const msgpack::object& r) {
  if (r.type != msgpack::type::ARRAY) bad_reply("list result is not an array");
  JobList out;
  for (std::uint32_t i = 0; i < r.via.array.size; ++i) {
    const auto& m = r.via.array.ptr[i];
    if (m.type != msgpack::type::MAP) bad_reply("list item is not a map");
    out.push_back(read_job_row(m));
  }
  return out;
}

Result read_detail(const msgpack::object& r) {
  if (r.type == msgpack::type::NIL) return std::monostate{};
  if (r.type != msgpack::type::MAP) bad_reply("job result is not a map or nil");
  JobDetail d;
  d.info = read_job_row(r);
  d.result = opt_str(map_need(r, "result"), "result");
  d.payload = read_payload(map_need(r, "payload"));
  // Only when it has parents, or blocked children (C3.13).
  if (const auto* a = map_get(r, "after")) d.after = read_ids(*a, "after");
  if (const auto* c = map_get(r, "blocked_children")) {
    d.blocked_children = read_ids(*c, "blocked_children");
  }
  if (const auto* h = map_get(r, "headers")) d.headers = read_headers(*h);  // C3.18
  if (const auto* s = map_get(r, "steps")) d.steps = read_steps(*s);        // C3.22
  if (const auto* s = map_get(r, "signal")) {                               // C3.23
    d.signalled = true;
    d.signal = read_payload(*s);
  }
  if (const auto* s = map_get(r, "suspended")) {
    d.suspend_timeout = as_number(map_need(*s, "timeout"), "suspended.timeout");
    d.suspend_fails = opt_str(map_need(*s, "on_timeout"), "suspended.on_timeout") ==
                      std::optional<std::string>("fail");
  }
  return d;
}

Result read_schedules(const msgpack::object& r) {
  if (r.type != msgpack::type::ARRAY) bad_reply("schedule_list result is not an array");
  ScheduleList out;
  for (std::uint32_t i = 0; i < r.via.array.size; ++i) {
    const auto& m = r.via.array.ptr[i];
    if (m.type != msgpack::type::MAP) bad_reply("schedule_list item is not a map");
    Schedule sc;
    sc.name = opt_str(map_need(m, "name"), "name").value_or("");
    sc.cron = opt_str(map_need(m, "cron"), "cron").value_or("");
    sc.tz = opt_str(map_need(m, "tz"), "tz").value_or("UTC");
    sc.queue = opt_str(map_need(m, "queue"), "queue").value_or("");
    sc.payload = read_payload(map_need(m, "payload"));
    sc.priority = as_int(map_need(m, "priority"), "priority");
    sc.max_attempts = as_int(map_need(m, "max_attempts"), "max_attempts");
    const auto& next = map_need(m, "next");
    if (next.type != msgpack::type::NIL) sc.next = as_number(next, "next");
    const auto& last = map_need(m, "last");
    if (last.type != msgpack::type::NIL) sc.last = as_number(last, "last");
    out.push_back(std::move(sc));
  }
  return out;
}

// One enqueue's answer: a bool (no key), or {id, created} (C3.10).
Enqueued read_enqueued(const msgpack::object& r) {
  if (r.type == msgpack::type::BOOLEAN) return Enqueued{"", r.via.boolean, false};
  if (r.type != msgpack::type::MAP) bad_reply("enqueue result is not a bool or a map");
  return Enqueued{opt_str(map_need(r, "id"), "id").value_or(""),
                  as_bool(map_need(r, "created"), "created"), true};
}

// enqueue's: a bool, or with a key, {id, created}.
Result read_enqueue(const msgpack::object& r) {
  auto e = read_enqueued(r);
  if (!e.keyed) return e.created;
  return e;
}

// enqueue_many's: bools, or (an entry with a key) one answer per entry.
Result read_enqueue_many(const msgpack::object& r) {
  if (r.type != msgpack::type::ARRAY) bad_reply("enqueue_many result is not an array");
  EnqueuedList out;
  bool keyed = false;
  for (std::uint32_t i = 0; i < r.via.array.size; ++i) {
    out.push_back(read_enqueued(r.via.array.ptr[i]));
    keyed = keyed || out.back().keyed;
  }
  if (keyed) return out;
  BoolList bools;
  for (const auto& e : out) bools.push_back(e.created);
  return bools;
}

// results': a map of each id to {state, result}, or nil.
Result read_results(const msgpack::object& r) {
  if (r.type != msgpack::type::MAP) bad_reply("results result is not a map");
  JobResults out;
  for (std::uint32_t i = 0; i < r.via.map.size; ++i) {
    const auto& kv = r.via.map.ptr[i];
    auto id = opt_str(kv.key, "id");
    if (!id) bad_reply("results key is not a str");
    if (kv.val.type == msgpack::type::NIL) {
      out.emplace_back(*id, std::nullopt);
      continue;
    }
    if (kv.val.type != msgpack::type::MAP) bad_reply("results value is not a map or nil");
    JobOutcome o;
    auto state = opt_str(map_need(kv.val, "state"), "state");
    auto status = state ? status_from_name(*state) : std::nullopt;
    if (!status) bad_reply("results state is not a job state");
    o.status = *status;
    o.result = opt_str(map_need(kv.val, "result"), "result");
    if (auto m = map_get(kv.val, "omitted")) o.omitted = as_bool(*m, "omitted");
    out.emplace_back(*id, std::move(o));
  }
  return out;
}

// A bulk action's (C3.16): {count, more}.
Result read_bulk(const msgpack::object& r) {
  if (r.type != msgpack::type::MAP) bad_reply("bulk result is not a map");
  return BulkOutcome{as_int(map_need(r, "count"), "count"), as_bool(map_need(r, "more"), "more")};
}

// The result of `op`, as its Answer says.
Result read_result(const msgpack::object& r, Op op) {
  switch (op_info(op).answer) {
    case Answer::info: return read_info(r);
    case Answer::flag: return as_bool(r, "result");
    case Answer::fence:
      if (r.type == msgpack::type::NIL) return std::monostate{};
      return as_int(r, "fence");
    case Answer::count:  // purge with a filter answers as a bulk action
      if (r.type == msgpack::type::MAP) return read_bulk(r);
      return as_int(r, "result");
    case Answer::lease_state: return read_lease_state(r);
    case Answer::claimed: return read_claimed(r);
    case Answer::completed_next: return read_completed_next(r);
    case Answer::flags: return read_bools(r, "result");
    case Answer::flags_next: return read_flags_next(r);
    case Answer::stats: return read_stats(r);
    case Answer::text: return read_text(r);
    case Answer::jobs: return read_job_rows(r);
    case Answer::detail: return read_detail(r);
    case Answer::schedules: return read_schedules(r);
    case Answer::enqueued: return read_enqueue(r);
    case Answer::enqueued_list: return read_enqueue_many(r);
    case Answer::results: return read_results(r);
    case Answer::bulk: return read_bulk(r);
    case Answer::token:  // the token, or false for a lease that was not current
      if (r.type == msgpack::type::BOOLEAN) return as_bool(r, "result");
      return read_text(r);
  }
  bad_reply("unknown op");
}

}  // namespace

std::string encode_request(const Request& r) {
  // `op` first, then the op's fields, then `now` and `rid` when set.
  wire::Body body;
  wire::write_fields(r, body);
  if (r.now) body.f64("now", *r.now);
  if (r.rid) pack::rid(body.key("rid"), *r.rid);
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(1 + body.fields);
  pk.pack("op");
  pk.pack(std::string(op_name(r.op)));
  buf.write(body.buf.data(), body.buf.size());
  return std::string(buf.data(), buf.size());
}

std::optional<Rid> reply_rid(std::string_view payload) {
  try {
    auto handle = unpack_reply(payload);
    const auto& root = handle.get();
    if (root.type != msgpack::type::MAP) return std::nullopt;
    const auto* rid = map_get(root, "rid");
    return rid ? rid_of(*rid) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<Reply> decode_reply(std::string_view payload, Op op, const Rid& expect) {
  msgpack::object_handle handle;
  try {
    handle = unpack_reply(payload);
  } catch (const std::exception& e) {
    bad_reply(std::string("not msgpack: ") + e.what());
  }
  const auto& root = handle.get();
  if (root.type != msgpack::type::MAP) bad_reply("not a map");
  Reply reply;
  if (const auto* rid = map_get(root, "rid")) {
    reply.rid = rid_of(*rid);
    if (!reply.rid) bad_reply("rid has a bad type");
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
