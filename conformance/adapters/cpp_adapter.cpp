// The conformance kit's adapter for the C++ client (clients/cpp), built as
// fenceq-conformance-adapter: reads one JSON request per line on stdin, makes
// the call with fenceq::Client, and prints the answer as one JSON line
// (conformance/README.md). calls() has one row per protocol op: it
// reads the op's wire fields into the client's parameters, refusing with
// Unsupported (before anything is sent) a field the method has no parameter
// for, then calls the method and writes its answer back in wire form.
#include <chrono>
#include <fenceq/client.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "cpp_render.hpp"

namespace fenceq::conformance {
namespace {

// An adapter-side fault (a line it cannot read, an op before connect):
// answered with the kit's code `adapter`.
struct AdapterError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A request's `args`, taken field by field. A field of the wrong JSON type,
// or a null where the method has no way to say nil, is Unsupported; done()
// refuses the fields no one took.
class Args {
 public:
  explicit Args(json j) : j_(std::move(j)) {
    if (!j_.is_object()) throw AdapterError("args must be an object");
  }
  bool has(const char* k) const { return j_.contains(k); }
  // Present and null (taken): group_config's nil.
  bool take_null(const char* k) {
    if (!has(k) || !j_[k].is_null()) return false;
    j_.erase(k);
    return true;
  }
  json take(const char* k) {
    if (!has(k)) throw Unsupported(std::string("no field ") + k);
    json v = std::move(j_[k]);
    j_.erase(k);
    return v;
  }
  std::string str(const char* k) { return as_str(k, take(k)); }
  double num(const char* k) { return as_num(k, take(k)); }
  std::int64_t integer(const char* k) { return as_int(k, take(k)); }
  bool boolean(const char* k) {
    json v = take(k);
    if (!v.is_boolean()) throw Unsupported(std::string(k) + " is not a bool");
    return v.get<bool>();
  }
  // Absent: nullopt. (A present null is Unsupported: the method cannot send nil.)
  std::optional<std::string> opt_str(const char* k) {
    if (!has(k)) return std::nullopt;
    return str(k);
  }
  std::optional<double> opt_num(const char* k) {
    if (!has(k)) return std::nullopt;
    return num(k);
  }
  std::optional<std::int64_t> opt_int(const char* k) {
    if (!has(k)) return std::nullopt;
    return integer(k);
  }
  // Required, str or null (complete's result).
  std::optional<std::string> nullable_str(const char* k) {
    json v = take(k);
    if (v.is_null()) return std::nullopt;
    return as_str(k, v);
  }
  // A number the client leaves out at 0 or below: given so, it cannot be sent.
  double positive(const char* k) {
    if (!has(k)) return 0;
    double v = num(k);
    if (!(v > 0)) throw Unsupported(std::string(k) + " <= 0 is never sent by this client");
    return v;
  }
  void done() const {
    if (!j_.empty()) throw Unsupported("no parameter for field(s) " + j_.dump());
  }

