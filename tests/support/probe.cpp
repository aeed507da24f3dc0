#include "probe.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fenceq/client.hpp>

#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "daemon.hpp"

namespace fenceq::test {

long proc_status(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1)) * 1024;
  }
  return -1;
}

int open_fds(pid_t pid) {
  int n = 0;
  if (DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n - 2;
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ...": utime and stime are fields 14 and 15; count
  // from the last ')' since comm may hold spaces.
  auto p = stat.rfind(')');
  if (p == std::string::npos) return -1;
  std::istringstream rest(stat.substr(p + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::pair<long, long> nofile_limits(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream s(line.substr(std::strlen("Max open files")));
    std::string soft, hard;
    s >> soft >> hard;
    auto num = [](const std::string& v) { return v == "unlimited" ? -1L : std::stol(v); };
    return {num(soft), num(hard)};
  }
  return {-1, -1};
}

bool within(pid_t pid, long baseline, long allowed) {
  return !kRssMeaningful || proc_status(pid, "VmHWM") < baseline + allowed;
}

void report(const std::string& what, pid_t pid, long baseline) {
  long peak = proc_status(pid, "VmHWM");
  std::cout << "limits: " << what << ": peak RSS " << peak / kMiB << " MiB (at start "
            << baseline / kMiB << " MiB, now " << proc_status(pid, "VmRSS") / kMiB << " MiB)"
            << std::endl;
}

zmq::socket_t dealer(zmq::context_t& ctx, const std::string& endpoint) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  return s;
}

bool serves(const Daemon& d, std::chrono::milliseconds within) {
  try {
    Client c(d.endpoint(), ClientOptions{within});
    return c.ping().protocol == 1;
  } catch (const fenceq::Error&) {
    return false;
  }
}

double worker_round_trip(const Daemon& d, std::chrono::milliseconds timeout) {
  static int n = 0;
  const std::string id = "well-behaved-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
  try {
    Client c(d.endpoint(), ClientOptions{timeout});
    // Connected before the clock starts; `now` only for a client clock.
    std::optional<double> now;
    if (c.ping().clock == "client") now = 1000.0;
    const auto t0 = std::chrono::steady_clock::now();
    EnqueueOptions o;
    o.queue = "well-behaved";
    o.now = now;
    if (!c.enqueue(id, o)) return -1;
    auto job = c.claim_next("well-behaved", "w", 30, 0, now);
    if (!job || !c.complete(job->id, "w", job->fence, "ok", now)) return -1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } catch (const fenceq::Error&) {
    return -1;
  }
}

long raise_own_fd_limit() {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  ::getrlimit(RLIMIT_NOFILE, &rl);
  return static_cast<long>(rl.rlim_cur);
}

int connect_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int connect_tcp(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void close_all(std::vector<int>& fds) {
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  fds.clear();
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("free_port: " + why);
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

int http_port(const Daemon& d) {
  static const std::regex kLine(R"(http://127\.0\.0\.1:([0-9]+)/)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    // The last one: the log of a daemon restarted on its directory (or of one
    // that ran there before it) names the earlier ports first.
    const std::string log = d.log();
    int port = -1;
    for (std::sregex_iterator it(log.begin(), log.end(), kLine), end; it != end; ++it) {
      port = std::stoi((*it)[1]);
    }
    if (port > 0) return port;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

int http_request(int port, const std::string& request, std::chrono::milliseconds timeout,
                 std::string* body_out, std::string* head_out) {
  int fd = connect_tcp(port);
  if (fd < 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    return static_cast<int>(std::max<long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(
               deadline - std::chrono::steady_clock::now())
               .count()));
  };
  std::size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, left_ms()) <= 0) break;
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string in;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left_ms()) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
    auto head_end = in.find("\r\n\r\n");
    if (head_end == std::string::npos) continue;
    // Stop once Content-Length bytes of body are in (keep-alive servers).
    static const std::regex kLength(R"([Cc]ontent-[Ll]ength: *([0-9]+))");
    std::smatch m;
    std::string head = in.substr(0, head_end);
    if (std::regex_search(head, m, kLength) &&
        in.size() >= head_end + 4 + std::stoul(m[1].str())) {
      break;
    }
  }
  ::close(fd);
  if (in.rfind("HTTP/1.", 0) != 0 || in.size() < 12) return -1;
  const auto head_end = in.find("\r\n\r\n");
  if (body_out) *body_out = head_end == std::string::npos ? "" : in.substr(head_end + 4);
  if (head_out) *head_out = in.substr(0, head_end);
  return std::stoi(in.substr(9, 3));
}

}  // namespace fenceq::test
