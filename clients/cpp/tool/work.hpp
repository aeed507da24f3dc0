// `fenceq work`: a ready-made fenced worker around any command.
#pragma once

#include <fenceq/client.hpp>

#include <string>
#include <vector>

namespace fenceq::tool {

struct WorkOptions {
  std::string queue = "default";
  std::string owner;           // default: HOSTNAME:PID
  double ttl = 30;             // lease length; renewed every ttl/3 while the command runs
  double wait = 30;            // long-poll for the next job, in slices of at most 1 s
  long max_jobs = 0;           // stop after this many jobs (0: no limit)
  bool exit_when_empty = false;
  std::optional<double> retry_in;  // passed to fail(); default: the daemon's backoff
  std::vector<std::string> command;
};

// Claims jobs of `queue` one at a time and runs `command` for each: the payload
// on its stdin, FENCEQ_JOB_ID / FENCEQ_FENCE / FENCEQ_ATTEMPTS / FENCEQ_QUEUE /
// FENCEQ_OWNER in its environment. The lease is renewed while it runs. Exit 0:
// complete with its stdout; otherwise: fail with its stderr. A lost lease kills
// the command (its result could not be stored). SIGTERM or SIGINT: the command
// is stopped, the lease released, and the worker returns 0.
int run_worker(Client& client, const WorkOptions& options);

}  // namespace fenceq::tool