 private:
  static std::string as_str(const char* k, const json& v) {
    if (!v.is_string()) throw Unsupported(std::string(k) + " is not a str");
    return v.get<std::string>();
  }
  static double as_num(const char* k, const json& v) {
    if (!v.is_number()) throw Unsupported(std::string(k) + " is not a number");
    return v.get<double>();
  }
  static std::int64_t as_int(const char* k, const json& v) {
    if (!v.is_number_integer()) throw Unsupported(std::string(k) + " is not an int");
    return v.get<std::int64_t>();
  }
  json j_;
};

// The fields enqueue and each enqueue_many entry share (JobSpec's).
template <typename Spec>
void read_job_fields(Args& a, Spec& s, std::vector<std::string>& after) {
  if (auto v = a.opt_str("queue")) s.queue = *v;
  if (a.has("payload")) s.payload = payload_of(a.take("payload"));
  if (auto v = a.opt_int("priority")) s.priority = *v;
  if (auto v = a.opt_num("delay")) s.delay = *v;
  if (auto v = a.opt_int("max_attempts")) s.max_attempts = *v;
  s.key = a.opt_str("key");
  // The client sends unique_for and on_conflict only with a key, after_failure
  // only with parents, and no empty `after`: such a request it cannot make.
  if (!s.key && (a.has("unique_for") || a.has("on_conflict"))) {
    throw Unsupported("unique_for or on_conflict without a key");
  }
  s.unique_for = a.positive("unique_for");
  if (auto v = a.opt_str("on_conflict")) {
    if (*v != "skip" && *v != "replace") throw Unsupported("on_conflict " + *v);
    s.replace = *v == "replace";
  }
  s.group = a.opt_str("group");
  if (a.has("after")) {
    json ids = a.take("after");
    if (!ids.is_array()) throw Unsupported("after is not an array");
    for (const auto& id : ids) {
      if (!id.is_string()) throw Unsupported("after: an id is not a str");
      after.push_back(id.get<std::string>());
    }
    if (after.empty()) throw Unsupported("an empty after");
  }
  if (a.has("after_failure") && after.empty()) throw Unsupported("after_failure without after");
  if (auto v = a.opt_str("after_failure")) {
    if (*v != "cancel" && *v != "run") throw Unsupported("after_failure " + *v);
    s.after_run = *v == "run";
  }
  s.max_runtime = a.positive("max_runtime");
  s.deadline = a.positive("deadline");  // C3.24; 0 is none, never sent
  if (a.has("headers")) {
    json h = a.take("headers");
    if (!h.is_object()) throw Unsupported("headers is not a map");
    for (const auto& [k, v] : h.items()) {
      if (!v.is_string()) throw Unsupported("headers: a value is not a str");
      s.headers[k] = v.template get<std::string>();
    }
  }
}

EnqueueOptions enqueue_options(Args& a) {
  EnqueueOptions o;
  read_job_fields(a, o, o.after);
  o.now = a.opt_num("now");
  return o;
}

std::vector<JobSpec> job_specs(const json& jobs, bool& keyed) {
  if (!jobs.is_array()) throw Unsupported("jobs is not an array");
  std::vector<JobSpec> out;
  for (const auto& entry : jobs) {
    Args e(entry.is_object() ? entry : throw Unsupported("a jobs entry is not a map"));
    JobSpec s;
    s.id = e.str("id");
    read_job_fields(e, s, s.parents);
    e.done();
    keyed = keyed || s.key.has_value();
    out.push_back(std::move(s));
  }
  return out;
}

// complete_many's and renew_many's items.
std::vector<LeaseItem> lease_items(const json& items, bool with_result) {
  if (!items.is_array()) throw Unsupported("items is not an array");
  std::vector<LeaseItem> out;
  for (const auto& entry : items) {
    Args e(entry.is_object() ? entry : throw Unsupported("an items entry is not a map"));
    LeaseItem item{e.str("id"), e.str("owner"), e.integer("fence"), std::nullopt};
    if (with_result) {
      // The client sends an item's result always (nil for none).
      item.result = e.nullable_str("result");
    } else {
      item.progress = e.opt_str("progress");
    }
    e.done();
    out.push_back(std::move(item));
  }
  return out;
}

BulkFilter bulk_filter(Args& a) {
  BulkFilter f;
  if (a.has("state")) f.state = status_of(a.take("state"));
  if (auto v = a.opt_str("prefix")) f.prefix = *v;
  f.group = a.opt_str("group");
  if (auto v = a.opt_int("limit")) f.limit = *v;
  return f;
}

ListOptions list_options(Args& a) {
  ListOptions o;
  o.queue = a.opt_str("queue");
  if (a.has("state")) o.status = status_of(a.take("state"));
  if (auto v = a.opt_int("limit")) o.limit = *v;
  if (auto v = a.opt_str("after")) o.after = *v;
  if (auto v = a.opt_str("order")) {
    static const std::map<std::string, ListOrder> kOrders{{"id", ListOrder::id},
                                                          {"created", ListOrder::created},
                                                          {"-created", ListOrder::created_desc}};
    auto order = kOrders.find(*v);
    if (order == kOrders.end()) throw Unsupported("order " + *v);
    o.order = order->second;
  }
  o.after_created = a.opt_num("after_created");
  if (auto v = a.opt_str("prefix")) o.prefix = *v;
  o.key = a.opt_str("key");
  o.group = a.opt_str("group");
  return o;
}

std::optional<double> keep(Args& a, const char* k) {
  if (!a.has(k)) return std::nullopt;
  json v = a.take(k);
  if (v.is_null()) return kKeepForever;  // nil on the wire: the retention removed
  if (!v.is_number()) throw Unsupported(std::string(k) + " is not a number");
  return v.get<double>();
}

QueueSettings queue_settings(Args& a) {
  QueueSettings s;
  if (a.has("paused")) s.paused = a.boolean("paused");
  s.max_leased = a.opt_int("max_leased");
  s.rate = a.opt_int("rate");
  s.per = a.opt_num("per");
  s.group_max_leased = a.opt_int("group_max_leased");
  s.group_rate = a.opt_int("group_rate");
  s.group_per = a.opt_num("group_per");
  s.keep_done = keep(a, "keep_done");
  s.keep_dead = keep(a, "keep_dead");
  s.keep_cancelled = keep(a, "keep_cancelled");
  return s;
}

#include "cpp_ops_gen.inc"

// Each op's call: its arguments read from the step (Args), the typed Client
// method that sends it, its answer rendered for the kit. One function per op,
// named after its enum (call_OP); conformance/adapters/cpp_ops_gen.inc
// (generated from protocol/ops/ops.json) declares them and maps each op's
// wire name to its function, so that an op added to ops.json and not
// written here is a link error, not a silent "unsupported".

json call_ping(Client& c, Args& a) {
  a.done();
  return render(c.ping());
}

json call_enqueue(Client& c, Args& a) {
  auto id = a.str("id");
  auto o = enqueue_options(a);
  a.done();
  if (o.key) return render(c.enqueue_unique(id, o));
  return json(c.enqueue(id, o));
}

json call_state(Client& c, Args& a) {
  auto id = a.str("id");
  a.done();
  return render(c.state(id));
}

json call_claim(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto ttl = a.num("ttl");
  auto now = a.opt_num("now");
  a.done();
  auto fence = c.claim(id, owner, ttl, now);
  return fence ? json(*fence) : json(nullptr);
}

json call_renew(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto fence = a.integer("fence");
  auto ttl = a.num("ttl");
  auto now = a.opt_num("now");
  auto progress = a.opt_str("progress");
  a.done();
  return json(c.renew(id, owner, fence, ttl, now, progress));
}

json call_complete(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto fence = a.integer("fence");
  auto result = a.nullable_str("result");
  auto now = a.opt_num("now");
  a.done();
  return json(c.complete(id, owner, fence, result, now));
}

json call_release(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto fence = a.integer("fence");
  a.done();
  return json(c.release(id, owner, fence));
}

json call_claim_next(Client& c, Args& a) {
  auto queue = a.str("queue"), owner = a.str("owner");
  auto ttl = a.num("ttl");
  auto wait = a.opt_num("wait").value_or(0);
  // claim_next_many leaves a max <= 0 out of the request (and then
  // fails reading the single claim's answer): it cannot send one.
  auto max = a.opt_int("max");
  if (max && *max <= 0) throw Unsupported("max <= 0 is never sent by this client");
  auto now = a.opt_num("now");
  a.done();
  if (max) return render(c.claim_next_many(queue, owner, ttl, *max, wait, now));
  return render(c.claim_next(queue, owner, ttl, wait, now));
}

json call_fail(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto fence = a.integer("fence");
  auto error = a.str("error");
  auto retry_in = a.opt_num("retry_in");
  auto now = a.opt_num("now");
  a.done();
  return json(c.fail(id, owner, fence, error, retry_in, now));
}

json call_check(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto fence = a.integer("fence");
  auto now = a.opt_num("now");
  a.done();
  return json(c.check(id, owner, fence, now));
}

json call_retry(Client& c, Args& a) {
  auto id = a.str("id");
  a.done();
  return json(c.retry(id));
}

json call_stats(Client& c, Args& a) {
  a.done();
  return render(c.stats());
}

json call_list(Client& c, Args& a) {
  auto o = list_options(a);
  a.done();
  return render(c.list(o));
}

json call_purge(Client& c, Args& a) {
  auto queue = a.opt_str("queue");
  if (a.has("state") || a.has("prefix") || a.has("group") || a.has("limit")) {
    auto filter = bulk_filter(a);
    auto older_than = a.opt_num("older_than").value_or(0);
    a.done();
    return render(c.purge_many(queue, filter, older_than));
  }
  auto older_than = a.num("older_than");
  a.done();
  return json(c.purge(older_than, queue));
}

json call_metrics(Client& c, Args& a) {
  a.done();
  return json(c.metrics());
}

json call_complete_next(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto fence = a.integer("fence");
  auto result = a.nullable_str("result");
  auto queue = a.str("queue");
  auto ttl = a.num("ttl");
  auto now = a.opt_num("now");
  a.done();
  return render(c.complete_and_claim_next(id, owner, fence, result, queue, ttl, now));
}

json call_enqueue_many(Client& c, Args& a) {
  bool keyed = false;
  auto jobs = job_specs(a.take("jobs"), keyed);
  auto now = a.opt_num("now");
  a.done();
  if (keyed) return render(c.enqueue_many_unique(jobs, now));
  return render(c.enqueue_many(jobs, now));
}

json call_complete_many(Client& c, Args& a) {
  auto items = lease_items(a.take("items"), true);
  auto now = a.opt_num("now");
  if (!a.has("next")) {
    a.done();
    return render(c.complete_many(items, now));
  }
  Args next(a.take("next"));
  auto queue = next.str("queue");
  auto ttl = next.num("ttl");
  auto max = next.integer("max");
  next.done();
  a.done();
  return render(c.complete_many_and_claim(items, queue, ttl, max, now));
}

json call_renew_many(Client& c, Args& a) {
  auto items = lease_items(a.take("items"), false);
  auto ttl = a.num("ttl");
  auto now = a.opt_num("now");
  a.done();
  return render(c.renew_many(items, ttl, now));
}

json call_cancel(Client& c, Args& a) {
  auto id = a.str("id");
  a.done();
  return json(c.cancel(id));
}

json call_job(Client& c, Args& a) {
  auto id = a.str("id");
  a.done();
  return render(c.job(id));
}

json call_queue_config(Client& c, Args& a) {
  auto queue = a.str("queue");
  auto s = queue_settings(a);
  a.done();
  return json(c.queue_config(queue, s));
}

// group_config's settings: a JSON null removes one (kInherit).
json call_group_config(Client& c, Args& a) {
  auto queue = a.str("queue"), group = a.str("group");
  fenceq::GroupSettings s;
  const auto limit = [&](const char* k, std::optional<std::optional<std::int64_t>>& out) {
    if (a.take_null(k)) {
      out = fenceq::kInherit;
    } else if (a.has(k)) {
      out = a.integer(k);
    }
  };
  limit("max_leased", s.max_leased);
  limit("rate", s.rate);
  if (a.take_null("per")) {
    s.per = fenceq::kInherit;
  } else if (a.has("per")) {
    s.per = a.num("per");
  }
  a.done();
  return json(c.group_config(queue, group, s));
}

json call_await_job(Client& c, Args& a) {
  auto id = a.str("id");
  auto wait = a.opt_num("wait").value_or(0);
  a.done();
  return render(c.await_job(id, wait));
}

json call_schedule_set(Client& c, Args& a) {
  auto name = a.str("name"), cron = a.str("cron");
  ScheduleOptions o;
  if (auto v = a.opt_str("tz")) o.tz = *v;
  if (auto v = a.opt_str("queue")) o.queue = *v;
  if (a.has("payload")) o.payload = payload_of(a.take("payload"));
  if (auto v = a.opt_int("priority")) o.priority = *v;
  if (auto v = a.opt_int("max_attempts")) o.max_attempts = *v;
  a.done();
  return json(c.schedule_set(name, cron, o));
}

json call_schedule_delete(Client& c, Args& a) {
  auto name = a.str("name");
  a.done();
  return json(c.schedule_delete(name));
}

json call_schedule_list(Client& c, Args& a) {
  a.done();
  return render(c.schedule_list());
}

json call_enqueue_and_wait(Client& c, Args& a) {
  auto id = a.str("id");
  auto wait = a.opt_num("wait").value_or(0);
  auto o = enqueue_options(a);
  a.done();
  return render(c.enqueue_and_wait(id, o, wait));
}

json call_results(Client& c, Args& a) {
  json ids = a.take("ids");
  if (!ids.is_array()) throw Unsupported("ids is not an array");
  std::vector<std::string> v;
  for (const auto& id : ids) {
    if (!id.is_string()) throw Unsupported("ids: an id is not a str");
    v.push_back(id.get<std::string>());
  }
  a.done();
  return render(c.results(v));
}

json call_snooze(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto fence = a.integer("fence");
  auto delay = a.num("delay");
  auto now = a.opt_num("now");
  a.done();
  return json(c.snooze(id, owner, fence, delay, now));
}

json call_step_save(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto fence = a.integer("fence");
  auto step = a.str("step");
  auto value = payload_of(a.take("value"));  // required: the client always sends it (nil too)
  auto now = a.opt_num("now");
  a.done();
  return json(c.step_save(id, owner, fence, step, value, now));
}

json call_suspend(Client& c, Args& a) {
  auto id = a.str("id"), owner = a.str("owner");
  auto fence = a.integer("fence");
  auto timeout = a.num("timeout");
  auto how = OnTimeout::retry;
  if (auto v = a.opt_str("on_timeout")) {
    // An enum: neither retry nor fail is a request this client cannot make.
    if (*v != "retry" && *v != "fail") throw Unsupported("on_timeout " + *v);
    how = *v == "fail" ? OnTimeout::fail : OnTimeout::retry;
  }
  auto now = a.opt_num("now");
  a.done();
  auto token = c.suspend(id, owner, fence, timeout, how, now);
  return token ? json(*token) : json(false);  // false: the lease was not current
}

json call_signal(Client& c, Args& a) {
  auto token = a.str("token");
  // Left out or nil: the client leaves it out (the daemon's nil either way).
  auto value = a.has("value") ? payload_of(a.take("value")) : std::nullopt;
  auto now = a.opt_num("now");
  a.done();
  return json(c.signal(token, value, now));
}

json call_retry_many(Client& c, Args& a) {
  auto queue = a.str("queue");
  auto filter = bulk_filter(a);
  a.done();
  return render(c.retry_many(queue, filter));
}

json call_cancel_many(Client& c, Args& a) {
  auto queue = a.str("queue");
  auto filter = bulk_filter(a);
  a.done();
  return render(c.cancel_many(queue, filter));
}

// One adapter: at most one client at a time, made by `connect`.
class Session {
 public:
  json handle(const std::string& op, const json& args) {
    if (op == "hello") return {{"client", "cpp"}, {"version", "0.1.0"}};
    if (op == "connect") {
      client_.reset();  // the old client closes before the new one connects
      if (!args.contains("endpoint") || !args["endpoint"].is_string() ||
          !args.contains("timeout") || !args["timeout"].is_number()) {
        throw AdapterError("connect needs endpoint (str) and timeout (number)");
      }
      auto ms = std::chrono::milliseconds(
          static_cast<std::int64_t>(args["timeout"].get<double>() * 1000));
      client_ = std::make_unique<Client>(args["endpoint"].get<std::string>(), ClientOptions{ms});
      return true;
    }
    if (op == "close") {
      client_.reset();
      return true;
    }
    if (op == "close_keep") {
      // A Client closes when it is destroyed: there is no closed Client left
      // to call (PROTOCOL.md "Client errors": no `closed` in C++ either).
      throw Unsupported("a fenceq::Client has no close(): it closes when destroyed");
    }
    if (op == "call_from_thread") return from_thread(args);
    auto call = op_calls().find(op);
    if (call == op_calls().end()) throw Unsupported("no op " + op + " in this adapter");
    if (!client_) throw AdapterError("a protocol op before connect");
    Args a(args);
    return call->second(*client_, a);
  }

