// Test support: a real fenceqd process on a temporary directory, and small
// helpers to run commands. Integration tests never mock the daemon.
#pragma once

#include <sys/types.h>

#include <fenceq/client.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pg.hpp"
#include "spawn.hpp"

namespace fenceq::test {

// A fresh directory under /tmp (short, so IPC paths stay under the 107-byte
// sockaddr_un limit), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // The database a daemon of this directory uses: `fenceq.db` in it, or with
  // FENCEQ_TEST_STORE=postgres a fresh PostgreSQL schema (pg.hpp) that lives
  // as long as this directory.
  std::string db() const;

 private:
  std::filesystem::path path_;
  mutable std::unique_ptr<PgSchema> pg_;
};

// How the daemon's process starts, beyond its arguments.
struct SpawnOptions {
  long nofile_soft = -1, nofile_hard = -1;  // its RLIMIT_NOFILE; -1: this process's
  int umask = -1;                           // its umask; -1: this process's
};

// Starts build/bin/fenceqd on `dir` (db dir.db(), socket `fenceqd.sock`)
// and waits until it answers ping. Stderr goes to `fenceqd.log` in `dir`.
// The destructor kills a daemon still running.
class Daemon {
 public:
  // `db`: another database than dir.db() (sidecars sharing one PostgreSQL).
  explicit Daemon(const TempDir& dir, std::vector<std::string> args = {"--clock", "client"},
                  bool wait_ready = true, std::string db = "", SpawnOptions how = {});
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  const std::string& db() const { return db_; }
  pid_t pid() const { return proc_ ? proc_->pid() : -1; }
  bool running() const { return proc_.has_value(); }
  // Whether the process is still there (reaps it, and remembers how it ended,
  // when it is not).
  bool alive();
  // How it ended, as stop() returns it; -1 while it runs.
  int exit_status() const { return exit_status_; }

  // Sends `sig` and waits for the process; returns its exit status, or
  // 128 + signal when killed.
  int stop(int sig);
  void kill9() { stop(9); }
  // Starts it again on the same directory and waits until it answers.
  void restart();
  // Starts it (stopped) on another database `db` from now on, with `once`
  // added to its arguments for this start only (`--restored`), and waits
  // until it answers.
  void start_on(std::string db, const std::vector<std::string>& once = {});
  std::string log() const;
  // Waits until the daemon idles (its serving thread blocked in poll), sends
  // SIGSTOP, and waits until every thread of the daemon has stopped: kill()
  // returns before that, and a request sent meanwhile could still be served.
  void pause();
  void resume();  // SIGCONT

 private:
  void spawn();
  const TempDir& dir_;
  std::vector<std::string> args_;
  SpawnOptions spawn_;
  std::string endpoint_, db_;
  std::optional<Child> proc_;  // while started and not yet seen to end
  int exit_status_ = -1;
};

struct RunResult {
  int status = -1;  // exit status
  std::string out;  // stdout and stderr, interleaved
};

// Runs argv[0] with the arguments (no shell) and captures its output. One
// still running after kRunLimit is killed (SIGKILL): its status is then
// 128 + 9 and its output ends with a line that says so.
inline constexpr std::chrono::seconds kRunLimit{120};
RunResult run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});

// Paths of the built binaries (set by CMake). FENCEQ_TEST_FENCEQD_BIN, when
// set, names another fenceqd to test (an older build, to show a test fails
// there).
std::string fenceqd_path();
std::string fenceq_tool_path();
// The fenceq tool run against `d` (a 3 s --timeout) with `args`.
RunResult tool(const Daemon& d, std::vector<std::string> args);
// Enqueue options for queue `q`, with `payload` as text (none when empty)
// and `priority`.
fenceq::EnqueueOptions in_queue(std::string q, std::string payload = "", std::int64_t priority = 0);
// `id`'s row of `list`, as the `job` op answers it (FAILs when there is none).
fenceq::JobInfo listed(fenceq::Client& c, const std::string& id);
// Enqueues a job of queue "ticks" at `now` (client clock), each its own
// batch, until `reaped()` holds, at most 50 times 100 ms: SQLite reaps (and
// ends overrun attempts) with every batch, a PostgreSQL sidecar at most
// every second (Executor::reap_due). Whether it came.
bool until_reaped(fenceq::Client& c, double now, const std::function<bool()>& reaped);
// `queue`'s entry of stats (nullopt when stats does not list it).
std::optional<fenceq::QueueStats> queue_stats(fenceq::Client& c, const std::string& queue);
std::string source_dir();

}  // namespace fenceq::test
