#include "http_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "dashboard_page.hpp"
#include "fd_guard.hpp"
#include "fenceq_protocol/codec.hpp"

namespace fenceq::daemon {
namespace {

using Steady = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr unsigned kMaxConnections = 64;
constexpr std::size_t kEvictFrom = 48;
constexpr std::size_t kMaxHeaderBytes = 16 * 1024;  // MHD's per-connection memory pool
constexpr unsigned kIdleTimeoutSeconds = 10;
constexpr std::chrono::milliseconds kRequestTimeout{5000};
// The dashboard's throughput history: samples of the counters, taken when a
// dashboard asks for the overview (about every 2 s while one is open), at
// least kSampleEvery apart, the last kHistory of them.
constexpr double kSampleEvery = 0.9;
constexpr std::size_t kHistory = 300;
// A payload preview: at most this much of it (its full size is said).
constexpr std::size_t kPreviewText = 16 * 1024;
constexpr std::size_t kPreviewBinary = 2 * 1024;
constexpr const char* kCsrfHeader = "X-Fenceq-Csrf";

// What an answer from the serving loop becomes.
enum class Kind {
  metrics,   // Prometheus text
  health,    // 200 "ok", or 503 and why
  api,       // JSON {"ok": true, "result": ...} or {"ok": false, "error": ...}
  overview,  // api, with the throughput history and the daemon's facts
  jobs,      // api, a page of `list` with the next page's cursor
};

// One request waiting for the serving loop's answer.
struct Pending {
  MHD_Connection* connection = nullptr;
  std::uint64_t rid = 0;
  protocol::Request request;
  Kind kind = Kind::metrics;
  Steady::time_point deadline;
  bool done = false;
  int status = 503;
  std::string body = "fenceqd did not answer\n";
  std::string type = "text/plain; charset=utf-8";
};

std::string hex(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string random_token() {
  unsigned char raw[16];
  std::size_t got = 0;
  while (got < sizeof raw) {
    const auto n = ::getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0) throw std::runtime_error("cannot read random bytes for the dashboard's tokens");
    got += static_cast<std::size_t>(n);
  }
  return hex(std::string_view(reinterpret_cast<const char*>(raw), sizeof raw));
}

// Equal strings, in a time that does not depend on where they differ.
bool same(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

// A payload as the dashboard shows it: text or hex, cut, with its full size.
json preview(const json& p) {
  if (p.is_null()) return nullptr;
  if (p.is_binary()) {
    const auto& b = p.get_binary();
    const std::string bytes(b.begin(), b.end());
    const std::size_t n = std::min(bytes.size(), kPreviewBinary);
    return json{{"size", bytes.size()}, {"binary", true}, {"hex", hex(bytes.substr(0, n))},
                {"truncated", n < bytes.size()}};
  }
  const std::string text = p.get<std::string>();
  std::size_t n = std::min(text.size(), kPreviewText);
  while (n < text.size() && n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return json{{"size", text.size()}, {"binary", false}, {"text", text.substr(0, n)},
              {"truncated", n < text.size()}};
}

// JSON text; bytes that are not UTF-8 (a user name from the auth file, a row
// written into the database by hand) become U+FFFD instead of an exception.
std::string text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int status_of(const std::string& code) {
  if (code == "bad_request" || code == "invalid_argument") return 400;
  if (code == "unavailable") return 503;
  return 500;
}

}  // namespace

std::map<std::string, std::string> load_auth_file(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    throw std::runtime_error("--http-auth-file " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw std::runtime_error("--http-auth-file " + path + ": not a file");
  const auto mode = st.st_mode & 07777;
  // Passwords: readable by the daemon's user alone, or by its own group too
  // (0640 with the group fenceqd runs as); never by others, never writable
  // but by its owner.
  const bool others = (mode & 0007) != 0;
  const bool group_writes = (mode & 0020) != 0;
  const bool group_reads = (mode & 0040) != 0;
  if (others || group_writes || (group_reads && st.st_gid != ::getegid()) ||
      st.st_uid != ::geteuid()) {
    char m[8];
    std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(mode));
    throw std::runtime_error("--http-auth-file " + path + " (mode " + m +
                             ") must belong to fenceqd's user and be readable by it alone "
                             "(chmod 0600), or by its own group too (0640); it holds passwords");
  }
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--http-auth-file " + path + ": cannot read it");
  std::map<std::string, std::string> users;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    const auto colon = line.find(':');
    if (colon == 0 || colon == std::string::npos || colon + 1 == line.size()) {
      throw std::runtime_error("--http-auth-file " + path + " line " + std::to_string(n) +
                               ": expected user:password");
    }
    users[line.substr(0, colon)] = line.substr(colon + 1);
  }
  if (users.empty()) throw std::runtime_error("--http-auth-file " + path + ": no user:password line");
  return users;
}

struct HttpServer::Impl {
  zmq::context_t& ctx;
  HttpOptions options;
  std::map<std::string, std::string> users;   // empty: no dashboard
  std::map<std::string, std::string> tokens;  // user -> CSRF token, for this run
  MHD_Daemon* daemon = nullptr;
  int port = 0;

