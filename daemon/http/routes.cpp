#include "http/routes.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/dashboard_page.hpp"
#include "http/respond.hpp"
#include "base/logging.hpp"

namespace fenceq::daemon::http {
namespace {

using protocol::Op;
namespace req = protocol::req;

// One request as its handler sees it.
struct Call {
  Site& site;
  MHD_Connection* c;
  void** state;
  std::string_view path;
  std::string user;  // who authenticated ("" on an open route)

  std::optional<std::string> arg(const char* name) const { return http::arg(c, name); }
  // Every value of the query argument `name`, in the order given
  // (?id=a&id=b: {"a", "b"}; arg() reads the first only). One given with no
  // value (?id) is "". Read with their sizes: a %00 in a value stays.
  std::vector<std::string> args(const char* name) const {
    struct Found {
      std::string_view name;
      std::vector<std::string> values;
    } found{name, {}};
    MHD_get_connection_values_n(
        c, MHD_GET_ARGUMENT_KIND,
        [](void* cls, MHD_ValueKind, const char* key, std::size_t key_size, const char* value,
           std::size_t value_size) -> MHD_Result {
          auto* f = static_cast<Found*>(cls);
          if (std::string_view(key, key_size) == f->name) {
            f->values.emplace_back(value ? std::string(value, value_size) : std::string());
          }
          return MHD_YES;
        },
        &found);
    return std::move(found.values);
  }
  // A query argument that must be there and not empty (400 otherwise).
  std::string need(const char* name) const {
    auto v = arg(name);
    if (!v || v->empty()) throw ApiError(400, "bad_request", std::string("missing ") + name);
    return *v;
  }
  // Number arguments, when there is one, read as the wire reads its numbers:
  // an integer is decimal digits (no fraction, exponent or 0x), a real a
  // finite decimal; 400 for anything else.
  std::optional<std::int64_t> integer(const char* name) const {
    auto v = arg(name);
    if (!v || v->empty()) return std::nullopt;
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || end != v->data() + v->size()) bad(name, "an integer");
    return n;
  }
  std::optional<double> real(const char* name) const {
    auto v = arg(name);
    if (!v || v->empty()) return std::nullopt;
    double d = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), d);
    if (ec != std::errc() || end != v->data() + v->size() || !std::isfinite(d)) {
      bad(name, "a finite decimal number");
    }
    return d;
  }
  [[noreturn]] static void bad(const char* name, const char* what) {
    throw ApiError(400, "bad_request", std::string("field '") + name + "' must be " + what);
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

MHD_Result metrics(Call& call) { return call.send(req::Metrics{}, Kind::metrics); }

MHD_Result healthz(Call& call) {
  // A read in a transaction of the serving loop: it fails, with the reason,
  // when the store cannot be reached or the daemon is stopping.
  return call.send(req::State{""}, Kind::health);
}

// --- the dashboard's reads ---

MHD_Result page(Call& call) {
  return reply(call.c, 200, std::string(dashboard_page()), "text/html; charset=utf-8", true);
}
MHD_Result style(Call& call) {
  return reply(call.c, 200, std::string(dashboard_style()), "text/css; charset=utf-8", true);
}
MHD_Result script(Call& call) {
  return reply(call.c, 200, std::string(dashboard_script()), "text/javascript; charset=utf-8", true);
}

MHD_Result session(Call& call) {
  const auto& o = call.site.options;
  // The browser that logged in is known from now on (Auth::device_cookie): a
  // guesser's failures behind the same address do not lock it out.
  const std::string cookie = call.site.auth.device_cookie(call.user);
  return reply_json(call.c, 200,
                    json{{"ok", true},
                         {"result",
                          {{"user", call.user},
                           {"csrf", call.site.auth.token(call.user)},
                           {"read_only", o.read_only},
                           {"store", o.store},
                           {"clock", o.clock},
                           {"version", std::string(protocol::kVersion)}}}},
                    cookie.c_str());
}

MHD_Result overview(Call& call) { return call.send(req::Stats{}, Kind::overview); }

MHD_Result job(Call& call) {
  auto id = call.arg("id");
  if (!id) throw ApiError(400, "bad_request", "missing id");
  return call.send(req::Job{*id}, Kind::api);
}

// The state and result of each job a job's page links to (its parents and
// its blocked children, C3.13), in one `results` request: ?id=A&id=B...,
// 1..kMaxIds ids (what a request line within the server's 16 KiB of
// request holds with room to spare; the page asks for 100 at a time). Each
// id once in the answer, nil for one that does not exist (a parent purged
// once done).
MHD_Result results(Call& call) {
  constexpr std::size_t kMaxIds = 100;
  req::Results r;
  r.ids = call.args("id");
  // states=1: the states alone, no result bodies (the job page).
  r.states_only = call.arg("states").value_or("") == "1";
  if (r.ids.empty()) throw ApiError(400, "bad_request", "missing id");
  if (r.ids.size() > kMaxIds) {
    throw ApiError(400, "invalid_argument",
                   "too many ids: " + std::to_string(r.ids.size()) + " (at most " +
                       std::to_string(kMaxIds) + ")");
  }
  return call.send(std::move(r), Kind::api);
}

// The page's order and its cursor: after, and after_created unless by id.
void read_order(const Call& call, req::List& r) {
  if (auto o = call.arg("order"); o && !o->empty()) {
    auto order = protocol::order_from_name(*o);
    if (!order) throw ApiError(400, "invalid_argument", "unknown order " + *o);
    r.order = *order;
  }
  // The next page's cursor, as the last page's reply gave it.
  if (auto after = call.arg("after"); after && !after->empty()) r.cursor = *after;
  if (r.order != ListOrder::id && r.cursor) {
    r.after_created = call.real("after_created");
    if (!r.after_created) Call::bad("after_created", "a finite decimal number");
  }
}

MHD_Result jobs(Call& call) {
  req::List r;
  if (auto q = call.arg("queue"); q && !q->empty()) r.queue = *q;
  if (auto st = call.arg("state"); st && !st->empty()) {
    r.status = protocol::status_from_name(*st);
    if (!r.status) throw ApiError(400, "invalid_argument", "unknown state " + *st);
  }
  r.limit = std::clamp<std::int64_t>(call.integer("limit").value_or(50), 1, protocol::kMaxListLimit);
  if (auto p = call.arg("prefix"); p && !p->empty()) r.prefix = *p;
  read_order(call, r);
  return call.send(std::move(r), Kind::jobs);
}

// --- the dashboard's actions ---

// Logs the action at info (who, what: which job or queue, and a bulk
// action's filter) and sends it.
MHD_Result act(Call& call, protocol::Request r, const std::string& what,
               const std::string& filter = {}) {
  const std::string_view name = call.path.substr(std::strlen("/api/"));
  spdlog::info("dashboard: {} {} {}{}", call.user, name, what, filter);
  return call.send(std::move(r), Kind::api);
}
std::string of_job(const std::string& id) { return "job " + client_text(id); }
std::string of_queue(const std::string& queue) { return "queue " + client_text(queue); }

MHD_Result retry(Call& call) {
  req::Retry r{call.need("id")};
  const auto what = of_job(r.id);
  return act(call, std::move(r), what);
}

MHD_Result cancel(Call& call) {
  req::Cancel r{call.need("id")};
  const auto what = of_job(r.id);
  return act(call, std::move(r), what);
}

// Retry or cancel, by filter, one page of a queue's jobs (C3.16): the
// wire's retry_many and cancel_many, answered {"count": N, "more": bool}
// (the page loops while `more`). `queue` is needed; `state` must be one the
// op changes (retry_many: dead, cancelled; cancel_many: ready, delayed,
// leased, blocked, dead; none: all of them), `limit` in 1..kMaxBulkLimit
// (default kDefaultBulkLimit): checked here, as the daemon's codec would, so
// that a bad one is a coded 400 that names the choices and changes nothing.
MHD_Result bulk(Call& call, Op op) {
  req::BulkFilter r;
  const std::string queue = call.need("queue");
  if (auto st = call.arg("state"); st && !st->empty()) {
    const std::vector<JobStatus> can =
        op == Op::retry_many
            ? std::vector<JobStatus>{JobStatus::dead, JobStatus::cancelled}
            : std::vector<JobStatus>{JobStatus::ready,   JobStatus::delayed,
                                     JobStatus::leased,  JobStatus::blocked,
                                     JobStatus::suspended, JobStatus::dead};
    r.status = protocol::status_from_name(*st);
    if (!r.status || std::find(can.begin(), can.end(), *r.status) == can.end()) {
      std::string names;
      for (auto s : can) {
        names += (names.empty() ? "" : ", ") + std::string(protocol::status_name(s));
      }
      throw ApiError(400, "invalid_argument",
                     "field 'state' must be one of " + names + " for " +
                         std::string(protocol::op_name(op)) + ", not " + client_text(*st));
    }
  }
  r.prefix = call.arg("prefix").value_or("");
  if (auto g = call.arg("group"); g && !g->empty()) r.group = *g;
  r.limit = call.integer("limit").value_or(protocol::kDefaultBulkLimit);
  if (r.limit < 1 || r.limit > protocol::kMaxBulkLimit) {
    throw ApiError(400, "invalid_argument",
                   "field 'limit' must be in [1, " + std::to_string(protocol::kMaxBulkLimit) + "]");
  }
  std::string filter;
  if (r.status) filter += " state " + std::string(protocol::status_name(*r.status));
  if (!r.prefix.empty()) filter += " prefix " + client_text(r.prefix);
  if (r.group) filter += " group " + client_text(*r.group);
  filter += " limit " + std::to_string(r.limit);
  protocol::Request request = op == Op::retry_many
                                  ? protocol::Request{req::RetryMany{r, queue}}
                                  : protocol::Request{req::CancelMany{r, queue}};
  return act(call, std::move(request), of_queue(queue), filter);
}
MHD_Result retry_many(Call& call) { return bulk(call, Op::retry_many); }
MHD_Result cancel_many(Call& call) { return bulk(call, Op::cancel_many); }

MHD_Result set_paused(Call& call, bool paused) {
  req::QueueConfig r;
  r.queue = call.need("queue");
  r.paused = paused;
  const auto what = of_queue(r.queue);
  return act(call, std::move(r), what);
}
MHD_Result pause(Call& call) { return set_paused(call, true); }
MHD_Result resume(Call& call) { return set_paused(call, false); }

MHD_Result limit(Call& call) {
  req::QueueConfig r;
  r.queue = call.need("queue");
  r.max_leased = call.integer("max_leased");
  r.rate = call.integer("rate");
  r.per = call.real("per");
  // Each group's limits (C3.11), set by their own button: only what is given.
  r.group_max_leased = call.integer("group_max_leased");
  r.group_rate = call.integer("group_rate");
  r.group_per = call.real("group_per");
  const auto what = of_queue(r.queue);
  return act(call, std::move(r), what);
}

MHD_Result purge(Call& call) {
  req::Purge r;
  if (auto q = call.arg("queue"); q && !q->empty()) r.queue = *q;
  auto older = call.real("older_than");
  if (!older) throw ApiError(400, "bad_request", "missing older_than");
  r.older_than = *older;
  const auto what = r.queue ? of_queue(*r.queue) : std::string("every queue");
  return act(call, std::move(r), what);
}

constexpr Route kRoutes[] = {
    {"/metrics", Gate::open, &metrics},
    {"/healthz", Gate::open, &healthz},
    {"/", Gate::user, &page},
    {"/dashboard.css", Gate::user, &style},
    {"/dashboard.js", Gate::user, &script},
    {"/api/session", Gate::user, &session},
    {"/api/overview", Gate::user, &overview},
    {"/api/job", Gate::user, &job},
    {"/api/results", Gate::user, &results},
    {"/api/jobs", Gate::user, &jobs},
    {"/api/retry", Gate::action, &retry},
    {"/api/cancel", Gate::action, &cancel},
    {"/api/retry_many", Gate::action, &retry_many},
    {"/api/cancel_many", Gate::action, &cancel_many},
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

// Whether the Host header names this dashboard: the listen address,
// localhost, 127.0.0.1, [::1] or an --http-allowed-hosts name, in any case,
// with any port. A page of another site whose name resolves to 127.0.0.1
// (DNS rebinding) names its own. No Host at all (HTTP/1.0) is let through:
// browsers always send one.
bool host_allowed(const HttpOptions& o, const char* host_header) {
  if (!host_header) return true;
  std::string_view h(host_header);
  if (h.starts_with('[')) {
    h = h.substr(0, h.find(']') == std::string_view::npos ? h.size() : h.find(']') + 1);
  } else if (auto colon = h.find(':'); colon != std::string_view::npos) {
    h = h.substr(0, colon);
  }
  auto same = [&](std::string_view name) {
    return name.size() == h.size() &&
           std::equal(name.begin(), name.end(), h.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) ==
                    std::tolower(static_cast<unsigned char>(b));
           });
  };
  const std::string listen_host = o.listen.substr(0, o.listen.rfind(':'));
  if (same("localhost") || same("127.0.0.1") || same("[::1]") || same(listen_host)) return true;
  return std::any_of(o.allowed_hosts.begin(), o.allowed_hosts.end(), same);
}

