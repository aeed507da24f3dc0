// The daemon's replies: encode_ok and encode_error write every reply fenceqd
// sends, each result in the shape its op's Answer (ops.hpp) gives it.
//
// The codec's files, one concept each: this one; daemon_side.cpp
// (decode_request); op_fields.cpp (each op's fields); client_side.cpp (encode_request, reply_rid,
// decode_reply); vocabulary.cpp (op names, error codes, job states, UTF-8).
// They share one header, fenceq_protocol/codec.hpp, in sections of the same
// names; this file and daemon_side.cpp are its "daemon's side".
#include <msgpack.hpp>

#include <cstdint>
#include <utility>

#include "fenceq_protocol/codec.hpp"
#include "fenceq_protocol/op_spec.hpp"
#include "pack.hpp"

namespace fenceq::protocol {
namespace {

template <typename Packer>
void pack_ids(Packer& pk, const std::vector<std::string>& ids) {
  pk.pack_array(static_cast<std::uint32_t>(ids.size()));
  for (const auto& id : ids) pk.pack(id);
}

template <typename Packer>
void pack_next_job(Packer& pk, const ClaimedJob& v) {
  pk.pack_map(4 + (v.after.empty() ? 0 : 1) + (v.headers.empty() ? 0 : 1) +
              (v.steps.empty() ? 0 : 1) + (v.signalled ? 1 : 0));
  pk.pack("id");
  pk.pack(v.id);
  pk.pack("fence");
  pk.pack(v.fence);
  pk.pack("payload");
  pack::payload(pk, v.payload);
  pk.pack("attempts");
  pk.pack(v.attempts);
  if (!v.after.empty()) {
    pk.pack("after");
    pack_ids(pk, v.after);
  }
  if (!v.headers.empty()) {  // C3.18: only when it has some
    pk.pack("headers");
    pack::headers(pk, v.headers);
  }
  if (!v.steps.empty()) {  // C3.22: only when it has some
    pk.pack("steps");
    pack::steps(pk, v.steps);
  }
  if (v.signalled) {  // C3.23: only when a signal woke it
    pk.pack("signal");
    pack::payload(pk, v.signal);
  }
}

// A job's `list` row: a map of its fields, with room for `extra` more that
// the caller packs after them (`job`'s result and payload).
template <typename Packer>
void pack_job_row(Packer& pk, msgpack::sbuffer& buf, const JobInfo& j, std::uint32_t extra) {
  pk.pack_map(12 + (j.progress ? 1 : 0) + (j.key ? 1 : 0) + (j.group ? 1 : 0) + extra);
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
  pack::opt_str(pk, j.owner);
  pk.pack("until");
  pack::float64(buf, j.until);
  pk.pack("not_before");
  pack::float64(buf, j.not_before);
  pk.pack("error");
  pack::opt_str(pk, j.error);
  pk.pack("created");
  pack::float64(buf, j.created);
  if (j.progress) {
    pk.pack("progress");
    pk.pack(*j.progress);
  }
  if (j.key) {
    pk.pack("key");
    pk.pack(*j.key);
  }
  if (j.group) {
    pk.pack("group");
    pk.pack(*j.group);
  }
}

// --- each result's shape -----------------------------------------------------
// One writer per alternative of Result (what each op answers: its Answer).
using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_bool(Packer& pk, bool b) { b ? pk.pack_true() : pk.pack_false(); }

void pack_value(Packer& pk, msgpack::sbuffer&, std::monostate) { pk.pack_nil(); }
void pack_value(Packer& pk, msgpack::sbuffer&, bool v) { pack_bool(pk, v); }
void pack_value(Packer& pk, msgpack::sbuffer&, std::int64_t v) { pk.pack(v); }
void pack_value(Packer& pk, msgpack::sbuffer&, const std::string& v) { pk.pack(v); }
void pack_value(Packer& pk, msgpack::sbuffer&, const ClaimedJob& v) { pack_next_job(pk, v); }

void pack_value(Packer& pk, msgpack::sbuffer& buf, const JobState& v) {
  pk.pack_map(v.progress ? 7 : 6);
  pk.pack("id");
  pk.pack(v.id);
  pk.pack("owner");
  pack::opt_str(pk, v.owner);
  pk.pack("until");
  pack::float64(buf, v.until);
  pk.pack("fence");
  pk.pack(v.fence);
  pk.pack("result");
  pack::opt_str(pk, v.result);
  pk.pack("done");
  pack_bool(pk, v.done);
  if (v.progress) {
    pk.pack("progress");
    pk.pack(*v.progress);
  }
}

void pack_value(Packer& pk, msgpack::sbuffer&, const ServerInfo& v) {
  pk.pack_map(v.with_ops ? 4 : 3);
  pk.pack("protocol");
  pk.pack(v.protocol);
  pk.pack("version");
  pk.pack(v.version);
  pk.pack("clock");
  pk.pack(v.clock);
  if (!v.with_ops) return;
  // Each op's fields, as the decoder takes them (op_spec.hpp); a field that
  // holds entries is followed by theirs as "jobs[].id", "next.queue".
  pk.pack("ops");
  pk.pack_map(static_cast<std::uint32_t>(kOpCount));
  for (const auto& spec : kOpSpecs) {
    pk.pack(op_name(spec.op));
    std::uint32_t n = static_cast<std::uint32_t>(spec.fields.size);
    for (const auto& nested : spec.nested) n += static_cast<std::uint32_t>(nested.entries.size);
    pk.pack_array(n);
    for (auto name : spec.fields) {
      pk.pack(name);
      for (const auto& nested : spec.nested) {
        if (nested.name != name) continue;
        for (auto e : nested.entries) {
          pk.pack(std::string(name) + (nested.array ? "[]." : ".") + std::string(e));
        }
      }
    }
  }
}

void pack_value(Packer& pk, msgpack::sbuffer&, const CompletedAndNext& v) {
  pk.pack_map(2);
  pk.pack("completed");
  pack_bool(pk, v.completed);
  pk.pack("next");
  if (v.next) {
    pack_next_job(pk, *v.next);
  } else {
    pk.pack_nil();
  }
}

void pack_value(Packer& pk, msgpack::sbuffer&, const BoolList& v) {
  pk.pack_array(static_cast<std::uint32_t>(v.size()));
  for (bool b : v) pack_bool(pk, b);
}

void pack_value(Packer& pk, msgpack::sbuffer&, const ClaimedJobs& v) {
  pk.pack_array(static_cast<std::uint32_t>(v.size()));
  for (const auto& j : v) pack_next_job(pk, j);
}

void pack_value(Packer& pk, msgpack::sbuffer& buf, const CompletedManyAndNext& v) {
  pk.pack_map(2);
  pk.pack("completed");
  pack_value(pk, buf, v.completed);
  pk.pack("next");
  pack_value(pk, buf, v.next);
}

// The groups' own settings (C3.25): group -> {max_leased?, rate?, per?}.
void pack_group_config(Packer& pk, msgpack::sbuffer& buf,
                       const std::vector<std::pair<std::string, GroupOverride>>& groups) {
  pk.pack("group_config");
  pk.pack_map(static_cast<std::uint32_t>(groups.size()));
  for (const auto& [group, o] : groups) {
    pk.pack(group);
    pk.pack_map((o.max_leased ? 1 : 0) + (o.rate ? 1 : 0) + (o.per ? 1 : 0));
    if (o.max_leased) {
      pk.pack("max_leased");
      pk.pack(*o.max_leased);
    }
    if (o.rate) {
      pk.pack("rate");
      pk.pack(*o.rate);
    }
    if (o.per) {
      pk.pack("per");
      pack::float64(buf, *o.per);
    }
  }
}

// One queue's entry of `stats`: its settings (if any), counts and totals.
void pack_queue_stats(Packer& pk, msgpack::sbuffer& buf, const QueueStats& q) {
  const bool grouped = q.config && q.config->group_limited();
  const std::pair<const char*, std::optional<double>> keeps[] = {
      {"keep_done", q.retention.keep_done},
      {"keep_dead", q.retention.keep_dead},
      {"keep_cancelled", q.retention.keep_cancelled}};
  std::uint32_t kept = 0;
  for (const auto& k : keeps) kept += k.second ? 1 : 0;
  const bool overridden = q.config && q.config->group_overrides > 0;
  pk.pack_map((q.config ? 12 : 8) + (grouped ? 3 : 0) + (q.groups_waiting > 0 ? 1 : 0) +
              (q.blocked > 0 ? 1 : 0) + (q.suspended > 0 ? 1 : 0) + kept +
              (overridden ? 1 : 0) + (q.group_config.empty() ? 0 : 1));
  for (const auto& [name, keep] : keeps) {
    if (!keep) continue;  // only when set (C3.17)
    pk.pack(name);
    pack::float64(buf, *keep);
  }
  if (grouped) {
    // Only for a queue with group settings (C3.11).
    pk.pack("group_max_leased");
    pk.pack(q.config->group_max_leased);
    pk.pack("group_rate");
    pk.pack(q.config->group_rate);
    pk.pack("group_per");
    pack::float64(buf, q.config->group_per);
  }
  if (overridden) {  // C3.25: only for a queue with groups' own settings
    pk.pack("group_overrides");
    pk.pack(q.config->group_overrides);
  }
  if (!q.group_config.empty()) pack_group_config(pk, buf, q.group_config);
  if (q.groups_waiting > 0) {
    pk.pack("groups_waiting");
    pk.pack(q.groups_waiting);
  }
  if (q.blocked > 0) {
    // Jobs waiting for other jobs (C3.13), only when there are any.
    pk.pack("blocked");
    pk.pack(q.blocked);
  }
  if (q.suspended > 0) {  // waiting for a signal (C3.23), only when there are any
    pk.pack("suspended");
    pk.pack(q.suspended);
  }
  if (q.config) {
    // Only for a queue with settings, so the shape pinned before
    // queue_config existed holds for every other queue.
    pk.pack("paused");
    pack_bool(pk, q.config->paused);
    pk.pack("max_leased");
    pk.pack(q.config->max_leased);
    pk.pack("rate");
    pk.pack(q.config->rate);
    pk.pack("per");
    pack::float64(buf, q.config->per);
  }
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
  pk.pack("cancelled");
  pk.pack(q.cancelled);
  pk.pack("oldest_ready_age");
  pack::float64(buf, q.oldest_ready_age);
  const auto& t = q.totals;
  pk.pack("totals");
  pk.pack_map(8 + (t.deadline_passed > 0 ? 1 : 0));
  if (t.deadline_passed > 0) {  // C3.24, only when some
    pk.pack("deadline_passed");
    pk.pack(t.deadline_passed);
  }
  for (auto [name, n] : {std::pair<const char*, std::uint64_t>{"claimed", t.claimed},
                         {"completed", t.completed},
                         {"failed", t.failed},
                         {"retried", t.retried},
                         {"dead", t.dead},
                         {"expired", t.expired},
                         {"removed", t.removed}}) {
    pk.pack(name);
    pk.pack(n);
  }
  pk.pack("refused");
  pk.pack_map(4);
  for (auto [name, n] : {std::pair<const char*, std::uint64_t>{"renew", t.refused.renew},
                         {"complete", t.refused.complete},
                         {"release", t.refused.release},
                         {"fail", t.refused.fail}}) {
    pk.pack(name);
    pk.pack(n);
  }
}

void pack_value(Packer& pk, msgpack::sbuffer& buf, const Stats& v) {
  const bool events = v.events_published.has_value();
  pk.pack_map(9 + (events ? 1 : 0) + (v.outbox ? 1 : 0));
  pk.pack("queues");
  pk.pack_map(static_cast<std::uint32_t>(v.queues.size()));
  for (const auto& q : v.queues) {
    pk.pack(q.queue);
    pack_queue_stats(pk, buf, q);
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
  pack::float64(buf, v.mean_batch);
  pk.pack("waiting_claims");
  pk.pack(v.waiting_claims);
  pk.pack("uptime");
  pack::float64(buf, v.uptime);
  if (events) {  // with --events only (C3.19)
    pk.pack("events");
    pk.pack_map(2);
    pk.pack("published");
    pk.pack(*v.events_published);
    pk.pack("dropped");
    pk.pack(v.events_dropped.value_or(0));
  }
  if (v.outbox) {  // with --outbox only (C3.21)
    pk.pack("outbox");
    pk.pack_map(5);
    pk.pack("pending");
    pk.pack(v.outbox->pending);
    pk.pack("lag");
    pack::float64(buf, v.outbox->lag);
    pk.pack("drained");
    pk.pack(v.outbox->drained);
    pk.pack("rejected");
    pk.pack(v.outbox->rejected);
    pk.pack("high_water");
    pk.pack(v.outbox->high_water);
  }
  pk.pack("writes");
  pk.pack_map(4);
  for (const auto& [name, w] : {std::pair<const char*, const WriteCounts&>{"renew", v.renew},
                                {"complete", v.complete},
                                {"release", v.release},
                                {"fail", v.fail}}) {
    pk.pack(name);
    pk.pack_map(2);
    pk.pack("applied");
    pk.pack(w.applied);
    pk.pack("refused");
    pk.pack(w.refused);
  }
}

// A keyed enqueue's answer: {id, created}; an entry without a key: its bool.
void pack_value(Packer& pk, msgpack::sbuffer&, const Enqueued& v) {
  if (!v.keyed) {
    v.created ? pk.pack_true() : pk.pack_false();
    return;
  }
  pk.pack_map(2);
  pk.pack("id");
  pk.pack(v.id);
  pk.pack("created");
  v.created ? pk.pack_true() : pk.pack_false();
}

void pack_value(Packer& pk, msgpack::sbuffer& buf, const EnqueuedList& v) {
  pk.pack_array(static_cast<std::uint32_t>(v.size()));
  for (const auto& e : v) pack_value(pk, buf, e);
}

void pack_value(Packer& pk, msgpack::sbuffer& buf, const JobList& v) {
  pk.pack_array(static_cast<std::uint32_t>(v.size()));
  for (const auto& j : v) pack_job_row(pk, buf, j, 0);
}

void pack_value(Packer& pk, msgpack::sbuffer& buf, const JobDetail& v) {
  pack_job_row(pk, buf, v.info,
               2 + (v.after.empty() ? 0 : 1) + (v.blocked_children.empty() ? 0 : 1) +
                   (v.headers.empty() ? 0 : 1) + (v.steps.empty() ? 0 : 1) +
                   (v.signalled ? 1 : 0) + (v.suspend_timeout ? 1 : 0));
  pk.pack("result");
  pack::opt_str(pk, v.result);
  pk.pack("payload");
  pack::payload(pk, v.payload);
  if (!v.after.empty()) {
    pk.pack("after");
    pack_ids(pk, v.after);
  }
  if (!v.blocked_children.empty()) {
    pk.pack("blocked_children");
    pack_ids(pk, v.blocked_children);
  }
  if (!v.headers.empty()) {
    pk.pack("headers");
    pack::headers(pk, v.headers);
  }
  if (!v.steps.empty()) {
    pk.pack("steps");
    pack::steps(pk, v.steps);
  }
  if (v.signalled) {
    pk.pack("signal");
    pack::payload(pk, v.signal);
  }
  if (v.suspend_timeout) {
    pk.pack("suspended");
    pk.pack_map(2);
    pk.pack("timeout");
    pack::float64(buf, *v.suspend_timeout);
    pk.pack("on_timeout");
    pk.pack(v.suspend_fails ? "fail" : "retry");
  }
}

void pack_value(Packer& pk, msgpack::sbuffer&, const JobResults& v) {
  pk.pack_map(static_cast<std::uint32_t>(v.size()));
  for (const auto& [id, outcome] : v) {
    pk.pack(id);
    if (!outcome) {
      pk.pack_nil();
      continue;
    }
    pk.pack_map(outcome->omitted ? 3 : 2);
    pk.pack("state");
    pk.pack(status_name(outcome->status));
    pk.pack("result");
    pack::opt_str(pk, outcome->result);
    if (outcome->omitted) {
      pk.pack("omitted");
      pk.pack_true();
    }
  }
}

void pack_value(Packer& pk, msgpack::sbuffer&, const BulkOutcome& v) {
  pk.pack_map(2);
  pk.pack("count");
  pk.pack(v.count);
  pk.pack("more");
  pk.pack(v.more);
}

// nil for a time that is not set.
void pack_time(Packer& pk, msgpack::sbuffer& buf, std::optional<double> t) {
  if (t) {
    pack::float64(buf, *t);
  } else {
    pk.pack_nil();
  }
}

void pack_value(Packer& pk, msgpack::sbuffer& buf, const ScheduleList& v) {
  pk.pack_array(static_cast<std::uint32_t>(v.size()));
  for (const auto& sc : v) {
    pk.pack_map(9);
    pk.pack("name");
    pk.pack(sc.name);
    pk.pack("cron");
    pk.pack(sc.cron);
    pk.pack("tz");
    pk.pack(sc.tz);
    pk.pack("queue");
    pk.pack(sc.queue);
    pk.pack("payload");
    pack::payload(pk, sc.payload);
    pk.pack("priority");
    pk.pack(sc.priority);
    pk.pack("max_attempts");
    pk.pack(sc.max_attempts);
    pk.pack("next");
    pack_time(pk, buf, sc.next > 0 ? std::optional<double>(sc.next) : std::nullopt);
    pk.pack("last");
    pack_time(pk, buf, sc.last);
  }
}

void pack_result(Packer& pk, msgpack::sbuffer& buf, const Result& result) {
  std::visit([&](const auto& v) { pack_value(pk, buf, v); }, result);
}
}  // namespace

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
    pack::rid(pk, *rid);
  }
  pack::scrub_text(buf);  // text a store gave back that is not UTF-8
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
    pack::rid(pk, *rid);
  }
  pack::scrub_text(buf);  // a message may quote a stored value
  return std::string(buf.data(), buf.size());
}

}  // namespace fenceq::protocol
