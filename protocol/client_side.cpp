// The client's side of the codec: encode_request, which writes a Request as
// a client sends it, and reply_rid / decode_reply, which read what fenceqd
// answers, typed by the op that was asked. Used by every C++ program that
// talks to fenceqd: the client library, fenceq-bench, and the daemon's HTTP
// endpoint, which asks the daemon's own loop for its metrics.
//
// The codec is three files, one concept each: this one; daemon_side.cpp
// (decode_request, encode_ok, encode_error); vocabulary.cpp (the op table,
// error codes, job states, UTF-8) that both use. They share one header,
// fenceq_protocol/codec.hpp, in sections of the same names.
#include "fenceq_protocol/codec.hpp"

#include <msgpack.hpp>

#include <functional>
#include <limits>
#include <utility>

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
  switch (v.type) {
    case msgpack::type::NIL: return Rid{std::monostate{}};
    case msgpack::type::POSITIVE_INTEGER: return Rid{v.via.u64};
    case msgpack::type::NEGATIVE_INTEGER: return Rid{v.via.i64};
    case msgpack::type::STR: return Rid{std::string(v.as<std::string_view>())};
    default: return std::nullopt;
  }
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

Result read_result(const msgpack::object& r, Op op);

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
  // Absent from daemons of before issue 19.
  if (const auto* c = map_get(m, "created")) j.created = as_number(*c, "created");
  return j;
}

ClaimedJobs read_jobs(const msgpack::object& r, const char* what) {
  if (r.type != msgpack::type::ARRAY) bad_reply(std::string(what) + " is not an array");
  ClaimedJobs out;
  out.reserve(r.via.array.size);
  for (std::uint32_t i = 0; i < r.via.array.size; ++i) {
    const auto& m = r.via.array.ptr[i];
    if (m.type != msgpack::type::MAP) bad_reply(std::string(what) + " holds a non-map");
    out.push_back(std::get<ClaimedJob>(read_result(m, Op::claim_next)));
  }
  return out;
}

