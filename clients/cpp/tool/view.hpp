// How the fenceq tool shows things to a person: tables and relative times on
// a terminal ("lease ends in 12 s"), and `fenceq top`, a live view of the
// queues. Scripts get JSON instead (--json, or stdout not a terminal); the
// JSON forms are fenceq.cpp's.
#pragma once

#include <fenceq/client.hpp>

#include <chrono>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace fenceq::tool {

// "in 12 s", "3 min ago", "now": `at` (epoch seconds) against `now`.
std::string relative_time(double at, double now);

// One job's whole record (`fenceq show`): its row, result and payload (text
// as it is, binary as hex; at most 2,000 characters, then its size), its
// headers, its saved steps (each value shown as the payload is), the
// signal that woke it and, while it is suspended, when its wait ends.
// `linked`: the states of the job's parents and blocked children (issue
// 32), as `results` gave them; their lines then say each one's state.
void print_job(std::ostream& out, const JobDetail& job, double now,
               const JobResults& linked = {});
// `list` as a table, one job a row (a GROUP column when a job has a group).
void print_job_table(std::ostream& out, const std::vector<JobInfo>& jobs, double now);
// `stats` as a table of queues, their limits, their groups (waiting, each
// group's limits) when they have any, their counters, then the daemon's figures.
void print_stats(std::ostream& out, const Stats& st);
// `schedule list` as a table: each schedule's cron, zone, queue, next and last tick.
void print_schedules(std::ostream& out, const std::vector<Schedule>& list, double now);
// `fenceq results`: ID, STATE and RESULT of each job asked ("-": unknown).
void print_results(std::ostream& out, const JobResults& results);
// `state` of one job, a field a line.
void print_state(std::ostream& out, const JobState& s, double now);

struct TopOptions {
  double interval = 1.0;  // seconds between refreshes
  bool once = false;      // one frame, no screen control: for a pipe, a test, a README
  long leases = 10;       // how many of the leases that end soonest to show
  // How long one call waits for the daemon's reply (the tool's --timeout),
  // and how to reach the daemon with a shorter wait: the live view's calls
  // give up after about a refresh. Unset: every call goes through `client`.
  std::chrono::milliseconds call_timeout{5000};
  std::function<Client(std::chrono::milliseconds timeout)> connect;
};

// `fenceq top`: per queue, the jobs by state, claims and completions per
// second (from the daemon's counters between two refreshes), the oldest ready
// job's age; then the leases that end soonest with their owner and fence.
// Lines fit the terminal's width ($COLUMNS, else 80, when stdout is not a
// terminal): the least important columns go first, never QUEUE or REFUSED.
// Paused and limited queues are marked next to their name, with a legend. On
// a terminal, a REFUSED count that grew since the last refresh stands out.
// Redraws every `interval` seconds until `q` (or Ctrl-C); the terminal is put
// back as it was. While the daemon does not answer, the live view says
// "reconnecting…" and tries again at each refresh, until it answers again.
// Throws Error when the daemon does not answer the first request (or, with
// `once`, any).
int run_top(Client& client, const TopOptions& options);

}  // namespace fenceq::tool
