// `fenceq work`: a ready-made fenced worker around any command.
#pragma once

#include <fenceq/client.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fenceq::tool {

// The exit status of a command that asks for its job to be snoozed:
// EX_TEMPFAIL (sysexits.h), "temporary failure, try again later".
inline constexpr int kExitSnooze = 75;

struct WorkOptions {
  std::string queue = "default";
  std::string owner;           // default: HOSTNAME:PID
  double ttl = 30;             // lease length; renewed every ttl/3 while the command runs
  double wait = 30;            // long-poll for the next job, in slices of at most 1 s
  long max_jobs = 0;           // stop after this many jobs (0: no limit)
  // Jobs held at once (1..1000). 1: one job at a time, with the single ops.
  // More: up to `prefetch` jobs claimed in one claim_next_many, run in turn,
  // every held lease renewed with one renew_many, the successful ones
  // completed together (and the next ones claimed) in one complete_many.
  long prefetch = 1;
  bool exit_when_empty = false;
  std::optional<double> retry_in;  // passed to fail(); default: the daemon's backoff
  // A command that exits with kExitSnooze: its job is snoozed (C3.14) for
  // this many seconds (0..1e9) instead of failed: its attempt given back, no
  // error recorded.
  double snooze = 60;
  double kill_after = 10;      // seconds from SIGTERM to SIGKILL when the command must stop
  std::vector<std::string> command;
  // How long one call waits for the daemon's reply (the tool's --timeout), and
  // how to reach the daemon with a shorter wait: a renewal never waits past the
  // lease's end, so that a daemon gone silent is noticed by then. Unset: every
  // renewal goes through the worker's client.
  std::chrono::milliseconds call_timeout{5000};
  std::function<Client(std::chrono::milliseconds timeout)> connect;
};

// Claims jobs of `queue` one at a time and runs `command` for each, in a
// process group of its own: the payload on its stdin, FENCEQ_JOB_ID /
// FENCEQ_FENCE / FENCEQ_ATTEMPTS / FENCEQ_QUEUE / FENCEQ_OWNER in its
// environment. The lease is renewed while it runs. Exit 0: complete with its
// stdout; exit kExitSnooze (75, EX_TEMPFAIL): snooze the job for
// `options.snooze` seconds (its attempt given back, nothing stored);
// otherwise: fail with its stderr. A command that does not read its
// stdin is judged the same way. A lease lost (a renewal refused, or no answer
// from the daemon until the lease's end) stops the command: SIGTERM to its
// group, SIGKILL `kill_after` seconds later, reaped and logged before the
// worker goes on; its result could not be stored. (A command that had exited
// by then, its output not yet read to the end, is not stopped: the log says it
// had exited, and stopped only what it left running, if anything.) SIGTERM or
// SIGINT: the command is stopped the same way (a second signal kills it at
// once), the lease released, and the worker returns 0. A job whose id holds a NUL byte
// (it cannot reach FENCEQ_JOB_ID intact) is failed without running the command.
//
// With `prefetch` N > 1 it holds up to N jobs: claimed together, run one after
// the other, all their leases (waiting, running, finished but not yet
// completed) renewed together. A failure (or a snooze) is reported at once;
// successes are completed together once no job is left waiting, in the same
// round trip as the claim of the next ones. A job whose renewal or complete is refused is
// no longer ours: dropped and logged (the running one stopped as above), the
// others go on. On a stop, the finished jobs are completed and every other
// held lease released.
int run_worker(Client& client, const WorkOptions& options);

// `s` for one line of the tool's log: control characters (C0, DEL, C1), line
// and paragraph separators, bidirectional overrides and bytes that are not
// UTF-8 become \n, \t, \xNN or \uNNNN escapes, and '\' becomes "\\", so that
// an id, owner or error text never splits or forges a line.
std::string escape_for_log(std::string_view s);

}  // namespace fenceq::tool