Result read_result(const msgpack::object& r, Op op) {
  switch (op) {
    case Op::enqueue_many:
    case Op::renew_many: return read_bools(r, "result");
    case Op::complete_many: {
      if (r.type == msgpack::type::ARRAY) return read_bools(r, "result");
      if (r.type != msgpack::type::MAP) bad_reply("complete_many result is not an array or map");
      CompletedManyAndNext c;
      c.completed = read_bools(map_need(r, "completed"), "completed");
      c.next = read_jobs(map_need(r, "next"), "next");
      return c;
    }
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
      // Only when a renew stored one (issue 18).
      if (const auto* p = map_get(r, "progress")) j.progress = opt_str(*p, "progress");
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
    case Op::retry:
    case Op::cancel:
    case Op::queue_config:
    case Op::schedule_set:
    case Op::schedule_delete: return as_bool(r, "result");
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
      if (r.type == msgpack::type::ARRAY) return read_jobs(r, "claim_next result");  // `max`
      if (r.type != msgpack::type::MAP) bad_reply("claim_next result is not a map, array or nil");
      ClaimedJob j;
      j.id = opt_str(map_need(r, "id"), "id").value_or("");
      j.fence = as_int(map_need(r, "fence"), "fence");
      j.payload = read_payload(map_need(r, "payload"));
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
        // Absent from daemons before issue 18: 0.
        if (const auto* c = map_get(kv.val, "cancelled")) q.cancelled = as_int(*c, "cancelled");
        q.oldest_ready_age = as_number(map_need(kv.val, "oldest_ready_age"), "oldest_ready_age");
        // Only for a queue with settings (queue_config).
        if (const auto* paused = map_get(kv.val, "paused")) {
          QueueConfig c;
          c.paused = as_bool(*paused, "paused");
          c.max_leased = as_int(map_need(kv.val, "max_leased"), "max_leased");
          c.rate = as_int(map_need(kv.val, "rate"), "rate");
          c.per = as_number(map_need(kv.val, "per"), "per");
          q.config = c;
        }
        // Absent from older daemons: zeros. A counter this client does not
        // know is ignored, as every unknown key.
        if (const auto* t = map_get(kv.val, "totals")) {
          if (t->type != msgpack::type::MAP) bad_reply("totals is not a map");
          auto count = [&](const msgpack::object& m, const char* name, std::uint64_t& to) {
            if (const auto* v = map_get(m, name)) to = static_cast<std::uint64_t>(as_int(*v, name));
          };
          count(*t, "claimed", q.totals.claimed);
          count(*t, "completed", q.totals.completed);
          count(*t, "failed", q.totals.failed);
          count(*t, "retried", q.totals.retried);
          count(*t, "dead", q.totals.dead);
          count(*t, "expired", q.totals.expired);
          if (const auto* r = map_get(*t, "refused")) {
            if (r->type != msgpack::type::MAP) bad_reply("totals.refused is not a map");
            count(*r, "renew", q.totals.refused.renew);
            count(*r, "complete", q.totals.refused.complete);
            count(*r, "release", q.totals.refused.release);
            count(*r, "fail", q.totals.refused.fail);
          }
        }
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
    case Op::list: {
      if (r.type != msgpack::type::ARRAY) bad_reply("list result is not an array");
      JobList out;
      for (std::uint32_t i = 0; i < r.via.array.size; ++i) {
        const auto& m = r.via.array.ptr[i];
        if (m.type != msgpack::type::MAP) bad_reply("list item is not a map");
        out.push_back(read_job_row(m));
      }
      return out;
    }
    case Op::job:
    case Op::await_job: {
      if (r.type == msgpack::type::NIL) return std::monostate{};
      if (r.type != msgpack::type::MAP) bad_reply("job result is not a map or nil");
      JobDetail d;
      d.info = read_job_row(r);
      d.result = opt_str(map_need(r, "result"), "result");
      d.payload = read_payload(map_need(r, "payload"));
      return d;
    }
    case Op::schedule_list: {
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
  }
  bad_reply("unknown op");
}

}  // namespace

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
  auto f64 = [&](const char* key, double v) { add(key, [&buf, v] { pack::float64(buf, v); }); };

  str("op", std::string(op_name(r.op)));
  const Op op = r.op;
  const bool batch = op == Op::enqueue_many || op == Op::complete_many || op == Op::renew_many;
  const bool no_id = op == Op::queue_config || op == Op::schedule_set ||
                     op == Op::schedule_delete || op == Op::schedule_list;
  if (op != Op::ping && op != Op::stats && op != Op::metrics && op != Op::claim_next &&
      op != Op::list && op != Op::purge && !batch && !no_id) {
    str("id", r.id);
  }
  if (op == Op::enqueue_many) {
    add("jobs", [&pk, &buf, &r] {
      pk.pack_array(static_cast<std::uint32_t>(r.jobs.size()));
      for (const auto& j : r.jobs) {
        const bool q = j.queue != kDefaultQueue;
        pk.pack_map(1 + q + (j.payload ? 1 : 0) + (j.priority != 0) + (j.delay != 0) +
                    (j.max_attempts != 0));
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
          pack::float64(buf, j.delay);
        }
        if (j.max_attempts != 0) {
          pk.pack("max_attempts");
          pk.pack(j.max_attempts);
        }
      }
    });
  }
  if (op == Op::complete_many || op == Op::renew_many) {
    add("items", [&pk, &r, op] {
      const bool with_result = op == Op::complete_many;
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
    });
  }
  if (op == Op::renew_many) f64("ttl", r.ttl);
  if (op == Op::complete_many && r.has_next) {
    add("next", [&pk, &buf, &r] {
      pk.pack_map(3);
      pk.pack("queue");
      pk.pack(r.queue);
      pk.pack("ttl");
      pack::float64(buf, r.ttl);
      pk.pack("max");
      pk.pack(r.max);
    });
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
  if (op == Op::renew && r.progress) str("progress", *r.progress);
  if (op == Op::complete || op == Op::complete_next) {
    add("result", [&pk, &r] { pack::opt_str(pk, r.result); });
  }
  if (op == Op::enqueue) {
    if (r.payload) add("payload", [&pk, &r] { pack::payload(pk, r.payload); });
    if (r.priority != 0) i64("priority", r.priority);
    if (r.delay != 0) f64("delay", r.delay);
    if (r.max_attempts != 0) i64("max_attempts", r.max_attempts);
  }
  if (op == Op::claim_next && r.wait > 0) f64("wait", r.wait);
  if (op == Op::claim_next && r.max > 0) i64("max", r.max);
  if (op == Op::fail) {
    str("error", r.error);
    if (r.retry_in) f64("retry_in", *r.retry_in);
  }
  if (op == Op::list) {
    if (r.status) str("state", std::string(status_name(*r.status)));
    i64("limit", r.limit);
    if (!r.after.empty()) str("after", r.after);
    if (r.order != ListOrder::id) str("order", std::string(order_name(r.order)));
    if (r.after_created) f64("after_created", *r.after_created);
    if (!r.prefix.empty()) str("prefix", r.prefix);
  }
  if (op == Op::purge) f64("older_than", r.older_than);
  auto boolean = [&](const char* key, bool v) {
    add(key, [&pk, v] { v ? pk.pack_true() : pk.pack_false(); });
  };
  if (op == Op::queue_config) {
    str("queue", r.queue);
    if (r.paused) boolean("paused", *r.paused);
    if (r.max_leased) i64("max_leased", *r.max_leased);
    if (r.rate) i64("rate", *r.rate);
    if (r.per) f64("per", *r.per);
  }
  if (op == Op::await_job) f64("wait", r.wait);
  if (op == Op::schedule_set || op == Op::schedule_delete) str("name", r.name);
  if (op == Op::schedule_set) {
    str("cron", r.cron);
    if (r.tz != "UTC") str("tz", r.tz);
    if (r.queue != kDefaultQueue) str("queue", r.queue);
    if (r.payload) add("payload", [&pk, &r] { pack::payload(pk, r.payload); });
    if (r.priority != 0) i64("priority", r.priority);
    if (r.max_attempts != 0) i64("max_attempts", r.max_attempts);
  }
  if (r.now) f64("now", *r.now);
  if (r.rid) add("rid", [&pk, &r] { pack::rid(pk, *r.rid); });

  pk.pack_map(static_cast<std::uint32_t>(fields.size()));
  for (auto& f : fields) f();
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
