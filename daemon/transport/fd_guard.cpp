// The state and policy of fd_guard.hpp; the accept()/accept4() wrappers that
// apply it are in fenceqd_guard.cpp, linked into fenceqd alone.
#include "transport/fd_guard.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>

#include "transport/fd_guard_internal.hpp"

namespace fenceq::daemon::fd_guard {
namespace {

std::atomic<long> g_limit{0};  // 0: off
std::atomic<int> g_http_fd{-1};
std::atomic<long> g_http_reserve{kHttpReserve};
std::atomic<std::uint64_t> g_refused{0};
std::mutex g_spare_mutex;  // the spare descriptor, and the log's rate
int g_spare = -1;
std::chrono::steady_clock::time_point g_last_log{};
std::uint64_t g_refused_logged = 0;

constexpr std::chrono::seconds kLogEvery{10};

long reserve_of(int listen_fd) {
  return listen_fd == g_http_fd.load(std::memory_order_relaxed)
             ? g_http_reserve.load(std::memory_order_relaxed)
             : kReserve;
}

// Counts a refusal and says so in the log, at most every kLogEvery.
void note_refusal(int fd, const char* why) {
  const auto n = ++g_refused;
  std::lock_guard lock(g_spare_mutex);
  const auto now = std::chrono::steady_clock::now();
  if (now - g_last_log < kLogEvery && g_refused_logged != 0) return;
  spdlog::warn(
      "refusing new connections: {} (descriptor {} of a limit of {}); {} refused since the "
      "last report. Raise LimitNOFILE= (ulimit -n) or find the client that opens them",
      why, fd, g_limit.load(), n - g_refused_logged);
  g_last_log = now;
  g_refused_logged = n;
}

}  // namespace

long raise_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  if (rl.rlim_cur < rl.rlim_max) {
    const auto before = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) == 0) {
      spdlog::debug("file descriptors: soft limit raised from {} to {}", before, rl.rlim_cur);
    } else {
      spdlog::debug("file descriptors: cannot raise the soft limit {}: {}", before, errno);
      ::getrlimit(RLIMIT_NOFILE, &rl);
    }
  }
  return rl.rlim_cur == RLIM_INFINITY ? 1L << 20 : static_cast<long>(rl.rlim_cur);
}

void enable(long limit) {
  {
    std::lock_guard lock(g_spare_mutex);
    if (g_spare < 0) g_spare = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  g_limit = limit;
}

void set_reserve(int listen_fd, long reserve) {
  g_http_reserve = reserve;
  g_http_fd = listen_fd;
}

std::uint64_t refused() { return g_refused.load(); }

namespace internal {

int admit(int listen_fd, int fd, const std::function<int()>& accept_again) {
  const long limit = g_limit.load(std::memory_order_relaxed);
  if (limit <= 0) return fd;
  if (fd >= 0) {
    if (fd < limit - reserve_of(listen_fd)) return fd;
    ::close(fd);
    note_refusal(fd, "too few file descriptors left");
    errno = ECONNABORTED;  // libzmq and the HTTP listener take it as "try the next one"
    return -1;
  }
  if (errno != EMFILE && errno != ENFILE) return fd;
  // Out of descriptors entirely: free the spare for a moment to take the
  // pending connection off the queue, so that the listener does not find it
  // there again and again.
  {
    std::lock_guard lock(g_spare_mutex);
    if (g_spare >= 0) {
      ::close(g_spare);
      int taken = accept_again();
      if (taken >= 0) ::close(taken);
      g_spare = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
  }
  note_refusal(-1, "out of file descriptors");
  errno = ECONNABORTED;
  return -1;
}

}  // namespace internal
}  // namespace fenceq::daemon::fd_guard
