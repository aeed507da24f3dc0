#include "http_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "fd_guard.hpp"
#include "fenceq_protocol/codec.hpp"

namespace fenceq::daemon {
namespace {

using Steady = std::chrono::steady_clock;

constexpr unsigned kMaxConnections = 64;
constexpr std::size_t kEvictFrom = 48;
constexpr std::size_t kMaxHeaderBytes = 16 * 1024;  // MHD's per-connection memory pool
constexpr unsigned kIdleTimeoutSeconds = 10;
constexpr std::chrono::milliseconds kScrapeTimeout{5000};

// One request waiting for the serving loop's answer.
struct Pending {
  MHD_Connection* connection = nullptr;
  std::uint64_t rid = 0;
  Steady::time_point deadline;
  bool done = false;
  int status = 503;
  std::string body = "fenceqd did not answer\n";
};

}  // namespace

struct HttpServer::Impl {
  zmq::context_t& ctx;
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

  explicit Impl(zmq::context_t& c) : ctx(c) {}

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
                          const char* type = "text/plain; charset=utf-8") {
    MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                      MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_Result ret = MHD_queue_response(c, static_cast<unsigned>(status), r);
    MHD_destroy_response(r);
    return ret;
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
      return reply(c, p->status, p->body,
                   p->status == 200 ? "text/plain; version=0.0.4; charset=utf-8"
                                    : "text/plain; charset=utf-8");
    }
    // Every answer is given before a body would be read: nothing here takes
    // one, so none is ever buffered.
    (void)upload_size;
    if (std::strcmp(url, "/metrics") != 0) return reply(c, 404, "not found\n");
    if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0) {
      return reply(c, 405, "method not allowed\n");
    }
    if (self->stop) return reply(c, 503, "fenceqd is stopping\n");
    // Suspended before the bridge can see it, so that it is never resumed
    // first; only the bridge resumes it, and the bridge answers everything
    // it holds before it stops.
    MHD_suspend_connection(c);
    *state = new std::shared_ptr<Pending>(self->submit(c));
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

  std::shared_ptr<Pending> submit(MHD_Connection* c) {
    auto p = std::make_shared<Pending>();
    p->connection = c;
    p->deadline = Steady::now() + kScrapeTimeout;
    {
      std::lock_guard lock(mutex);
      p->rid = next_rid++;
      outbox.push_back(p);
      waiting[p->rid] = p;
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
    return p;
  }

  // --- the bridge thread: the only user of its socket ---

  void finish(const std::shared_ptr<Pending>& p) {
    if (p->done) return;
    p->done = true;
    MHD_resume_connection(p->connection);
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
        protocol::Request r;
        r.op = protocol::Op::metrics;
        r.rid = protocol::Rid{p->rid};
        s.send(zmq::buffer(protocol::encode_request(r)), zmq::send_flags::dontwait);
      }
      zmq::message_t m;
      while (s.recv(m, zmq::recv_flags::dontwait)) {
        auto rid = protocol::reply_rid(m.to_string_view());
        if (!rid) continue;
        const auto* n = std::get_if<std::uint64_t>(&rid->value);
        if (!n) continue;
        std::lock_guard lock(mutex);
        auto it = waiting.find(*n);
        if (it == waiting.end()) continue;
        auto p = it->second;
        waiting.erase(it);
        try {
          auto reply = protocol::decode_reply(m.to_string_view(), protocol::Op::metrics, *rid);
          if (reply && reply->ok) {
            p->status = 200;
            p->body = std::get<std::string>(reply->result);
          } else if (reply) {
            p->body = reply->error_code + ": " + reply->error_message + "\n";
          }
        } catch (const std::exception& e) {
          p->body = std::string("bad reply: ") + e.what() + "\n";
        }
        finish(p);
      }
      const auto now = Steady::now();
      const bool stopping = stop.load();
      std::lock_guard lock(mutex);
      for (auto it = waiting.begin(); it != waiting.end();) {
        if (stopping || it->second->deadline <= now) {
          if (stopping) it->second->body = "fenceqd is stopping\n";
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

HttpServer::HttpServer(zmq::context_t& ctx, const std::string& host_port)
    : impl_(std::make_unique<Impl>(ctx)) {
  auto colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    throw std::runtime_error("--metrics-listen must be HOST:PORT, not " + host_port);
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host != "127.0.0.1" && host != "::1" && host != "localhost") {
    throw std::runtime_error("--metrics-listen serves loopback only (127.0.0.1, ::1, localhost), "
                             "not " + host);
  }
  int port = 0;
  try {
    std::size_t used = 0;
    port = std::stoi(host_port.substr(colon + 1), &used);
    if (used != host_port.size() - colon - 1 || port < 0 || port > 65535) throw std::out_of_range("");
  } catch (const std::exception&) {
    throw std::runtime_error("--metrics-listen has a bad port: " + host_port);
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
    throw std::runtime_error("cannot listen for metrics on " + host_port);
  }
  if (const auto* info = MHD_get_daemon_info(impl_->daemon, MHD_DAEMON_INFO_BIND_PORT)) {
    impl_->port = info->port;
  }
  if (const auto* info = MHD_get_daemon_info(impl_->daemon, MHD_DAEMON_INFO_LISTEN_FD)) {
    fd_guard::set_reserve(info->listen_fd, fd_guard::kHttpReserve);
  }
  impl_->bridge = std::thread([impl = impl_.get()] { impl->run_bridge(); });
  spdlog::info("metrics on http://{}:{}/metrics", host == "::1" ? "[::1]" : "127.0.0.1",
               impl_->port);
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