  // `op` from a second thread, `after` seconds into `hold`, the call this
  // (the client's own) thread makes meanwhile: each answer as
  // {"ok": true, "result": R} or {"ok": false, "error": {code, message}}.
  json from_thread(const json& args) {
    if (!args.contains("op") || !args["op"].is_string() || !args.contains("hold") ||
        !args["hold"].is_object() || !args["hold"].contains("op") ||
        !args["hold"]["op"].is_string()) {
      throw AdapterError("call_from_thread needs op (str) and hold ({op, args})");
    }
    const auto after = std::chrono::milliseconds(
        static_cast<std::int64_t>(args.value("after", 0.3) * 1000));
    json second;
    std::thread thread([&] {
      std::this_thread::sleep_for(after);
      second = outcome(args["op"].get<std::string>(), args.value("args", json::object()));
    });
    json owner = outcome(args["hold"]["op"].get<std::string>(),
                         args["hold"].value("args", json::object()));
    thread.join();
    return {{"thread", second}, {"owner", owner}};
  }

  // One call's answer, without seq.
  json outcome(const std::string& op, const json& args) {
    try {
      return {{"ok", true}, {"result", handle(op, args)}};
    } catch (const Error& e) {
      return failed(e.code(), e.what());
    } catch (const Unsupported& e) {
      return failed("unsupported", e.what());
    } catch (const std::exception& e) {
      return failed("adapter", e.what());
    }
  }

  static json failed(const std::string& code, const std::string& message) {
    return {{"ok", false}, {"error", {{"code", code}, {"message", message.empty() ? code : message}}}};
  }

 private:
  std::unique_ptr<Client> client_;
};

json answer(Session& session, const std::string& line) {
  json request = json::parse(line, nullptr, false);
  if (request.is_discarded() || !request.is_object() || !request.contains("op") ||
      !request["op"].is_string()) {
    json out = Session::failed("adapter", "not a request line: " + line.substr(0, 200));
    out["seq"] = nullptr;
    return out;
  }
  json out = session.outcome(request["op"], request.value("args", json::object()));
  out["seq"] = request.value("seq", json(nullptr));
  return out;
}

}  // namespace
}  // namespace fenceq::conformance

int main() {
  std::ios::sync_with_stdio(false);
  fenceq::conformance::Session session;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    // Invalid UTF-8 in a string the daemon sent is written replaced, not thrown.
    std::cout << fenceq::conformance::answer(session, line)
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n'
              << std::flush;
  }
  return 0;
}