// An authenticated request to the dashboard (/, its files, or /api/...).
MHD_Result dashboard(Call& call, bool get, bool post) {
  const std::string_view api = call.path.starts_with("/api/") ? call.path.substr(5) : "";
  if (get) {
    if (const Route* r = find(call.path, Gate::user)) return r->handler(call);
    return api_error(call.c, 404, "not_found", "no such API: " + std::string(api));
  }
  if (!post || !call.path.starts_with("/api/")) return method_not_allowed(call.c);
  if (call.site.options.read_only) {
    return api_error(call.c, 405, "read_only", "this dashboard is read-only (--http-read-only)");
  }
  if (auto why = call.site.auth.refuse_action(call.c, call.user)) {
    spdlog::warn("dashboard: {} refused for {}: {}", client_text(api), call.user, *why);
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
    if (!site.auth.enabled() ||
        !(call.path == "/" || call.path.starts_with("/api/") || find(call.path, Gate::user))) {
      return reply(c, 404, "not found\n");
    }
    if (!host_allowed(site.options, header(c, "Host"))) {
      return api_error(c, 421, "bad_host",
                       "this dashboard is not served under the host " +
                           client_text(header(c, "Host")) + " (--http-allowed-hosts)");
    }
    const Login login = site.auth.authenticate(c);
    switch (login.is) {
      case Login::Is::missing:
      case Login::Is::refused: return unauthorized(c);
      case Login::Is::throttled: return too_many_logins(c, login.retry_after);
      case Login::Is::user: break;
    }
    call.user = login.user;
    return dashboard(call, get, post);
  } catch (const ApiError& e) {
    return api_error(c, e.status(), e.code(), e.what());
  }
}

}  // namespace fenceq::daemon::http