  // Connections by age, and whether each has sent a whole header (only the
  // MHD thread touches these).
  struct Conn {
    int fd = -1;
    Steady::time_point since;
    bool requested = false;
  };
  std::map<MHD_Connection*, Conn> conns;

  // The bridge: requests for the serving loop, and their answers.
  std::mutex mutex;
  std::deque<std::shared_ptr<Pending>> outbox;
  std::unordered_map<std::uint64_t, std::shared_ptr<Pending>> waiting;
  std::uint64_t next_rid = 1;
  int wake_fd = -1;
  std::atomic<bool> stop{false};
  std::thread bridge;

  // The throughput history (the bridge thread's alone): counters summed over
  // the queues, at a time of the steady clock.
  struct Sample {
    double t = 0;
    double claimed = 0, completed = 0, failed = 0, commits = 0;
  };
  std::deque<Sample> history;

  Impl(zmq::context_t& c, HttpOptions o) : ctx(c), options(std::move(o)) {}

  // --- the MHD thread ---

  static void notify(void* cls, MHD_Connection* c, void**, MHD_ConnectionNotificationCode toe) {
    auto* self = static_cast<Impl*>(cls);
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
      self->conns.erase(c);
      return;
    }
    const auto* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    self->conns[c] = Conn{info ? info->connect_fd : -1, Steady::now(), false};
    if (self->conns.size() <= kEvictFrom) return;
    // Full: the oldest connection that has not sent a whole header yet goes.
    // (Only this thread closes connections, and it is here: its descriptor is
    // still the connection's.)
    MHD_Connection* oldest = nullptr;
    for (auto& [conn, info2] : self->conns) {
      if (conn == c || info2.requested || info2.fd < 0) continue;
      if (!oldest || info2.since < self->conns[oldest].since) oldest = conn;
    }
    if (oldest) {
      ::shutdown(self->conns[oldest].fd, SHUT_RDWR);
      self->conns[oldest].fd = -1;  // shut once
    }
  }

  static MHD_Result reply(MHD_Connection* c, int status, const std::string& body,
                          const char* type = "text/plain; charset=utf-8",
                          bool dashboard = false) {
    MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                      MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (dashboard) {
      // Job data: never cached, never framed, no script but the page's own.
      MHD_add_response_header(r, "Cache-Control", "no-store");
      MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
      MHD_add_response_header(r, "X-Frame-Options", "DENY");
      MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
      MHD_add_response_header(
          r, "Content-Security-Policy",
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
          "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'none'");
    }
    MHD_Result ret = MHD_queue_response(c, static_cast<unsigned>(status), r);
    MHD_destroy_response(r);
    return ret;
  }

  static MHD_Result reply_json(MHD_Connection* c, int status, const json& body) {
    return reply(c, status, text(body) + "\n", "application/json", true);
  }

  static MHD_Result api_error(MHD_Connection* c, int status, const std::string& code,
                              const std::string& message) {
    return reply_json(c, status,
                      json{{"ok", false}, {"error", {{"code", code}, {"message", message}}}});
  }

