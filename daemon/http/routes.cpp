#include "http/routes.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "http/dashboard_page.hpp"
#include "http/respond.hpp"

namespace fenceq::daemon::http {
namespace {

using protocol::Op;

// One request as its handler sees it.
struct Call {
  Site& site;
  MHD_Connection* c;
  void** state;
  std::string_view path;
  std::string user;  // who authenticated ("" on an open route)

  std::optional<std::string> arg(const char* name) const { return http::arg(c, name); }
  // A query argument that must be there and not empty (400 otherwise).
  std::string need(const char* name) const {
    auto v = arg(name);
    if (!v || v->empty()) throw ApiError(400, "bad_request", std::string("missing ") + name);
    return *v;
  }
  // A number argument, when there is one (400 when it is not a number).
  std::optional<double> number(const char* name) const {
    auto v = arg(name);
    if (!v || v->empty()) return std::nullopt;
    std::size_t used = 0;
    double d = 0;
    try {
      d = std::stod(*v, &used);
    } catch (const std::logic_error&) {  // not a number, or out of range
    }
    if (used == 0 || used != v->size()) throw ApiError(400, "bad_request", std::string("bad ") + name);
    return d;
  }
  MHD_Result send(protocol::Request r, Kind kind) {
    return site.bridge.start(c, state, std::move(r), kind);
  }
};

using Handler = MHD_Result (*)(Call&);

// Who may call a route.
enum class Gate {
  open,    // everyone who can reach the port
  user,    // an authenticated user
  action,  // an authenticated user, from the dashboard's page, not read-only
};

struct Route {
  std::string_view path;
  Gate gate;  // GET (and HEAD) for open and user, POST for action
  Handler handler;
};

// --- open ---

MHD_Result metrics(Call& call) {
  protocol::Request r;
  r.op = Op::metrics;
  return call.send(std::move(r), Kind::metrics);
}

MHD_Result healthz(Call& call) {
  // A read in a transaction of the serving loop: it fails, with the reason,
  // when the store cannot be reached or the daemon is stopping.
  protocol::Request r;
  r.op = Op::state;
  r.id = "";
  return call.send(std::move(r), Kind::health);
}

// --- the dashboard's reads ---

MHD_Result page(Call& call) {
  return reply(call.c, 200, std::string(dashboard_page()), "text/html; charset=utf-8", true);
}

MHD_Result session(Call& call) {
  const auto& o = call.site.options;
  return reply_json(call.c, 200,
                    json{{"ok", true},
                         {"result",
                          {{"user", call.user},
                           {"csrf", call.site.auth.token(call.user)},
                           {"read_only", o.read_only},
                           {"store", o.store},
                           {"clock", o.clock},
                           {"version", std::string(protocol::kVersion)}}}});
}

MHD_Result overview(Call& call) {
  protocol::Request r;
  r.op = Op::stats;
  return call.send(std::move(r), Kind::overview);
}

MHD_Result job(Call& call) {
  auto id = call.arg("id");
  if (!id) throw ApiError(400, "bad_request", "missing id");
  protocol::Request r;
  r.op = Op::job;
  r.id = *id;
  return call.send(std::move(r), Kind::api);
}

// The page's order and its cursor: after, and after_created unless by id.
void read_order(const Call& call, protocol::Request& r) {
  if (auto o = call.arg("order"); o && !o->empty()) {
    auto order = protocol::order_from_name(*o);
    if (!order) throw ApiError(400, "invalid_argument", "unknown order " + *o);
    r.order = *order;
  }
  // The next page's cursor, as the last page's reply gave it.
  r.after = call.arg("after").value_or("");
  if (r.order != ListOrder::id && !r.after.empty()) {
    // A number, finite, as the codec reads one (nan and inf parse).
    try {
      r.after_created = std::stod(call.arg("after_created").value_or(""));
    } catch (const std::exception&) {
    }
    if (!r.after_created || !std::isfinite(*r.after_created)) {
      throw ApiError(400, "invalid_argument", "bad after_created");
    }
  }
}

MHD_Result jobs(Call& call) {
  protocol::Request r;
  r.op = Op::list;
  if (auto q = call.arg("queue"); q && !q->empty()) {
    r.queue = *q;
    r.all_queues = false;
  }
  if (auto st = call.arg("state"); st && !st->empty()) {
    r.status = protocol::status_from_name(*st);
    if (!r.status) throw ApiError(400, "invalid_argument", "unknown state " + *st);
  }
  r.limit = 50;
  if (auto n = call.arg("limit")) {
    try {
      r.limit = std::clamp<std::int64_t>(std::stoll(*n), 1, protocol::kMaxListLimit);
    } catch (const std::exception&) {
      throw ApiError(400, "invalid_argument", "bad limit");
    }
  }
  r.prefix = call.arg("prefix").value_or("");
  read_order(call, r);
  return call.send(std::move(r), Kind::jobs);
}

// --- the dashboard's actions ---

// Logs the action at info (who, what, which job or queue) and sends it.
MHD_Result act(Call& call, protocol::Request r) {
  const std::string_view name = call.path.substr(std::strlen("/api/"));
  spdlog::info("dashboard: {} {} {}", call.user, name,
               !r.id.empty()                        ? "job " + r.id
               : r.all_queues && r.op == Op::purge ? std::string("every queue")
                                                    : "queue " + r.queue);
  return call.send(std::move(r), Kind::api);
}

MHD_Result retry(Call& call) {
  protocol::Request r;
  r.op = Op::retry;
  r.id = call.need("id");
  return act(call, std::move(r));
}

MHD_Result cancel(Call& call) {
  protocol::Request r;
  r.op = Op::cancel;
  r.id = call.need("id");
  return act(call, std::move(r));
}

MHD_Result set_paused(Call& call, bool paused) {
  protocol::Request r;
  r.op = Op::queue_config;
  r.queue = call.need("queue");
  r.paused = paused;
  return act(call, std::move(r));
}
MHD_Result pause(Call& call) { return set_paused(call, true); }
MHD_Result resume(Call& call) { return set_paused(call, false); }

MHD_Result limit(Call& call) {
  protocol::Request r;
  r.op = Op::queue_config;
  r.queue = call.need("queue");
  if (auto v = call.number("max_leased")) r.max_leased = static_cast<std::int64_t>(*v);
  if (auto v = call.number("rate")) r.rate = static_cast<std::int64_t>(*v);
  if (auto v = call.number("per")) r.per = *v;
  return act(call, std::move(r));
}

MHD_Result purge(Call& call) {
  protocol::Request r;
  r.op = Op::purge;
  if (auto q = call.arg("queue"); q && !q->empty()) {
    r.queue = *q;
    r.all_queues = false;
  }
  auto older = call.number("older_than");
  if (!older) throw ApiError(400, "bad_request", "missing older_than");
  r.older_than = *older;
  return act(call, std::move(r));
}

constexpr Route kRoutes[] = {
    {"/metrics", Gate::open, &metrics},
    {"/healthz", Gate::open, &healthz},
    {"/", Gate::user, &page},
    {"/api/session", Gate::user, &session},
    {"/api/overview", Gate::user, &overview},
    {"/api/job", Gate::user, &job},
    {"/api/jobs", Gate::user, &jobs},
    {"/api/retry", Gate::action, &retry},
    {"/api/cancel", Gate::action, &cancel},
    {"/api/pause", Gate::action, &pause},
    {"/api/resume", Gate::action, &resume},
    {"/api/limit", Gate::action, &limit},
    {"/api/purge", Gate::action, &purge},
};

const Route* find(std::string_view path, Gate gate) {
  for (const auto& r : kRoutes) {
    if (r.path == path && r.gate == gate) return &r;
  }
  return nullptr;
}

// An authenticated request to the dashboard (/ or /api/...).
MHD_Result dashboard(Call& call, bool get, bool post) {
  const std::string_view api = call.path.starts_with("/api/") ? call.path.substr(5) : "";
  if (get) {
    if (const Route* r = find(call.path, Gate::user)) return r->handler(call);
    return api_error(call.c, 404, "not_found", "no such API: " + std::string(api));
  }
  if (!post || call.path == "/") return method_not_allowed(call.c);
  if (call.site.options.read_only) {
    return api_error(call.c, 405, "read_only", "this dashboard is read-only (--http-read-only)");
  }
  if (auto why = call.site.auth.refuse_action(call.c, call.user)) {
    spdlog::warn("dashboard: {} refused for {}: {}", api, call.user, *why);
    return api_error(call.c, 403, "forbidden", *why);
  }
  if (const Route* r = find(call.path, Gate::action)) return r->handler(call);
  return api_error(call.c, 404, "bad_request", "unknown action");
}

}  // namespace

MHD_Result dispatch(Site& site, MHD_Connection* c, const char* url, const char* method,
                    void** state) {
  Call call{site, c, state, url, {}};
  const bool get = std::strcmp(method, "GET") == 0 || std::strcmp(method, "HEAD") == 0;
  const bool post = std::strcmp(method, "POST") == 0;
  try {
    if (const Route* r = find(call.path, Gate::open)) {
      return get ? r->handler(call) : method_not_allowed(c);
    }
    // Without an auth file there is no dashboard: job data is not served to
    // whoever can reach the port.
    if (!site.auth.enabled() || !(call.path == "/" || call.path.starts_with("/api/"))) {
      return reply(c, 404, "not found\n");
    }
    call.user = site.auth.authenticate(c);
    if (call.user.empty()) return unauthorized(c);
    return dashboard(call, get, post);
  } catch (const ApiError& e) {
    return api_error(c, e.status(), e.code(), e.what());
  }
}

}  // namespace fenceq::daemon::http
