#include "work.hpp"

#include "fenceq_protocol/codec.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace fenceq::tool {

std::string escape_for_log(std::string_view s) {
  // Bytes that are not UTF-8 are escaped one by one; valid text keeps its
  // printable characters as they are.
  const bool utf8 = protocol::valid_utf8(s);
  std::string out;
  out.reserve(s.size());
  char buf[8];
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto next = [&](std::size_t k) {
      return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0;
    };
    switch (c) {
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c == 0xc2 && next(1) >= 0x80 && next(1) <= 0x9f) {
      // C1 controls, U+0080..U+009F (U+009B is a CSI to some terminals).
      std::snprintf(buf, sizeof buf, "\\u%04x", next(1));
      out += buf;
      i += 1;
    } else if (c == 0xe2 && ((next(1) == 0x80 && next(2) >= 0xa8 && next(2) <= 0xae) ||
                             (next(1) == 0x81 && next(2) >= 0xa6 && next(2) <= 0xa9))) {
      // U+2028/U+2029 (line and paragraph separators), U+202A..U+202E and
      // U+2066..U+2069 (bidirectional overrides that reorder what follows).
      const unsigned cp = ((next(1) & 0x3fu) << 6) | (next(2) & 0x3fu) | 0x2000u;
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

static_assert(kExitSnooze == EX_TEMPFAIL, "a snooze is asked for with sysexits.h's EX_TEMPFAIL");

namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Output kept from the command; more than this fails the job (a result must
// fit in one request of the daemon's default --max-message).
constexpr std::size_t kMaxOutput = 900 * 1024;
// What the error of a failed job keeps of stderr (the daemon takes 64 KiB).
constexpr std::size_t kMaxError = 60 * 1024;
// The shortest wait for a renewal's reply, even when the lease (as the tool
// reckons it, from when its claim or last renewal was sent) has already run
// out: that reckoning is conservative, and a daemon nearby answers in far less.
constexpr milliseconds kMinRenewWait{200};
// Retries of a renewal that got no answer, at most this far apart.
constexpr milliseconds kRenewRetry{1000};
// --prefetch: what one complete_many may carry (results, ids, owner), and one
// renew_many: within a frame of the daemon's default --max-message (1 MiB),
// as a single result of kMaxOutput is. More is sent in several requests.
constexpr std::size_t kMaxCompleteBytes = kMaxOutput;
constexpr std::size_t kMaxRenewBytes = 512 * 1024;
// While a command runs, its job's state is read this often, so that a cancel
// (which moves the fence on at once) stops it within about this long, not
// at its next renewal (ttl/3). A read: nothing is written or synced.
constexpr milliseconds kCancelCheck{1000};
// --retry-in applies to a job's first attempts; from this attempt on (the
// daemon's "retried without end" warning starts there too) a shorter
// --retry-in is raised to the daemon's own backoff, min(2^(attempts-1), 3600)
// s, so that `--retry-in 0` on a job with no max_attempts is not a busy loop.
constexpr std::int64_t kRetryInAttempts = 10;

// Bytes that are not UTF-8 become '?', so that an error text is always storable.
std::string printable(std::string s) {
  if (s.size() > kMaxError) s.resize(kMaxError);
  if (protocol::valid_utf8(s)) return s;
  for (auto& c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return s;
}

// A number of seconds for the log, as a user types it: 60, 2.5, 1000000000.
std::string seconds_text(double s) {
  if (s == std::floor(s) && std::fabs(s) < 1e15) return std::to_string(static_cast<long long>(s));
  std::ostringstream out;
  out << s;
  return out.str();
}

Steady::duration seconds(double s) {
  return std::chrono::duration_cast<Steady::duration>(std::chrono::duration<double>(s));
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

// The running command: the leader of a process group of its own, so that a
// stop reaches what it started too (a shell script's `sleep`). The worker
// stops it step by step in its loop; this destructor is the backstop for any
// way out of that loop (an exception): the command never outlives the tool.
class Command {
 public:
  Command(pid_t pid, Steady::duration grace) : pid_(pid), grace_(grace) {}
  ~Command() {
    if (reaped_) return;
    signal(SIGTERM);
    const auto kill_at = Steady::now() + grace_;
    while (!exited() && Steady::now() < kill_at) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (!reaped_) {
      signal(SIGKILL);
      int status;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  // Reaps the leader if it has exited; true once it has.
  bool exited() {
    if (reaped_) return true;
    int status = 0;
    pid_t w = ::waitpid(pid_, &status, WNOHANG);
    if (w == pid_) {
      reaped_ = true;
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } else if (w < 0 && errno == ECHILD) {
      reaped_ = true;  // not ours to wait for any more (cannot happen: SIGCHLD is default)
      status_ = 128 + SIGKILL;
    }
    return reaped_;
  }
  // Exit status, or 128 + signal; once exited().
  int status() const { return status_; }

  // To the whole group. The group outlives its reaped leader while members
  // remain (and its id is not reused meanwhile); the leader alone only if the
  // group could not be made, and never once reaped (its pid may be reused).
  // True when a process got it.
  bool signal(int sig) {
    if (::kill(-pid_, sig) == 0) return true;
    return errno == ESRCH && !reaped_ && ::kill(pid_, sig) == 0;
  }

 private:
  pid_t pid_;
  Steady::duration grace_;
  bool reaped_ = false;
  int status_ = 0;
};

struct RunOutcome {
  enum { exited, lease_lost, stopped } how = exited;
  int status = 0;       // exit status, or 128 + signal
  // lease_lost or stopped: whether the command was still running then (else
  // it had exited, and only what it left running, if anything, was stopped).
  bool was_running = false;
  bool left_running = false;  // it had exited, and processes of its group had not
  bool killed = false;        // SIGKILL was needed
  std::string lost;     // how the lease was lost
  std::string out, err;
};

std::string status_text(int status) {
  return status > 128 ? "signal " + std::to_string(status - 128) : "exit " + std::to_string(status);
}

void log(const std::string& line) { std::cerr << "fenceq work: " << line << std::endl; }

class Worker {
 public:
  Worker(Client& c, const WorkOptions& o, int signal_fd) : c_(c), o_(o), sfd_(signal_fd) {}

  int run() { return o_.prefetch > 1 ? run_prefetch() : run_single(); }

 private:
  // --prefetch 1: one job at a time, with the single ops (claim_next, renew,
  // complete_next).
  int run_single() {
    long done = 0;
    std::optional<ClaimedJob> job;  // taken by the last complete_next, if any
    while (!stop_requested() && (o_.max_jobs == 0 || done < o_.max_jobs)) {
      // Long-poll in slices, so that a stop is noticed within a second.
      double slice = std::min(o_.wait, 1.0);
      if (!job) {
        claimed_at_ = Steady::now();
        job = c_.claim_next(o_.queue, o_.owner, o_.ttl, slice);
      }
      if (!job) {
        waited_ += slice;
        if (o_.exit_when_empty && waited_ >= o_.wait) break;
        continue;
      }
      waited_ = 0;
      if (stop_requested()) {
        c_.release(job->id, o_.owner, job->fence);
        log("stopping: released " + escape_for_log(job->id));
        break;
      }
      auto current = *std::move(job);
      job.reset();
      OneLease lease(*this, current, claimed_at_ + seconds(o_.ttl));
      const bool stopped = handle(current, lease, [&](const std::string& what, std::string out) {
        // A complete also claims the next job in the same round trip.
        claimed_at_ = Steady::now();
        auto c = c_.complete_and_claim_next(current.id, o_.owner, current.fence, out, o_.queue,
                                            o_.ttl);
        log(what + (c.completed ? "completed" : "completed, but refused: the lease was lost"));
        job = std::move(c.next);
      });
      if (stopped) break;  // stopped while running
      ++done;
      if (job && o_.max_jobs != 0 && done >= o_.max_jobs) {
        c_.release(job->id, o_.owner, job->fence);  // took one too many
        job.reset();
      }
    }
    if (job && stop_requested()) c_.release(job->id, o_.owner, job->fence);
    return 0;
  }

  // --prefetch N: up to N jobs held at once. They are claimed together (when
  // none is left waiting), run in turn, renewed together while any is held,
  // and the successful ones completed together with the claim of the next.
  int run_prefetch() {
    long done = 0;  // jobs taken in hand: run, or failed without running
    while (!stop_requested() && (o_.max_jobs == 0 || done < o_.max_jobs)) {
      if (queued_.empty()) {
        // Never more than N held, nor more than --max-jobs leaves to do.
        const long want =
            o_.max_jobs == 0 ? o_.prefetch : std::min<long>(o_.prefetch, o_.max_jobs - done);
        if (!finished_.empty()) {
          complete_finished(want);  // and claim up to `want` in the same round trip
          if (!queued_.empty()) {
            waited_ = 0;
            continue;
          }
        }
        // Long-poll in slices, so that a stop is noticed within a second.
        double slice = std::min(o_.wait, 1.0);
        const auto sent = Steady::now();
        auto jobs = c_.claim_next_many(o_.queue, o_.owner, o_.ttl, want, slice);
        if (jobs.empty()) {
          waited_ += slice;
          if (o_.exit_when_empty && waited_ >= o_.wait) break;
          continue;
        }
        waited_ = 0;
        take(std::move(jobs), sent);
        continue;  // a stop asked meanwhile is noticed before a command starts
      }
      // A renewal that fell due between two commands (while a failure was
      // reported or a batch completed) goes first: a job lost meanwhile is
      // dropped, never run.
      if (next_renew_ && Steady::now() >= *next_renew_) renew_held();
      if (queued_.empty()) continue;
      running_ = std::move(queued_.front());
      queued_.pop_front();
      running_ours_ = true;
      HeldLeases leases(*this);
      const ClaimedJob job = running_->job;  // running_ moves on once it finishes
      const bool stopped =
          handle(job, leases, [&](const std::string&, std::string out) {
            finish(std::move(out));
          });
      running_.reset();
      running_ours_ = false;
      if (stopped) break;  // the running one was released; the rest below
      ++done;
    }
    // What finished is stored; whatever else is held goes back to the queue.
    if (!finished_.empty()) complete_finished(0);
    for (const auto& h : queued_) {
      c_.release(h.job.id, o_.owner, h.job.fence);
      log("stopping: released " + escape_for_log(h.job.id));
    }
    queued_.clear();
    return 0;
  }

  // Reads every pending signal: SIGTERM and SIGINT ask for a stop (counted),
  // SIGCHLD only wakes the loop to reap the command.
  int take_signals() {
    int stops = 0;
    signalfd_siginfo si;
    while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) ++stops;
    }
    if (stops > 0) stopping_ = true;
    return stops;
  }

  bool stop_requested() {
    take_signals();
    return stopping_;
  }

  static std::string job_text(const ClaimedJob& job) {
    return "job " + escape_for_log(job.id) + " fence " + std::to_string(job.fence) + ": ";
  }

  // The leases kept while a command runs: when the next renewal is due, and
  // the renewal itself.
  class Leases {
   public:
    virtual ~Leases() = default;
    // None when nothing is left to renew.
    virtual std::optional<Steady::time_point> next_renew() const = 0;
    // Renews what is due; says why when this renewal found the running job's
    // lease lost.
    virtual std::optional<std::string> renew() = 0;
    // The running job's lease was found lost another way (check_still_ours):
    // no longer renewed.
    virtual void drop() = 0;
  };

  // Runs the command for one job, its lease kept by `leases`; true when the
  // worker must stop. Exit 0 with a storable output goes to
  // `store(log prefix, stdout)`; anything else is failed here.
  template <typename Store>
  bool handle(const ClaimedJob& job, Leases& leases, Store&& store) {
    const std::string what = job_text(job);
    if (job.id.find('\0') != std::string::npos) {
      // The environment is NUL-terminated: FENCEQ_JOB_ID would carry the id
      // cut at the NUL, another job's id. The daemon's backoff (not
      // --retry-in) spaces the attempts, so that a job no `fenceq work` can
      // take does not come straight back ahead of the rest of the queue.
      bool ok = c_.fail(job.id, o_.owner, job.fence,
                        "fenceq work: the job id contains a NUL byte, which cannot be passed "
                        "in FENCEQ_JOB_ID; the command was not run");
      log(what + (ok ? "failed" : "failed, but refused: the lease was lost") +
          " (its id contains a NUL byte; the command was not run)");
      return false;
    }
    auto r = run_command(job, leases);
    const std::string ended =
        status_text(r.status) + (r.killed ? ", killed after --kill-after" : "");
    // Once the command had exited, only what it left running was stopped.
    const std::string left = r.left_running ? "; what it left running was stopped" : "";
    switch (r.how) {
      case RunOutcome::stopped: {
        const std::string released =
            c_.release(job.id, o_.owner, job.fence) ? "lease released" : "lease already gone";
        if (r.was_running) {
          log(what + "stopped (" + ended + "), " + released);
        } else {
          log(what + "stop asked after the command had exited (" + ended + ")" + left +
              "; nothing stored, " + released);
        }
        return true;
      }
      case RunOutcome::lease_lost:
        if (r.was_running) {
          log(what + "lease lost while running (" + escape_for_log(r.lost) +
              "); the command was stopped (" + ended + "), nothing stored");
        } else {
          log(what + "lease lost after the command had exited (" + ended +
              "): " + escape_for_log(r.lost) + left + "; nothing stored");
        }
        return false;
      case RunOutcome::exited: break;
    }
    if (r.status == 0 && r.out.size() <= kMaxOutput && protocol::valid_utf8(r.out)) {
      store(what, std::move(r.out));
      return false;
    }
    if (r.status == kExitSnooze) {
      snooze(job, what);
      return false;
    }
    std::string error = r.status != 0 ? "exit status " + std::to_string(r.status) + ": " + r.err
                        : r.out.size() > kMaxOutput ? "output larger than 900 KiB"
                                                    : "output is not UTF-8";
    const auto retry = retry_in(job);
    bool ok = c_.fail(job.id, o_.owner, job.fence, printable(error), retry);
    std::string raised;
    if (retry && o_.retry_in && *retry > *o_.retry_in) {
      raised = "; retry in " + std::to_string(static_cast<long long>(*retry)) +
               " s, not --retry-in's, from attempt " + std::to_string(kRetryInAttempts) + " on";
    }
    log(what + (ok ? "failed (" : "failed, but refused: the lease was lost (") +
        (r.status != 0 ? status_text(r.status) : error) + ")" + (ok ? raised : ""));
    return false;
  }

  // The command exited kExitSnooze ("try again later"): the job is snoozed
  // for --snooze seconds (C3.14), its attempt given back and nothing stored,
  // so a command may put its job off any number of times without it dying.
  void snooze(const ClaimedJob& job, const std::string& what) {
    const bool ok = c_.snooze(job.id, o_.owner, job.fence, o_.snooze);
    const std::string exit = "exit " + std::to_string(kExitSnooze);
    log(what +
        (ok ? "snoozed for " + seconds_text(o_.snooze) + " s (" + exit + "), its attempt given back"
            : "snoozed, but refused: the lease was lost (" + exit + ")"));
  }

  // The delay before a failed job's next attempt: --retry-in (none: the
  // daemon's backoff), raised to that backoff from attempt kRetryInAttempts on.
  std::optional<double> retry_in(const ClaimedJob& job) const {
    if (!o_.retry_in || job.attempts < kRetryInAttempts) return o_.retry_in;
    const double backoff =
        std::min(std::ldexp(1.0, static_cast<int>(std::min<std::int64_t>(job.attempts - 1, 12))),
                 3600.0);
    return std::max(*o_.retry_in, backoff);
  }

  // The running job, read from the daemon (kCancelCheck): why it is no longer
  // this worker's, when it is not (cancelled: its fence moved on at once).
  // Says nothing when the daemon does not answer in time: the renewals judge
  // that. A client of its own, whose calls wait at most kCancelCheck.
  std::optional<std::string> check_still_ours(const ClaimedJob& job) {
    if (!o_.connect) return std::nullopt;
    try {
      if (!checker_) checker_.emplace(o_.connect(kCancelCheck));
      // Its list row (answered by the daemon's reader when it has one): the
      // status the daemon reckons, with its fence and owner.
      ListOptions one;
      one.prefix = job.id;
      one.limit = 1;
      const auto rows = checker_->list(one);
      const JobInfo* row = !rows.empty() && rows.front().id == job.id ? &rows.front() : nullptr;
      if (row && row->status == JobStatus::leased && row->fence == job.fence &&
          row->owner == o_.owner) {
        return std::nullopt;
      }
      const std::string why =
          !row                                 ? "the job is gone"
          : row->status == JobStatus::cancelled ? "cancelled"
          : row->fence != job.fence ? "claimed again, fence " + std::to_string(row->fence)
          : row->status == JobStatus::leased ? "leased by " + row->owner.value_or("?")
                                             : std::string(protocol::status_name(row->status));
      return "found " + why + " while its command ran";
    } catch (const Error&) {
      checker_.reset();  // a fresh connection next time
      return std::nullopt;
    }
  }

  // The lease as the worker reckons it, and its renewals.
  struct Lease {
    Steady::time_point end;         // no later than the daemon's `until`
    Steady::time_point next_renew;  // when to renew next
    bool ours = true;
    std::string lost;
  };

  // How long a renewal waits for its answer: never past the lease's end (as
  // reckoned), but at least kMinRenewWait and at most --timeout.
  milliseconds renew_wait(Steady::time_point lease_end, Steady::time_point sent) const {
    const auto left = std::chrono::ceil<milliseconds>(lease_end - sent);
    return std::clamp(left, kMinRenewWait, std::max(kMinRenewWait, o_.call_timeout));
  }

  // One renewal, due now. A refusal ends the lease; no answer (a timeout, the
  // daemon gone) is retried until the lease's end, and ends it then.
  void renew(const ClaimedJob& job, Lease& lease) {
    const auto sent = Steady::now();
    const auto wait = renew_wait(lease.end, sent);
    try {
      bool ok;
      if (wait >= o_.call_timeout || !o_.connect) {
        ok = c_.renew(job.id, o_.owner, job.fence, o_.ttl);
      } else {
        // A client of its own, whose call gives up by the lease's end. (The
        // worker's client cannot be given a shorter timeout per call.)
        Client quick = o_.connect(wait);
        ok = quick.renew(job.id, o_.owner, job.fence, o_.ttl);
      }
      if (!ok) {
        lease.ours = false;
        lease.lost = "the renewal was refused: cancelled, or no longer this worker's";
        return;
      }
      lease.end = sent + seconds(o_.ttl);
      lease.next_renew = sent + seconds(o_.ttl / 3);
    } catch (const Error& e) {
      const auto now = Steady::now();
      if (now >= lease.end) {
        lease.ours = false;
        lease.lost = std::string("no answer from the daemon until the lease's end: ") + e.what();
        return;
      }
      log("job " + escape_for_log(job.id) + " fence " + std::to_string(job.fence) +
          ": renewal failed (" + escape_for_log(e.what()) + "), retrying until the lease ends");
      lease.next_renew =
          now + std::min<Steady::duration>(seconds(o_.ttl / 3), kRenewRetry);
    }
  }

  // --prefetch 1: the one job's lease, renewed with `renew`.
  class OneLease : public Leases {
   public:
    OneLease(Worker& w, const ClaimedJob& job, Steady::time_point end) : w_(w), job_(job) {
      lease_.end = end;
      lease_.next_renew = Steady::now() + seconds(w.o_.ttl / 3);
    }
    std::optional<Steady::time_point> next_renew() const override {
      if (!lease_.ours) return std::nullopt;
      return lease_.next_renew;
    }
    std::optional<std::string> renew() override {
      w_.renew(job_, lease_);
      if (!lease_.ours) return lease_.lost;
      return std::nullopt;
    }
    void drop() override { lease_.ours = false; }

   private:
    Worker& w_;
    const ClaimedJob& job_;
    Lease lease_;
  };

  // --- --prefetch N: the jobs held ------------------------------------------

  struct Held {
    ClaimedJob job;
    Steady::time_point lease_end;  // no later than the daemon's `until`
    std::string result;            // finished: the command's stdout, to be stored
    std::string lost;              // set when its lease was found lost
  };

  // Every lease held, in the order of the batches that name them.
  std::vector<Held*> held() {
    std::vector<Held*> all;
    for (auto& h : queued_) all.push_back(&h);
    if (running_ && running_ours_) all.push_back(&*running_);
    for (auto& h : finished_) all.push_back(&h);
    return all;
  }

  // What a job costs in a batch of leases beyond its id, owner and result.
  static constexpr std::size_t kLeaseItemOverhead = 64;

  // Jobs just claimed (the claim sent at `sent`): they wait their turn.
  void take(std::vector<ClaimedJob> jobs, Steady::time_point sent) {
    for (auto& j : jobs) queued_.push_back(Held{std::move(j), sent + seconds(o_.ttl), {}, {}});
    if (!queued_.empty()) next_renew_ = sent + seconds(o_.ttl / 3);
  }

  // The running job succeeded: its result waits for the next complete_many
  // (sent first when adding it would make that request too large).
  void finish(std::string out) {
    const std::size_t bytes =
        running_->job.id.size() + o_.owner.size() + out.size() + kLeaseItemOverhead;
    if (!finished_.empty() && finished_bytes_ + bytes > kMaxCompleteBytes) complete_finished(0);
    running_->result = std::move(out);
    finished_.push_back(std::move(*running_));
    finished_bytes_ += bytes;
    running_.reset();
    running_ours_ = false;
  }

  // Completes every finished job in one complete_many; with `want` > 0 it also
  // claims up to `want` jobs in the same round trip, which then wait their turn.
  void complete_finished(long want) {
    std::vector<LeaseItem> items;
    items.reserve(finished_.size());
    for (auto& h : finished_) {
      items.push_back(LeaseItem{h.job.id, o_.owner, h.job.fence, std::move(h.result)});
    }
    const auto sent = Steady::now();
    std::vector<bool> completed;
    std::vector<ClaimedJob> next;
    if (want > 0) {
      auto r = c_.complete_many_and_claim(items, o_.queue, o_.ttl, want);
      completed = std::move(r.completed);
      next = std::move(r.next);
    } else {
      completed = c_.complete_many(items);
    }
    for (std::size_t i = 0; i < finished_.size(); ++i) {
      const bool ok = i < completed.size() && completed[i];
      log(job_text(finished_[i].job) +
          (ok ? "completed" : "completed, but refused: the lease was lost"));
    }
    finished_.clear();
    finished_bytes_ = 0;
    take(std::move(next), sent);
  }

  // Renews every held lease, with renew_many (several when they are too many
  // for one request). A refusal drops that job; no answer is retried until
  // its lease's end and drops it then; the others go on. Says why when the
  // running job's lease was found lost.
  std::optional<std::string> renew_held() {
    const auto all = held();
    if (all.empty()) {
      next_renew_.reset();
      return std::nullopt;
    }
    const auto sent = Steady::now();
    auto earliest = all.front()->lease_end;
    for (const auto* h : all) earliest = std::min(earliest, h->lease_end);
    const auto wait = renew_wait(earliest, sent);
    enum class Answer { none, renewed, refused };
    std::vector<Answer> answers(all.size(), Answer::none);
    std::string error;
    try {
      std::optional<Client> quick;
      // A client of its own, whose calls give up by the earliest lease's end.
      if (wait < o_.call_timeout && o_.connect) quick.emplace(o_.connect(wait));
      Client& client = quick ? *quick : c_;
      for (std::size_t begin = 0; begin < all.size();) {
        std::vector<LeaseItem> items;
        std::size_t bytes = 0;
        std::size_t end = begin;
        for (; end < all.size() &&
               items.size() < static_cast<std::size_t>(protocol::kMaxBatchItems);
             ++end) {
          const std::size_t b = all[end]->job.id.size() + o_.owner.size() + kLeaseItemOverhead;
          if (!items.empty() && bytes + b > kMaxRenewBytes) break;
          items.push_back(LeaseItem{all[end]->job.id, o_.owner, all[end]->job.fence, {}});
          bytes += b;
        }
        const auto ok = client.renew_many(items, o_.ttl);
        for (std::size_t i = 0; i < items.size(); ++i) {
          answers[begin + i] = i < ok.size() && ok[i] ? Answer::renewed : Answer::refused;
        }
        begin = end;
      }
    } catch (const Error& e) {
      error = e.what();
    }
    const auto now = Steady::now();
    std::size_t retrying = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      Held& h = *all[i];
      switch (answers[i]) {
        case Answer::renewed: h.lease_end = sent + seconds(o_.ttl); break;
        case Answer::refused:
          h.lost = "the renewal was refused: cancelled, or no longer this worker's";
          break;
        case Answer::none:
          if (now >= h.lease_end) {
            h.lost = "no answer from the daemon until the lease's end: " + error;
          } else {
            ++retrying;
          }
          break;
      }
    }
    if (retrying > 0) {
      log("renewal of " + std::to_string(retrying) + " held job" + (retrying == 1 ? "" : "s") +
          " failed (" + escape_for_log(error) + "), retrying until their leases end");
      next_renew_ = now + std::min<Steady::duration>(seconds(o_.ttl / 3), kRenewRetry);
    } else {
      next_renew_ = sent + seconds(o_.ttl / 3);
    }
    // The lost ones are no longer ours: dropped, and the others go on.
    std::erase_if(queued_, [](const Held& h) {
      if (h.lost.empty()) return false;
      log(job_text(h.job) + "lease lost before its command ran (" + escape_for_log(h.lost) +
          "); dropped, the command was not run");
      return true;
    });
    std::erase_if(finished_, [this](const Held& h) {
      if (h.lost.empty()) return false;
      log(job_text(h.job) + "lease lost before its result was stored (" +
          escape_for_log(h.lost) + "); nothing stored");
      finished_bytes_ -= h.job.id.size() + o_.owner.size() + h.result.size() + kLeaseItemOverhead;
      return true;
    });
    if (running_ && running_ours_ && !running_->lost.empty()) {
      running_ours_ = false;  // its command is stopped and the loss logged by handle()
      return running_->lost;
    }
    return std::nullopt;
  }

  // --prefetch N: every held lease, renewed together while a command runs.
  class HeldLeases : public Leases {
   public:
    explicit HeldLeases(Worker& w) : w_(w) {}
    std::optional<Steady::time_point> next_renew() const override {
      if (w_.held().empty()) return std::nullopt;
      return w_.next_renew_;
    }
    std::optional<std::string> renew() override { return w_.renew_held(); }
    void drop() override { w_.running_ours_ = false; }

   private:
    Worker& w_;
  };

  // Environment and argv of the command, made before fork: the child of a
  // multi-threaded process may only call async-signal-safe functions.
  struct Exec {
    std::vector<std::string> env_strings;
    std::vector<char*> argv, envp;
    std::string cannot_run;
  };

  Exec prepare_exec(const ClaimedJob& job) const {
    Exec x;
    std::vector<std::pair<std::string, std::string>> ours = {
        {"FENCEQ_JOB_ID", job.id},
        {"FENCEQ_FENCE", std::to_string(job.fence)},
        {"FENCEQ_ATTEMPTS", std::to_string(job.attempts)},
        {"FENCEQ_QUEUE", o_.queue},
        {"FENCEQ_OWNER", o_.owner},
        // Issue 33: the job's headers as a JSON object ({} for none), and
        // its W3C trace context as OpenTelemetry's environment carrier names it.
        {"FENCEQ_HEADERS", nlohmann::json(job.headers).dump()}};
    for (const auto& [name, env] : {std::pair{"traceparent", "TRACEPARENT"},
                                    std::pair{"tracestate", "TRACESTATE"}}) {
      auto h = job.headers.find(name);
      if (h != job.headers.end() && h->second.find('\0') == std::string::npos) {
        ours.emplace_back(env, h->second);
      }
    }
    for (char** e = environ; e && *e; ++e) {
      std::string_view entry(*e);
      bool replaced = std::any_of(ours.begin(), ours.end(), [&](const auto& kv) {
        return entry.size() > kv.first.size() && entry.substr(0, kv.first.size()) == kv.first &&
               entry[kv.first.size()] == '=';
      });
      if (!replaced) x.env_strings.emplace_back(entry);
    }
    for (const auto& [k, v] : ours) x.env_strings.push_back(k + "=" + v);
    for (auto& s : x.env_strings) x.envp.push_back(s.data());
    x.envp.push_back(nullptr);
    for (const auto& a : o_.command) x.argv.push_back(const_cast<char*>(a.c_str()));
    x.argv.push_back(nullptr);
    x.cannot_run = "cannot run " + o_.command.front() + ": ";
    return x;
  }

  [[noreturn]] static void exec_child(const Exec& x, pid_t parent, int in, int out, int err) {
    ::setpgid(0, 0);
    // Killed with the tool, even by SIGKILL, which leaves the tool no say.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the tool died before prctl
    // The tool ignores SIGPIPE; an ignored signal would stay ignored across exec.
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execvpe(x.argv[0], x.argv.data(), x.envp.data());
    const char* why = std::strerror(errno);
    [[maybe_unused]] auto n1 = ::write(2, x.cannot_run.data(), x.cannot_run.size());
    [[maybe_unused]] auto n2 = ::write(2, why, std::strlen(why));
    [[maybe_unused]] auto n3 = ::write(2, "\n", 1);
    ::_exit(127);
  }

  RunOutcome run_command(const ClaimedJob& job, Leases& leases) {
    const Exec x = prepare_exec(job);
    Pipe in, out, err;
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) exec_child(x, parent, in.read_end(), out.write_end(), err.write_end());
    ::setpgid(pid, pid);  // as the child does: whichever runs first
    const auto grace = seconds(o_.kill_after);
    Command cmd(pid, grace);
    in.close_read();
    out.close_write();
    err.close_write();
    ::fcntl(in.write_end(), F_SETFL, O_NONBLOCK);

    RunOutcome r;
    const std::string payload = job.payload ? job.payload->bytes : std::string();
    std::size_t written = 0;
    if (payload.empty()) in.close_write();
    bool out_open = true, err_open = true;
    bool stopping = false;  // SIGTERM sent to the command
    Steady::time_point kill_at;
    const auto stop = [&](decltype(r.how) why) {
      if (stopping) return;
      stopping = true;
      r.how = why;
      // A command that has exited (its output not yet read to the end) is
      // not stopped by this: the log must not say it was.
      r.was_running = !cmd.exited();
      in.close_write();
      const bool got = cmd.signal(SIGTERM);
      r.left_running = !r.was_running && got;
      kill_at = Steady::now() + grace;
    };
    const auto kill_now = [&] {
      if (r.killed) return;
      r.killed = true;
      cmd.signal(SIGKILL);
    };
    auto next_check = Steady::now() + kCancelCheck;
    for (;;) {
      if (cmd.exited()) {
        // Its output is read to the end: whoever holds its pipes is still at
        // work (and, stopping, kept from blocking on a full pipe meanwhile).
        // Stopping, what is left of its group then goes too; once SIGKILL has
        // been sent, pipes still open are held outside its group: not waited for.
        if (!out_open && !err_open) {
          if (stopping) cmd.signal(SIGKILL);
          break;
        }
        if (stopping && r.killed) break;
      }
      if (stopping && !r.killed && Steady::now() >= kill_at) kill_now();

      std::vector<pollfd> fds;
      if (out_open) fds.push_back({out.read_end(), POLLIN, 0});
      if (err_open) fds.push_back({err.read_end(), POLLIN, 0});
      if (in.write_end() >= 0) fds.push_back({in.write_end(), POLLOUT, 0});
      fds.push_back({sfd_, POLLIN, 0});  // SIGTERM, SIGINT, and SIGCHLD when it exits
      std::optional<Steady::time_point> wake = leases.next_renew();
      if (!stopping && wake) wake = std::min(*wake, next_check);
      if (stopping && !r.killed) wake = wake ? std::min(*wake, kill_at) : kill_at;
      int timeout = -1;
      if (wake) {
        auto ms = std::chrono::ceil<milliseconds>(*wake - Steady::now()).count();
        timeout = static_cast<int>(std::clamp<long long>(ms, 0, 60'000));
      }
      ::poll(fds.data(), fds.size(), timeout);
      for (const auto& p : fds) {
        if (!p.revents) continue;
        if (p.fd == sfd_) {
          if (take_signals() > 0) {
            if (stopping) {
              kill_now();  // asked again: no more grace
            } else {
              stop(RunOutcome::stopped);
            }
          }
          continue;
        }
        if (p.fd == in.write_end()) {
          ssize_t n = ::write(p.fd, payload.data() + written, payload.size() - written);
          if (n > 0) written += static_cast<std::size_t>(n);
          // EPIPE: the command closed its stdin (or exited) without reading it
          // all, which is its business: it is judged by its exit status.
          if (n < 0 && errno != EAGAIN && errno != EINTR) written = payload.size();
          if (written >= payload.size()) in.close_write();
          continue;
        }
        char buf[65536];
        ssize_t n = ::read(p.fd, buf, sizeof buf);
        auto& sink = p.fd == out.read_end() ? r.out : r.err;
        if (n > 0) {
          if (sink.size() < kMaxOutput + 1) sink.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          (p.fd == out.read_end() ? out_open : err_open) = false;
        }
      }
      if (const auto due = leases.next_renew(); due && Steady::now() >= *due) {
        // Renewed while the command runs, and while it is given its grace
        // after a stop signal: until it is gone, the job is still ours.
        if (auto lost = leases.renew()) {
          r.lost = *lost;
          stop(RunOutcome::lease_lost);
        }
      }
      if (!stopping && !cmd.exited() && leases.next_renew() && Steady::now() >= next_check) {
        if (auto lost = check_still_ours(job)) {
          leases.drop();
          r.lost = *lost;
          stop(RunOutcome::lease_lost);
        }
        next_check = Steady::now() + kCancelCheck;
      }
    }
    r.status = cmd.status();
    return r;
  }

  Client& c_;
  const WorkOptions& o_;
  int sfd_;
  bool stopping_ = false;
  double waited_ = 0;
  Steady::time_point claimed_at_;
  // --prefetch N: the jobs held, each in one of these.
  std::deque<Held> queued_;      // claimed, waiting their turn
  std::optional<Held> running_;  // its command running
  bool running_ours_ = false;    // and its lease not found lost
  std::vector<Held> finished_;   // succeeded, not completed yet
  std::size_t finished_bytes_ = 0;
  std::optional<Steady::time_point> next_renew_;  // of every held lease
  std::optional<Client> checker_;  // check_still_ours()'s
};

}  // namespace

int run_worker(Client& client, const WorkOptions& options) {
  if (options.command.empty()) throw std::runtime_error("work: no command given");
  // The worker waits for its command's exit by SIGCHLD: an ignored SIGCHLD
  // (inherited through exec) would have the kernel reap it unseen.
  ::signal(SIGCHLD, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  int sfd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) throw std::runtime_error("signalfd failed");
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_sfd{sfd};
  WorkOptions o = options;
  if (o.owner.empty()) {
    char host[256] = "worker";
    ::gethostname(host, sizeof host - 1);
    o.owner = std::string(host) + ":" + std::to_string(::getpid());
  }
  Worker w(client, o, sfd);
  return w.run();
}

}  // namespace fenceq::tool