  // The user the request authenticates as (HTTP Basic), or "".
  std::string authenticate(MHD_Connection* c) const {
    char* password = nullptr;
    char* user = MHD_basic_auth_get_username_password(c, &password);
    std::string who;
    if (user && password) {
      auto it = users.find(user);
      // Compared whatever the user, so the time says nothing about the name.
      const std::string expected = it != users.end() ? it->second : std::string(64, '\0');
      if (same(expected, password) && it != users.end()) who = user;
    }
    if (user) MHD_free(user);
    if (password) MHD_free(password);
    return who;
  }

  static const char* header(MHD_Connection* c, const char* name) {
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
  }
  static std::optional<std::string> arg(MHD_Connection* c, const char* name) {
    const char* v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    if (!v) return std::nullopt;
    return std::string(v);
  }

  // A POST from this dashboard's own page: same origin, with its token.
  std::optional<std::string> refuse_action(MHD_Connection* c, const std::string& user) const {
    // The Origin's host and port must be the ones the request was sent to
    // (its scheme may differ: a reverse proxy may terminate TLS in front).
    const char* origin = header(c, "Origin");
    const char* host = header(c, "Host");
    if (origin) {
      std::string_view o(origin);
      const auto scheme = o.find("://");
      if (scheme != std::string_view::npos) o.remove_prefix(scheme + 3);
      if (!host || o != host) return std::string("a request from another origin (") + origin + ")";
    }
    const char* site = header(c, "Sec-Fetch-Site");
    if (site && std::strcmp(site, "same-origin") != 0 && std::strcmp(site, "none") != 0) {
      return std::string("a ") + site + " request";
    }
    const char* token = header(c, kCsrfHeader);
    auto it = tokens.find(user);
    if (!token || it == tokens.end() || !same(it->second, token)) {
      return std::string("no valid ") + kCsrfHeader + " header (reload the dashboard)";
    }
    return std::nullopt;
  }

