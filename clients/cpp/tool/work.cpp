#include "work.hpp"

#include "fenceq_protocol/codec.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <stdexcept>

namespace fenceq::tool {
namespace {

using Steady = std::chrono::steady_clock;

// Output kept from the command; more than this fails the job (a result must
// fit in one request of the daemon's default --max-message).
constexpr std::size_t kMaxOutput = 900 * 1024;
// What the error of a failed job keeps of stderr (the daemon takes 64 KiB).
constexpr std::size_t kMaxError = 60 * 1024;

bool utf8_ok(std::string_view s) { return protocol::valid_utf8(s); }

// Bytes that are not UTF-8 become '?', so that an error text is always storable.
std::string printable(std::string s) {
  if (s.size() > kMaxError) s.resize(kMaxError);
  if (utf8_ok(s)) return s;
  for (auto& c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return s;
}

class Pipe {
 public:
  Pipe() {
    if (::pipe2(fd_, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read_end() const { return fd_[0]; }
  int write_end() const { return fd_[1]; }
  void close_read() { reset(fd_[0]); }
  void close_write() { reset(fd_[1]); }

 private:
  static void reset(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  int fd_[2] = {-1, -1};
};

struct RunOutcome {
  enum { exited, lease_lost, stopped } how = exited;
  int status = 0;  // exit status, or 128 + signal
  std::string out, err;
};

void log(const std::string& line) { std::cerr << "fenceq work: " << line << std::endl; }

class Worker {
 public:
  Worker(Client& c, const WorkOptions& o, int signal_fd) : c_(c), o_(o), sfd_(signal_fd) {}

  int run() {
    long done = 0;
    std::optional<ClaimedJob> job;  // taken by the last complete_next, if any
    while (!stop_requested() && (o_.max_jobs == 0 || done < o_.max_jobs)) {
      // Long-poll in slices, so that a stop is noticed within a second.
      double slice = std::min(o_.wait, 1.0);
      if (!job) job = c_.claim_next(o_.queue, o_.owner, o_.ttl, slice);
      if (!job) {
        waited_ += slice;
        if (o_.exit_when_empty && waited_ >= o_.wait) break;
        continue;
      }
      waited_ = 0;
      if (stop_requested()) {
        c_.release(job->id, o_.owner, job->fence);
        log("stopping: released " + job->id);
        break;
      }
      auto current = *std::move(job);
      job.reset();
      if (handle(current, job)) break;  // stopped while running
      ++done;
      if (job && o_.max_jobs != 0 && done >= o_.max_jobs) {
        c_.release(job->id, o_.owner, job->fence);  // took one too many
      }
    }
    if (job && stop_requested()) c_.release(job->id, o_.owner, job->fence);
    return 0;
  }

 private:
  bool stop_requested() {
    if (stopping_) return true;
    signalfd_siginfo si;
    if (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) stopping_ = true;
    return stopping_;
  }

  // Runs the command for one job; true when the worker must stop. A complete
  // also claims the next job in the same round trip: into `next`.
  bool handle(const ClaimedJob& job, std::optional<ClaimedJob>& next) {
    const std::string fence = std::to_string(job.fence);
    auto r = run_command(job);
    const std::string what = "job " + job.id + " fence " + fence + ": ";
    switch (r.how) {
      case RunOutcome::stopped:
        log(what + (c_.release(job.id, o_.owner, job.fence) ? "stopped, lease released"
                                                            : "stopped, lease already gone"));
        return true;
      case RunOutcome::lease_lost:
        log(what + "lease lost while running; the command was stopped, nothing stored");
        return false;
      case RunOutcome::exited: break;
    }
    if (r.status == 0 && r.out.size() <= kMaxOutput && utf8_ok(r.out)) {
      auto c = c_.complete_and_claim_next(job.id, o_.owner, job.fence, r.out, o_.queue, o_.ttl);
      log(what + (c.completed ? "completed" : "completed, but refused: the lease was lost"));
      next = std::move(c.next);
      return false;
    }
    std::string error = r.status != 0 ? "exit status " + std::to_string(r.status) + ": " + r.err
                        : r.out.size() > kMaxOutput ? "output larger than 900 KiB"
                                                    : "output is not UTF-8";
    bool ok = c_.fail(job.id, o_.owner, job.fence, printable(error), o_.retry_in);
    log(what + (ok ? "failed (" : "failed, but refused: the lease was lost (") +
        (r.status != 0 ? "exit " + std::to_string(r.status) : error) + ")");
    return false;
  }

  RunOutcome run_command(const ClaimedJob& job) {
    Pipe in, out, err;
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::dup2(in.read_end(), 0);
      ::dup2(out.write_end(), 1);
      ::dup2(err.write_end(), 2);
      ::setenv("FENCEQ_JOB_ID", job.id.c_str(), 1);
      ::setenv("FENCEQ_FENCE", std::to_string(job.fence).c_str(), 1);
      ::setenv("FENCEQ_ATTEMPTS", std::to_string(job.attempts).c_str(), 1);
      ::setenv("FENCEQ_QUEUE", o_.queue.c_str(), 1);
      ::setenv("FENCEQ_OWNER", o_.owner.c_str(), 1);
      std::vector<char*> argv;
      for (const auto& a : o_.command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    in.close_read();
    out.close_write();
    err.close_write();
    ::fcntl(in.write_end(), F_SETFL, O_NONBLOCK);

    RunOutcome r;
    const std::string payload = job.payload ? job.payload->bytes : std::string();
    std::size_t written = 0;
    if (payload.empty()) in.close_write();
    const auto renew_every = std::chrono::duration_cast<Steady::duration>(
        std::chrono::duration<double>(o_.ttl / 3));
    auto next_renew = Steady::now() + renew_every;
    bool out_open = true, err_open = true;
    int status = 0;
    for (;;) {
      if (!out_open && !err_open) {
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
      }
      std::vector<pollfd> fds;
      if (out_open) fds.push_back({out.read_end(), POLLIN, 0});
      if (err_open) fds.push_back({err.read_end(), POLLIN, 0});
      if (in.write_end() >= 0) fds.push_back({in.write_end(), POLLOUT, 0});
      fds.push_back({sfd_, POLLIN, 0});
      auto to_renew = std::chrono::duration_cast<std::chrono::milliseconds>(next_renew -
                                                                            Steady::now());
      int timeout = static_cast<int>(std::max<long long>(0, to_renew.count()));
      if (!out_open && !err_open) timeout = std::min(timeout, 50);
      ::poll(fds.data(), fds.size(), timeout);
      for (const auto& p : fds) {
        if (!p.revents) continue;
        if (p.fd == sfd_) {
          stopping_ = true;
          ::kill(pid, SIGTERM);
          ::waitpid(pid, &status, 0);
          r.how = RunOutcome::stopped;
          return r;
        }
        if (p.fd == in.write_end()) {
          ssize_t n = ::write(p.fd, payload.data() + written, payload.size() - written);
          if (n > 0) written += static_cast<std::size_t>(n);
          if (n < 0 && errno != EAGAIN) written = payload.size();  // the command closed stdin
          if (written >= payload.size()) in.close_write();
          continue;
        }
        char buf[65536];
        ssize_t n = ::read(p.fd, buf, sizeof buf);
        auto& sink = p.fd == out.read_end() ? r.out : r.err;
        if (n > 0) {
          if (sink.size() < kMaxOutput + 1) sink.append(buf, static_cast<std::size_t>(n));
        } else {
          (p.fd == out.read_end() ? out_open : err_open) = false;
        }
      }
      if (Steady::now() >= next_renew) {
        next_renew = Steady::now() + renew_every;
        if (!c_.renew(job.id, o_.owner, job.fence, o_.ttl)) {
          ::kill(pid, SIGTERM);
          ::waitpid(pid, &status, 0);
          r.how = RunOutcome::lease_lost;
          return r;
        }
      }
    }
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
  }

  Client& c_;
  const WorkOptions& o_;
  int sfd_;
  bool stopping_ = false;
  double waited_ = 0;
};

}  // namespace

int run_worker(Client& client, const WorkOptions& options) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  int sfd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) throw std::runtime_error("signalfd failed");
  WorkOptions o = options;
  if (o.owner.empty()) {
    char host[256] = "worker";
    ::gethostname(host, sizeof host - 1);
    o.owner = std::string(host) + ":" + std::to_string(::getpid());
  }
  Worker w(client, o, sfd);
  int rc = w.run();
  ::close(sfd);
  return rc;
}

}  // namespace fenceq::tool
