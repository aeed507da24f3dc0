#include "http/http_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "transport/fd_guard.hpp"
#include "http/answers.hpp"
#include "http/auth.hpp"
#include "http/bridge.hpp"
#include "http/routes.hpp"
#include "base/logging.hpp"

namespace fenceq::daemon {
namespace {

using Steady = std::chrono::steady_clock;

// Connections: a few hundred cost little (16 KiB of pool and a descriptor
// each), and /metrics answers from its snapshot at once and closes, so that
// a flood of a hundred scrapers stays below kEvictFrom and never pushes a
// health check or a dashboard user out (abuse: a flood of /metrics...).
// Beyond it, slowloris: each new connection evicts the oldest that has not
// sent its request.
constexpr unsigned kMaxConnections = 256;
constexpr std::size_t kEvictFrom = 192;
// MHD accepts this many more, so that a new connection past kMaxConnections
// is ours to judge (Connections::opened), not refused unseen.
constexpr unsigned kAcceptHeadroom = 16;
constexpr std::size_t kMaxHeaderBytes = 16 * 1024;  // MHD's per-connection memory pool
constexpr unsigned kIdleTimeoutSeconds = 10;

// HOST:PORT of --http-listen, loopback only.
struct Listen {
  std::string host;  // without brackets
  int port = 0;
};

Listen parse_listen(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    throw std::runtime_error("--http-listen must be HOST:PORT, not " + host_port);
  }
  Listen l;
  l.host = host_port.substr(0, colon);
  if (l.host.size() > 2 && l.host.front() == '[' && l.host.back() == ']') {
    l.host = l.host.substr(1, l.host.size() - 2);
  }
  if (l.host != "127.0.0.1" && l.host != "::1" && l.host != "localhost") {
    throw std::runtime_error("--http-listen serves loopback only (127.0.0.1, ::1, localhost), "
                             "not " + l.host);
  }
  try {
    std::size_t used = 0;
    l.port = std::stoi(host_port.substr(colon + 1), &used);
    if (used != host_port.size() - colon - 1 || l.port < 0 || l.port > 65535) {
      throw std::out_of_range("");
    }
  } catch (const std::exception&) {
    throw std::runtime_error("--http-listen has a bad port: " + host_port);
  }
  return l;
}

// Connections by age, and whether each has sent a whole header; from
// kEvictFrom on, each new one pushes out the oldest that has not (slowloris,
// or a flood of scrapes connecting faster than they send); past
// kMaxConnections, a new one that finds none to push out is shut itself.
// The MHD thread's alone.
class Connections {
 public:
  void opened(MHD_Connection* c) {
    const auto* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    conns_[c] = Conn{info ? info->connect_fd : -1, Steady::now(), false};
    if (live() > kEvictFrom && !evict_one(c) && live() > kMaxConnections) shut(conns_[c]);
  }
  void closed(MHD_Connection* c) { conns_.erase(c); }
  void requested(MHD_Connection* c) {
    if (auto it = conns_.find(c); it != conns_.end()) it->second.requested = true;
  }

 private:
  // The oldest connection but `c` that has not sent a whole header yet.
  // (Only this thread closes connections, and it is here: its descriptor is
  // still the connection's.)
  bool evict_one(MHD_Connection* c) {
    MHD_Connection* oldest = nullptr;
    for (auto& [conn, info] : conns_) {
      if (conn == c || info.requested || info.fd < 0) continue;
      if (!oldest || info.since < conns_[oldest].since) oldest = conn;
    }
    if (oldest) shut(conns_[oldest]);
    return oldest != nullptr;
  }
  // Connections not shut yet (a shut one stays until MHD closes it).
  std::size_t live() const {
    return static_cast<std::size_t>(std::count_if(conns_.begin(), conns_.end(),
                                                  [](const auto& e) { return e.second.fd >= 0; }));
  }

  struct Conn {
    int fd = -1;
    Steady::time_point since;
    bool requested = false;
  };
  static void shut(Conn& conn) {
    if (conn.fd >= 0) ::shutdown(conn.fd, SHUT_RDWR);
    conn.fd = -1;  // shut once
  }
  std::map<MHD_Connection*, Conn> conns_;
};

}  // namespace

struct HttpServer::Impl {
  HttpOptions options;
  http::Auth auth;  // first: a bad auth file is the first error said
  Listen listen;
  http::Bridge bridge;
  http::Site site{options, auth, bridge};
  Connections conns;
  MHD_Daemon* daemon = nullptr;
  int port = 0;
  // While start_daemon() runs: what MHD logged (why it could not listen).
  bool starting = false;
  std::string start_error;

