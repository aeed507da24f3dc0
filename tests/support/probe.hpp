// Test support: what a running fenceqd costs, read from outside (/proc), and
// raw connections of every kind a hostile local client can open. Used by the
// limits and abuse suites.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace fenceq::test {

class Daemon;

inline constexpr long kMiB = 1024 * 1024;

// Under ASan or TSan the daemon's RSS is mostly the sanitizer's (shadow
// memory, ASan's quarantine of freed blocks): the bounds are checked in the
// plain build, the behaviour in all of them.
#ifdef FENCEQ_SANITIZED_ALLOCATOR
inline constexpr bool kRssMeaningful = false;
#else
inline constexpr bool kRssMeaningful = true;
#endif

// A field of /proc/PID/status in bytes (VmHWM: peak RSS; VmRSS: now); -1
// when the process is gone.
long proc_status(pid_t pid, const std::string& field);
// Open file descriptors of a process.
int open_fds(pid_t pid);
// CPU seconds (user + system) a process has used, all its threads.
double cpu_seconds(pid_t pid);
// The soft and hard RLIMIT_NOFILE of a process, from /proc/PID/limits.
std::pair<long, long> nofile_limits(pid_t pid);
// Peak RSS below baseline + allowed (always true where RSS is not meaningful).
bool within(pid_t pid, long baseline, long allowed);
// Prints "limits: WHAT: peak RSS ... (at start ..., now ...)".
void report(const std::string& what, pid_t pid, long baseline);

zmq::socket_t dealer(zmq::context_t& ctx, const std::string& endpoint);
// The daemon answers a ping from a new client within `within`.
bool serves(const Daemon& d, std::chrono::milliseconds within = std::chrono::milliseconds(2000));
// A well-behaved worker's round trip on a live daemon: enqueue a job, claim
// it by claim_next, complete it; the wall time of the three requests, or -1
// (seconds) when one failed or timed out after `timeout`.
double worker_round_trip(const Daemon& d,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

// Raises this process's soft RLIMIT_NOFILE to its hard limit (the abuse tests
// open thousands of sockets themselves); returns the new soft limit.
long raise_own_fd_limit();

// Plain stream sockets connected to an ipc:// path or 127.0.0.1:PORT that
// never speak: the idle connections a hostile client piles up. Returns fd
// -1 for a connect that failed. Closed by close_all().
int connect_unix(const std::string& path);
int connect_tcp(int port);
void close_all(std::vector<int>& fds);

// A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick,
// released at once: another process may take it meanwhile).
int free_port();

// The port of `--http-listen 127.0.0.1:0`, the last the daemon's log names;
// -1 if the log does not name one within 5 s.
int http_port(const Daemon& d);
// One HTTP/1.1 request on a new connection; the status code, or -1 when
// nothing came back within `timeout`. `body_out` receives the body,
// `head_out` the status line and headers.
int http_request(int port, const std::string& request, std::chrono::milliseconds timeout,
                 std::string* body_out = nullptr, std::string* head_out = nullptr);

}  // namespace fenceq::test