  // The wire request of a dashboard action, or why not.
  std::variant<protocol::Request, std::string> action(MHD_Connection* c, const std::string& name) {
    protocol::Request r;
    auto need = [&](const char* field) -> std::string {
      auto v = arg(c, field);
      if (!v || v->empty()) throw std::invalid_argument(std::string("missing ") + field);
      return *v;
    };
    auto number = [&](const char* field) -> std::optional<double> {
      auto v = arg(c, field);
      if (!v || v->empty()) return std::nullopt;
      std::size_t used = 0;
      double d = std::stod(*v, &used);
      if (used != v->size()) throw std::invalid_argument(std::string("bad ") + field);
      return d;
    };
    try {
      if (name == "retry" || name == "cancel") {
        r.op = name == "retry" ? protocol::Op::retry : protocol::Op::cancel;
        r.id = need("id");
      } else if (name == "pause" || name == "resume") {
        r.op = protocol::Op::queue_config;
        r.queue = need("queue");
        r.paused = name == "pause";
      } else if (name == "limit") {
        r.op = protocol::Op::queue_config;
        r.queue = need("queue");
        if (auto v = number("max_leased")) r.max_leased = static_cast<std::int64_t>(*v);
        if (auto v = number("rate")) r.rate = static_cast<std::int64_t>(*v);
        if (auto v = number("per")) r.per = *v;
      } else if (name == "purge") {
        r.op = protocol::Op::purge;
        auto q = arg(c, "queue");
        if (q && !q->empty()) {
          r.queue = *q;
          r.all_queues = false;
        }
        auto older = number("older_than");
        if (!older) throw std::invalid_argument("missing older_than");
        r.older_than = *older;
      } else {
        return std::string("unknown action");
      }
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return r;
  }

  static MHD_Result handle(void* cls, MHD_Connection* c, const char* url, const char* method,
                           const char*, const char*, size_t* upload_size, void** state) {
    auto* self = static_cast<Impl*>(cls);
    if (auto it = self->conns.find(c); it != self->conns.end()) it->second.requested = true;
    if (auto* pending = static_cast<std::shared_ptr<Pending>*>(*state)) {
      // Resumed: the serving loop answered, or the wait ended.
      std::shared_ptr<Pending> p = *pending;
      delete pending;
      *state = nullptr;
      return reply(c, p->status, p->body, p->type.c_str(),
                   p->kind != Kind::metrics && p->kind != Kind::health);
    }
    // Every answer is given before a body would be read: nothing here takes
    // one, so none is ever buffered.
    (void)upload_size;
    const std::string path = url;
    const bool get = std::strcmp(method, "GET") == 0 || std::strcmp(method, "HEAD") == 0;
    const bool post = std::strcmp(method, "POST") == 0;
    if (path == "/metrics" || path == "/healthz") {
      if (!get) return reply(c, 405, "method not allowed\n");
      protocol::Request r;
      if (path == "/metrics") {
        r.op = protocol::Op::metrics;
      } else {
        // A read in a transaction of the serving loop: it fails, with the
        // reason, when the store cannot be reached or the daemon is stopping.
        r.op = protocol::Op::state;
        r.id = "";
      }
      return self->start(c, state, std::move(r),
                         path == "/metrics" ? Kind::metrics : Kind::health);
    }
    // Without an auth file there is no dashboard: job data is not served to
    // whoever can reach the port.
    if (self->users.empty() || !(path == "/" || path.starts_with("/api/"))) {
      return reply(c, 404, "not found\n");
    }
    const std::string user = self->authenticate(c);
    if (user.empty()) {
      MHD_Response* r = MHD_create_response_from_buffer(
          13, const_cast<char*>("unauthorized\n"), MHD_RESPMEM_PERSISTENT);
      if (!r) return MHD_NO;
      MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
      MHD_Result ret = MHD_queue_basic_auth_fail_response(c, "fenceq", r);
      MHD_destroy_response(r);
      return ret;
    }
    if (path == "/") {
      if (!get) return reply(c, 405, "method not allowed\n");
      return reply(c, 200, std::string(kDashboardPage), "text/html; charset=utf-8", true);
    }
    const std::string api = path.substr(5);
    if (get) {
      if (api == "session") {
        return reply_json(c, 200,
                          json{{"ok", true},
                               {"result",
                                {{"user", user},
                                 {"csrf", self->tokens.at(user)},
                                 {"read_only", self->options.read_only},
                                 {"store", self->options.store},
                                 {"clock", self->options.clock},
                                 {"version", std::string(protocol::kVersion)}}}});
      }
      protocol::Request r;
      Kind kind = Kind::api;
      if (api == "overview") {
        r.op = protocol::Op::stats;
        kind = Kind::overview;
      } else if (api == "job") {
        auto id = arg(c, "id");
        if (!id) return api_error(c, 400, "bad_request", "missing id");
        r.op = protocol::Op::job;
        r.id = *id;
      } else if (api == "jobs") {
        r.op = protocol::Op::list;
        if (auto q = arg(c, "queue"); q && !q->empty()) {
          r.queue = *q;
          r.all_queues = false;
        }
        if (auto st = arg(c, "state"); st && !st->empty()) {
          r.status = protocol::status_from_name(*st);
          if (!r.status) return api_error(c, 400, "invalid_argument", "unknown state " + *st);
        }
        r.limit = 50;
        if (auto n = arg(c, "limit")) {
          try {
            r.limit = std::clamp<std::int64_t>(std::stoll(*n), 1, protocol::kMaxListLimit);
          } catch (const std::exception&) {
            return api_error(c, 400, "invalid_argument", "bad limit");
          }
        }
        r.prefix = arg(c, "prefix").value_or("");
        if (auto o = arg(c, "order"); o && !o->empty()) {
          auto order = protocol::order_from_name(*o);
          if (!order) return api_error(c, 400, "invalid_argument", "unknown order " + *o);
          r.order = *order;
        }
        // The next page's cursor, as the last page's reply gave it.
        r.after = arg(c, "after").value_or("");
        if (r.order != ListOrder::id && !r.after.empty()) {
          // A number, finite, as the codec reads one (nan and inf parse).
          try {
            r.after_created = std::stod(arg(c, "after_created").value_or(""));
          } catch (const std::exception&) {
          }
          if (!r.after_created || !std::isfinite(*r.after_created)) {
            return api_error(c, 400, "invalid_argument", "bad after_created");
          }
        }
        kind = Kind::jobs;
      } else {
        return api_error(c, 404, "not_found", "no such API: " + api);
      }
      return self->start(c, state, std::move(r), kind);
    }
    if (!post) return reply(c, 405, "method not allowed\n");
    if (self->options.read_only) {
      return api_error(c, 405, "read_only", "this dashboard is read-only (--http-read-only)");
    }
    if (auto why = self->refuse_action(c, user)) {
      spdlog::warn("dashboard: {} refused for {}: {}", api, user, *why);
      return api_error(c, 403, "forbidden", *why);
    }
    auto built = self->action(c, api);
    if (auto* why = std::get_if<std::string>(&built)) {
      return api_error(c, why->starts_with("unknown") ? 404 : 400, "bad_request", *why);
    }
    auto& r = std::get<protocol::Request>(built);
    spdlog::info("dashboard: {} {} {}", user, api,
                 !r.id.empty() ? "job " + r.id
                 : r.all_queues && r.op == protocol::Op::purge ? std::string("every queue")
                                                               : "queue " + r.queue);
    return self->start(c, state, std::move(r), Kind::api);
  }

  MHD_Result start(MHD_Connection* c, void** state, protocol::Request r, Kind kind) {
    if (stop) return reply(c, 503, "fenceqd is stopping\n");
    // Suspended before the bridge can see it, so that it is never resumed
    // first; only the bridge resumes it, and the bridge answers everything
    // it holds before it stops.
    MHD_suspend_connection(c);
    auto p = std::make_shared<Pending>();
    p->connection = c;
    p->request = std::move(r);
    p->kind = kind;
    p->deadline = Steady::now() + kRequestTimeout;
    if (kind != Kind::metrics && kind != Kind::health) {
      p->type = "application/json";
      p->body = text(json{{"ok", false},
                          {"error", {{"code", "unavailable"}, {"message", "fenceqd did not answer"}}}}) +
                "\n";
    }
    {
      std::lock_guard lock(mutex);
      p->rid = next_rid++;
      p->request.rid = protocol::Rid{p->rid};
      outbox.push_back(p);
      waiting[p->rid] = p;
    }
    // The connection's state until handle() sees it again, resumed.
    *state = new std::shared_ptr<Pending>(p);
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
    return MHD_YES;
  }

  static void completed(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
    delete static_cast<std::shared_ptr<Pending>*>(*state);
    *state = nullptr;
  }

  static void log(void*, const char* fmt, va_list ap) {
    char line[512];
    std::vsnprintf(line, sizeof line, fmt, ap);
    std::string s = line;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    spdlog::debug("http: {}", s);
  }

  // --- the bridge thread: the only user of its socket ---

  void finish(const std::shared_ptr<Pending>& p) {
    if (p->done) return;
    p->done = true;
    MHD_resume_connection(p->connection);
  }

  // The overview: stats, with the throughput history and the daemon's facts.
  json overview(json stats) {
    const double now = std::chrono::duration<double>(Steady::now().time_since_epoch()).count();
    Sample s;
    s.t = now;
    for (auto& [queue, q] : stats["queues"].items()) {
      (void)queue;
      if (!q.contains("totals")) continue;
      s.claimed += q["totals"].value("claimed", 0.0);
      s.completed += q["totals"].value("completed", 0.0);
      s.failed += q["totals"].value("failed", 0.0);
    }
    s.commits = stats.value("commits", 0.0);
    // A restart of the counters (a new daemon behind a reused listener
    // cannot happen here, but a count can go back on PostgreSQL failover
    // of nothing): start the history over rather than show negative rates.
    if (!history.empty() && (s.claimed < history.back().claimed ||
                             s.completed < history.back().completed)) {
      history.clear();
    }
    if (history.empty() || now - history.back().t >= kSampleEvery) history.push_back(s);
    while (history.size() > kHistory) history.pop_front();
    json points = json::array();
    for (std::size_t i = 1; i < history.size(); ++i) {
      const auto& a = history[i - 1];
      const auto& b = history[i];
      const double dt = b.t - a.t;
      if (dt <= 0) continue;
      points.push_back({{"ago", now - b.t},
                        {"claimed", (b.claimed - a.claimed) / dt},
                        {"completed", (b.completed - a.completed) / dt},
                        {"failed", (b.failed - a.failed) / dt},
                        {"commits", (b.commits - a.commits) / dt}});
    }
    stats["history"] = std::move(points);
    stats["store"] = options.store;
    stats["clock"] = options.clock;
    stats["version"] = std::string(protocol::kVersion);
    stats["wall_clock"] =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    return stats;
  }

  void answer(Pending& p, std::string_view bytes) {
    if (p.kind == Kind::metrics || p.kind == Kind::health) {
      try {
        auto reply = protocol::decode_reply(bytes, p.request.op, *p.request.rid);
        if (reply && reply->ok) {
          p.status = 200;
          if (p.kind == Kind::metrics) {
            p.body = std::get<std::string>(reply->result);
            p.type = "text/plain; version=0.0.4; charset=utf-8";
          } else {
            p.body = "ok\n";
          }
        } else if (reply) {
          p.body = reply->error_code + ": " + reply->error_message + "\n";
        }
      } catch (const std::exception& e) {
        p.body = std::string("bad reply: ") + e.what() + "\n";
      }
      return;
    }
    json reply;
    try {
      reply = json::from_msgpack(bytes.begin(), bytes.end());
    } catch (const std::exception& e) {
      p.status = 500;
      p.body = text(json{{"ok", false}, {"error", {{"code", "internal"}, {"message", e.what()}}}});
      return;
    }
    reply.erase("rid");
    if (!reply.value("ok", false)) {
      p.status = status_of(reply["error"].value("code", ""));
      p.body = text(reply) + "\n";
      return;
    }
    auto& result = reply["result"];
    if (p.kind == Kind::overview) result = overview(std::move(result));
    if (p.request.op == protocol::Op::job && result.is_object()) {
      result["payload"] = preview(result["payload"]);
    }
    if (p.kind == Kind::jobs) {
      // The page of rows; `more` (and the next page's cursor) when it is full.
      const bool full = result.size() == static_cast<std::size_t>(p.request.limit);
      json next = nullptr;
      if (full && !result.empty()) {
        next = json{{"after", result.back().value("id", "")}};
        if (p.request.order != ListOrder::id) {
          next["after_created"] = result.back().value("created", 0.0);
        }
      }
      result = json{{"jobs", std::move(result)}, {"more", full}, {"next", std::move(next)}};
    }
    p.status = 200;
    p.body = text(reply) + "\n";
  }

  void run_bridge() {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(kHttpInproc);
    for (;;) {
      zmq_pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(200));
      if (items[1].revents & ZMQ_POLLIN) {
        std::uint64_t drained;
        while (::read(wake_fd, &drained, sizeof drained) > 0) {
        }
      }
      std::deque<std::shared_ptr<Pending>> send;
      {
        std::lock_guard lock(mutex);
        send.swap(outbox);
      }
      for (auto& p : send) {
        s.send(zmq::buffer(protocol::encode_request(p->request)), zmq::send_flags::dontwait);
      }
      zmq::message_t m;
      while (s.recv(m, zmq::recv_flags::dontwait)) {
        auto rid = protocol::reply_rid(m.to_string_view());
        if (!rid) continue;
        const auto* n = std::get_if<std::uint64_t>(&rid->value);
        if (!n) continue;
        std::shared_ptr<Pending> p;
        {
          std::lock_guard lock(mutex);
          auto it = waiting.find(*n);
          if (it == waiting.end()) continue;
          p = it->second;
          waiting.erase(it);
        }
        try {
          answer(*p, m.to_string_view());
        } catch (const std::exception& e) {
          // A reply this thread could not shape: the request's error, never the daemon's end.
          p->status = 500;
          p->type = "application/json";
          p->body = text(json{{"ok", false},
                              {"error", {{"code", "internal"}, {"message", e.what()}}}}) +
                    "\n";
        }
        std::lock_guard lock(mutex);
        finish(p);
      }
      const auto now = Steady::now();
      const bool stopping = stop.load();
      std::lock_guard lock(mutex);
      for (auto it = waiting.begin(); it != waiting.end();) {
        if (stopping || it->second->deadline <= now) {
          if (stopping && it->second->type.starts_with("text/plain")) {
            it->second->body = "fenceqd is stopping\n";
          }
          finish(it->second);
          it = waiting.erase(it);
        } else {
          ++it;
        }
      }
      if (stopping) return;
    }
  }
};

HttpServer::HttpServer(zmq::context_t& ctx, const HttpOptions& options)
    : impl_(std::make_unique<Impl>(ctx, options)) {
  const std::string& host_port = options.listen;
  if (options.auth_file) {
    impl_->users = load_auth_file(*options.auth_file);
    for (const auto& [user, password] : impl_->users) impl_->tokens[user] = random_token();
  }
  auto colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    throw std::runtime_error("--http-listen must be HOST:PORT, not " + host_port);
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host != "127.0.0.1" && host != "::1" && host != "localhost") {
    throw std::runtime_error("--http-listen serves loopback only (127.0.0.1, ::1, localhost), "
                             "not " + host);
  }
  int port = 0;
  try {
    std::size_t used = 0;
    port = std::stoi(host_port.substr(colon + 1), &used);
    if (used != host_port.size() - colon - 1 || port < 0 || port > 65535) throw std::out_of_range("");
  } catch (const std::exception&) {
    throw std::runtime_error("--http-listen has a bad port: " + host_port);
  }
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  const sockaddr* addr;
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (host == "::1") {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<std::uint16_t>(port));
    v6.sin6_addr = in6addr_loopback;
    addr = reinterpret_cast<const sockaddr*>(&v6);
    flags |= MHD_USE_IPv6;
  } else {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<std::uint16_t>(port));
    v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr = reinterpret_cast<const sockaddr*>(&v4);
  }
  impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl_->wake_fd < 0) throw std::runtime_error("cannot create an eventfd for HTTP");
  impl_->daemon = MHD_start_daemon(
      flags, static_cast<std::uint16_t>(port), nullptr, nullptr, &Impl::handle, impl_.get(),
      MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, kMaxHeaderBytes, MHD_OPTION_CONNECTION_TIMEOUT,
      kIdleTimeoutSeconds, MHD_OPTION_NOTIFY_CONNECTION, &Impl::notify, impl_.get(),
      MHD_OPTION_NOTIFY_COMPLETED, &Impl::completed, impl_.get(), MHD_OPTION_EXTERNAL_LOGGER,
      &Impl::log, impl_.get(), MHD_OPTION_END);
  if (!impl_->daemon) {
    ::close(impl_->wake_fd);
    throw std::runtime_error("cannot listen for HTTP on " + host_port);
  }
  if (const auto* info = MHD_get_daemon_info(impl_->daemon, MHD_DAEMON_INFO_BIND_PORT)) {
    impl_->port = info->port;
  }
  if (const auto* info = MHD_get_daemon_info(impl_->daemon, MHD_DAEMON_INFO_LISTEN_FD)) {
    fd_guard::set_reserve(info->listen_fd, fd_guard::kHttpReserve);
  }
  impl_->bridge = std::thread([impl = impl_.get()] { impl->run_bridge(); });
  const std::string base =
      std::string("http://") + (host == "::1" ? "[::1]" : "127.0.0.1") + ":" +
      std::to_string(impl_->port);
  if (impl_->users.empty()) {
    spdlog::info("metrics on {}/metrics, health on {}/healthz (no dashboard: no "
                 "--http-auth-file)",
                 base, base);
  } else {
    spdlog::info("dashboard on {}/ for {} user(s){}, metrics on {}/metrics", base,
                 impl_->users.size(), options.read_only ? ", read-only" : "", base);
  }
}

HttpServer::~HttpServer() {
  // Every suspended connection is resumed (503) before MHD stops: its rule.
  impl_->stop = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(impl_->wake_fd, &one, sizeof one);
  impl_->bridge.join();
  MHD_stop_daemon(impl_->daemon);
  ::close(impl_->wake_fd);
}

int HttpServer::port() const { return impl_->port; }

}  // namespace fenceq::daemon