  Impl(zmq::context_t& ctx, HttpOptions o, const Throughput& throughput)
      : options(std::move(o)),
        auth(options.auth_file),
        listen(parse_listen(options.listen)),
        bridge(ctx, http::Answers(options.store, options.clock, auth, throughput)) {}

  void start_daemon();
  std::string base_url() const {
    return std::string("http://") + (listen.host == "::1" ? "[::1]" : "127.0.0.1") + ":" +
           std::to_string(port);
  }

  // --- MHD's callbacks, on its thread ---

  static MHD_Result handle(void* cls, MHD_Connection* c, const char* url, const char* method,
                           const char*, const char*, size_t* upload_size, void** state) {
    auto* self = static_cast<Impl*>(cls);
    self->conns.requested(c);
    if (auto p = http::Bridge::resumed(state)) {
      // Resumed: the serving loop answered, or the wait ended.
      return http::reply(c, p->status, p->body, p->type.c_str(), http::is_dashboard(p->kind),
                         p->kind == http::Kind::metrics);
    }
    // Every answer is given before a body would be read: nothing here takes
    // one, so none is ever buffered.
    (void)upload_size;
    return http::dispatch(self->site, c, url, method, state);
  }

  static void notify(void* cls, MHD_Connection* c, void**, MHD_ConnectionNotificationCode toe) {
    auto* self = static_cast<Impl*>(cls);
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
      self->conns.closed(c);
    } else {
      self->conns.opened(c);
    }
  }

  static void completed(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
    http::Bridge::completed(state);
  }

  static void log(void* cls, const char* fmt, va_list ap) {
    char line[512];
    std::vsnprintf(line, sizeof line, fmt, ap);
    std::string s = line;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    auto* self = static_cast<Impl*>(cls);
    if (self->starting && self->start_error.empty()) self->start_error = s;
    spdlog::debug("http: {}", client_text(s));  // MHD quotes what clients sent
  }
};

// Binds and starts MHD's thread; throws std::runtime_error when it cannot.
void HttpServer::Impl::start_daemon() {
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  const sockaddr* addr;
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  const auto p = static_cast<std::uint16_t>(listen.port);
  if (listen.host == "::1") {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(p);
    v6.sin6_addr = in6addr_loopback;
    addr = reinterpret_cast<const sockaddr*>(&v6);
    flags |= MHD_USE_IPv6;
  } else {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(p);
    v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr = reinterpret_cast<const sockaddr*>(&v4);
  }
  starting = true;
  start_error.clear();
  daemon = MHD_start_daemon(
      // The logger first: MHD logs the options after it through it.
      flags, p, nullptr, nullptr, &Impl::handle, this, MHD_OPTION_EXTERNAL_LOGGER, &Impl::log,
      this, MHD_OPTION_SOCK_ADDR, addr,
      MHD_OPTION_CONNECTION_LIMIT, kMaxConnections + kAcceptHeadroom, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      kMaxHeaderBytes, MHD_OPTION_CONNECTION_TIMEOUT, kIdleTimeoutSeconds,
      MHD_OPTION_NOTIFY_CONNECTION, &Impl::notify, this, MHD_OPTION_NOTIFY_COMPLETED,
      &Impl::completed, this, MHD_OPTION_END);
  starting = false;
  // MHD says why (e.g. "Failed to bind to port 8080: Address already in use").
  if (!daemon) {
    throw std::runtime_error("cannot listen for HTTP on " + options.listen +
                             (start_error.empty() ? std::string() : ": " + start_error));
  }
  if (const auto* info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT)) {
    port = info->port;
  }
  if (const auto* info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_LISTEN_FD)) {
    fd_guard::set_reserve(info->listen_fd, fd_guard::kHttpReserve);
  }
}

HttpServer::HttpServer(zmq::context_t& ctx, const HttpOptions& options,
                       const Throughput& throughput)
    : impl_(std::make_unique<Impl>(ctx, options, throughput)) {
  impl_->start_daemon();
  impl_->bridge.run();
  const std::string base = impl_->base_url();
  if (!impl_->auth.enabled()) {
    spdlog::info("metrics on {}/metrics, health on {}/healthz (no dashboard: no "
                 "--http-auth-file)",
                 base, base);
  } else {
    spdlog::info("dashboard on {}/ for {} user(s){}, metrics on {}/metrics", base,
                 impl_->auth.user_count(), options.read_only ? ", read-only" : "", base);
  }
}

HttpServer::~HttpServer() {
  // Every suspended connection is resumed (503) before MHD stops: its rule.
  impl_->bridge.stop();
  MHD_stop_daemon(impl_->daemon);
}

int HttpServer::port() const { return impl_->port; }

}  // namespace fenceq::daemon
