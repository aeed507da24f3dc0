// The C++ adapter's translations (cpp_render.hpp): each answer is written with
// the keys PROTOCOL.md gives its result, the optional ones ("on the wire only
// when set") left out when the client's value says they were not set.
#include "cpp_render.hpp"

#include "fenceq_protocol/codec.hpp"

#include <array>
#include <utility>

namespace fenceq::conformance {
namespace {

// The protocol's own names (protocol/vocabulary.cpp).
std::string status_name(JobStatus s) { return std::string(fenceq::protocol::status_name(s)); }

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string unhex(const std::string& text) {
  if (text.size() % 2 != 0) throw Unsupported("$bin: odd number of hex digits");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw Unsupported("$bin: not hex");
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    out += static_cast<char>(nibble(text[i]) * 16 + nibble(text[i + 1]));
  }
  return out;
}

json opt_str(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

json ids(const std::vector<std::string>& v) {
  json out = json::array();
  for (const auto& id : v) out.push_back(id);
  return out;
}

json headers(const Headers& h) {
  json out = json::object();
  for (const auto& [k, v] : h) out[k] = v;
  return out;
}

}  // namespace

std::optional<Payload> payload_of(const json& j) {
  if (j.is_null()) return std::nullopt;
  if (j.is_string()) return Payload{j.get<std::string>(), false};
  if (j.is_object() && j.size() == 1 && j.contains("$bin") && j["$bin"].is_string()) {
    return Payload{unhex(j["$bin"].get<std::string>()), true};
  }
  throw Unsupported("a payload is a str, {\"$bin\": hex} or null");
}

JobStatus status_of(const json& j) {
  if (j.is_string()) {
    if (auto status = fenceq::protocol::status_from_name(j.get<std::string>())) return *status;
  }
  throw Unsupported("no JobStatus for state " + j.dump());
}

json render(const ServerInfo& v) {
  return {{"protocol", v.protocol}, {"version", v.version}, {"clock", v.clock}};
}

json render(const JobState& v) {
  json out = {{"id", v.id},       {"owner", opt_str(v.owner)},   {"until", v.until},
              {"fence", v.fence}, {"result", opt_str(v.result)}, {"done", v.done}};
  if (v.progress) out["progress"] = *v.progress;
  return out;
}

json render(const std::optional<Payload>& v) {
  if (!v) return nullptr;
  if (v->binary) return {{"$bin", hex(v->bytes)}};
  return v->bytes;
}

namespace {

// A job's steps (C3.22): each name with its value, a payload (or null).
json steps(const Steps& s) {
  json out = json::object();
  for (const auto& [name, value] : s) out[name] = render(value);
  return out;
}

}  // namespace

json render(const ClaimedJob& v) {
  json out = {
      {"id", v.id}, {"fence", v.fence}, {"payload", render(v.payload)}, {"attempts", v.attempts}};
  if (!v.after.empty()) out["after"] = ids(v.after);
  if (!v.headers.empty()) out["headers"] = headers(v.headers);
  if (!v.steps.empty()) out["steps"] = steps(v.steps);
  if (v.signalled) out["signal"] = render(v.signal);  // C3.23: nil too, only when woken
  return out;
}

json render(const CompletedAndNext& v) {
  return {{"completed", v.completed}, {"next", v.next ? render(*v.next) : json(nullptr)}};
}

json render(const CompletedManyAndNext& v) {
  return {{"completed", render(v.completed)}, {"next", render(v.next)}};
}

json render(const Enqueued& v) {
  if (!v.keyed) return v.created;
  return {{"id", v.id}, {"created", v.created}};
}

json render(const JobInfo& v) {
  json out = {{"id", v.id},
              {"queue", v.queue},
              {"state", status_name(v.status)},
              {"priority", v.priority},
              {"attempts", v.attempts},
              {"max_attempts", v.max_attempts},
              {"fence", v.fence},
              {"owner", opt_str(v.owner)},
              {"until", v.until},
              {"not_before", v.not_before},
              {"error", opt_str(v.error)},
              {"created", v.created}};
  if (v.progress) out["progress"] = *v.progress;
  if (v.key) out["key"] = *v.key;
  if (v.group) out["group"] = *v.group;
  return out;
}

json render(const JobDetail& v) {
  json out = render(v.info);
  out["result"] = opt_str(v.result);
  out["payload"] = render(v.payload);
  if (!v.after.empty()) out["after"] = ids(v.after);
  if (!v.blocked_children.empty()) out["blocked_children"] = ids(v.blocked_children);
  if (!v.headers.empty()) out["headers"] = headers(v.headers);
  if (!v.steps.empty()) out["steps"] = steps(v.steps);
  if (v.signalled) out["signal"] = render(v.signal);  // C3.23
  if (v.suspend_timeout) {
    out["suspended"] = {{"timeout", *v.suspend_timeout},
                        {"on_timeout", v.suspend_fails ? "fail" : "retry"}};
  }
  return out;
}

json render(const JobResults& v) {
  json out = json::object();
  for (const auto& [id, outcome] : v) {
    out[id] = outcome ? json{{"state", status_name(outcome->status)},
                             {"result", opt_str(outcome->result)}}
                      : json(nullptr);
  }
  return out;
}

json render(const BulkOutcome& v) { return {{"count", v.count}, {"more", v.more}}; }

json render(const Schedule& v) {
  return {{"name", v.name},
          {"cron", v.cron},
          {"tz", v.tz},
          {"queue", v.queue},
          {"payload", render(v.payload)},
          {"priority", v.priority},
          {"max_attempts", v.max_attempts},
          {"next", v.next > 0 ? json(v.next) : json(nullptr)},
          {"last", v.last ? json(*v.last) : json(nullptr)}};
}

namespace {

json render_queue(const QueueStats& q) {
  const auto& t = q.totals;
  json out = {{"ready", q.ready},
              {"delayed", q.delayed},
              {"leased", q.leased},
              {"done", q.done},
              {"dead", q.dead},
              {"cancelled", q.cancelled},
              {"oldest_ready_age", q.oldest_ready_age},
              {"totals",
               {{"claimed", t.claimed},
                {"completed", t.completed},
                {"failed", t.failed},
                {"retried", t.retried},
                {"dead", t.dead},
                {"expired", t.expired},
                {"removed", t.removed},
                {"refused",
                 {{"renew", t.refused.renew},
                  {"complete", t.refused.complete},
                  {"release", t.refused.release},
                  {"fail", t.refused.fail}}}}}};
  if (q.config) {
    out["paused"] = q.config->paused;
    out["max_leased"] = q.config->max_leased;
    out["rate"] = q.config->rate;
    out["per"] = q.config->per;
    if (q.config->group_limited()) {
      out["group_max_leased"] = q.config->group_max_leased;
      out["group_rate"] = q.config->group_rate;
      out["group_per"] = q.config->group_per;
    }
    if (q.config->group_overrides > 0) out["group_overrides"] = q.config->group_overrides;
  }
  for (const auto& [group, o] : q.group_config) {  // C3.25, as on the wire
    auto& g = out["group_config"][group];
    g = json::object();
    if (o.max_leased) g["max_leased"] = *o.max_leased;
    if (o.rate) g["rate"] = *o.rate;
    if (o.per) g["per"] = *o.per;
  }
  if (q.groups_waiting > 0) out["groups_waiting"] = q.groups_waiting;
  if (q.blocked > 0) out["blocked"] = q.blocked;
  if (q.suspended > 0) out["suspended"] = q.suspended;  // C3.23
  if (t.deadline_passed > 0) out["totals"]["deadline_passed"] = t.deadline_passed;  // C3.24
  if (q.retention.keep_done) out["keep_done"] = *q.retention.keep_done;
  if (q.retention.keep_dead) out["keep_dead"] = *q.retention.keep_dead;
  if (q.retention.keep_cancelled) out["keep_cancelled"] = *q.retention.keep_cancelled;
  return out;
}

}  // namespace

json render(const Stats& v) {
  json queues = json::object();
  for (const auto& q : v.queues) queues[q.queue] = render_queue(q);
  json writes = json::object();
  for (const auto& [name, w] : {std::pair<const char*, const WriteCounts&>{"renew", v.renew},
                                {"complete", v.complete},
                                {"release", v.release},
                                {"fail", v.fail}}) {
    writes[name] = {{"applied", w.applied}, {"refused", w.refused}};
  }
  json out = {{"queues", queues},
              {"requests", v.requests},
              {"commits", v.commits},
              {"batches", v.batches},
              {"failed_commits", v.failed_commits},
              {"mean_batch", v.mean_batch},
              {"waiting_claims", v.waiting_claims},
              {"uptime", v.uptime},
              {"writes", writes}};
  if (v.events_published) {
    out["events"] = {{"published", *v.events_published}, {"dropped", v.events_dropped.value_or(0)}};
  }
  return out;
}

}  // namespace fenceq::conformance
