// `fenceq work`, the tool's worker subcommand, against the real fenceqd: it
// runs a command per job, renews its lease while the command runs, stores
// its result or error, and stops the command's whole process group when the
// lease is lost or the tool is asked to stop. Part of the tool's suite
// (test_tool); the queue's own behaviour is tested in test_queue.cpp.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fenceq/client.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "daemon.hpp"

using fenceq::Client;
using fenceq::EnqueueOptions;
using fenceq::JobStatus;
using fenceq::test::Daemon;
using fenceq::test::in_queue;
using fenceq::test::listed;
using fenceq::test::TempDir;
using namespace std::chrono_literals;

namespace {

std::string write_script(const TempDir& dir, const std::string& name, const std::string& body) {
  auto path = dir.file(name);
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

// A process we may not be the parent of (a command's own child, or a command
// left behind by a tool that has exited): alive while /proc lists it in any
// state but zombie (nobody may reap an orphan here: PID 1 need not be init).
bool alive(pid_t pid) {
  // Plain read(2): a process reaped between open and read makes read fail
  // with ESRCH, which std::ifstream turns into an exception (CI saw it).
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return false;
  const std::string stat(buf, static_cast<size_t>(n));
  auto p = stat.rfind(')');
  return p != std::string::npos && p + 2 < stat.size() && stat[p + 2] != 'Z' &&
         stat[p + 2] != 'X';
}

// Processes a test's commands started: killed at the end of the test if they
// are still there, so that a failing check leaves nothing running.
struct KillAtEnd {
  std::vector<pid_t> pids;
  ~KillAtEnd() {
    for (pid_t p : pids) {
      if (p > 0 && alive(p)) ::kill(p, SIGKILL);
    }
  }
};

// `fenceq work` (or any fenceq command) in the background, its stdout and
// stderr in a file of `dir`; killed if still running when the test ends.
class BackgroundTool {
 public:
  BackgroundTool(const TempDir& dir, const Daemon& d, const std::vector<std::string>& args)
      : log_(dir.file("tool-" + std::to_string(++count_) + ".log")),
        proc_(command(d, args, log_)) {}

  void signal(int sig) { proc_.signal(sig); }
  // Its exit status (128 + signal when killed), or nullopt when it is still
  // running after `limit`.
  std::optional<int> wait_for(std::chrono::milliseconds limit) { return proc_.wait_for(limit); }
  std::string log() const {
    std::ifstream in(log_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  static fenceq::test::Command command(const Daemon& d, const std::vector<std::string>& args,
                                       const std::string& log) {
    std::vector<std::string> argv{fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint()};
    argv.insert(argv.end(), args.begin(), args.end());
    return {.argv = std::move(argv),
            .output = fenceq::test::Command::Output::file,
            .output_file = log};
  }
  static inline int count_ = 0;
  std::string log_;
  fenceq::test::Child proc_;
};

// The pid a command script run by `tool` wrote to `file` (one line), once it
// is there; fails at once if the tool exits first.
pid_t wait_pid_file(const std::string& file, BackgroundTool& tool) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(file);
    std::string line;
    if (std::getline(in, line) && !in.eof() && !line.empty()) return std::stoi(line);
    if (auto status = tool.wait_for(0ms)) {
      FAIL("the tool exited (status " << *status << ") before its command wrote " << file << ": "
                                      << tool.log());
    }
    std::this_thread::sleep_for(10ms);
  }
  FAIL("no pid in " << file << " within 10 s");
  return -1;
}

// A command script that records its pid and the pid of the `sleep` it starts
// (in its own process group, as `fenceq work` runs it), then waits on it.
std::string sleeper_script(const TempDir& dir) {
  return write_script(dir, "sleeper.sh",
                      "echo $$ > " + dir.file("cmd.pid") + "\n" + "sleep 30 &\n" + "echo $! > " +
                          dir.file("child.pid") + "\n" + "wait\n");
}

// One that ignores SIGTERM, as do its children (an ignored signal stays
// ignored across exec).
std::string stubborn_script(const TempDir& dir) {
  return write_script(dir, "stubborn.sh",
                      "trap '' TERM\n"
                      "echo $$ > " +
                          dir.file("cmd.pid") + "\n" + "while :; do sleep 0.1; done\n");
}

// Whether `log` has `prefix` followed by one of `endings`: a lease lost
// while a command runs is found by whichever comes first, its renewal or the
// check of its state every second, and each says it in its own words.
bool has_either(const std::string& log, const std::string& prefix,
                std::initializer_list<std::string> endings) {
  for (const auto& e : endings) {
    if (log.find(prefix + e) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("fenceq work: runs a script per job, renews past the TTL, completes or fails") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  // Reads the payload, takes 1.6 s (past a 1 s lease), writes its result;
  // a payload "bad" makes it fail with a message on stderr.
  auto script = write_script(dir, "job.sh",
                             "read x\n"
                             "if [ \"$x\" = bad ]; then echo \"cannot do $x\" >&2; exit 3; fi\n"
                             "sleep 1.6\n"
                             "echo \"did $x as $FENCEQ_OWNER with fence $FENCEQ_FENCE\"\n");
  REQUIRE(c.enqueue("good", in_queue("w", "resize")));
  EnqueueOptions bad = in_queue("w", "bad");
  bad.max_attempts = 1;
  REQUIRE(c.enqueue("bad", bad));
  auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(),
                              "work", "--queue", "w", "--ttl", "1", "--owner", "w1", "--wait",
                              "1", "--exit-when-empty", "--", script});
  INFO(r.out);
  CHECK(r.status == 0);
  auto good = c.state("good");
  CHECK(good->done);
  CHECK(good->result == "did resize as w1 with fence 1\n");
  CHECK(listed(c, "bad").status == JobStatus::dead);
  CHECK(listed(c, "bad").error.value_or("").find("cannot do bad") != std::string::npos);
}

TEST_CASE("fenceq work: SIGTERM stops the command and releases the lease") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  auto script = write_script(dir, "slow.sh", "sleep 30\n");
  REQUIRE(c.enqueue("slow", in_queue("s")));
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "s", "--ttl", "30", "--owner", "w2", "--", script});
  for (int i = 0; i < 100 && !c.state("slow")->owner; ++i) std::this_thread::sleep_for(50ms);
  REQUIRE(c.state("slow")->owner == "w2");
  auto t0 = std::chrono::steady_clock::now();
  tool.signal(SIGTERM);
  auto status = tool.wait_for(60s);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  INFO(tool.log());
  CHECK(status == 0);
  auto st = c.state("slow");
  CHECK_FALSE(st->owner);  // released
  CHECK(st->fence == 1);
  CHECK_FALSE(st->done);
  // Claimable again at once by someone else.
  CHECK(c.claim("slow", "w3", 5) == 2);
}

TEST_CASE("fenceq work: a command that does not read a large payload is judged by its exit "
          "status, the tool does not die of SIGPIPE") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  // Larger than a pipe holds (64 KiB): the tool is still writing it when the
  // command exits without reading.
  const std::string big(200 * 1024, 'p');
  auto script = write_script(dir, "noread.sh",
                             "if [ \"$FENCEQ_JOB_ID\" = unread-bad ]; then echo nope >&2; exit 4; fi\n"
                             "echo done\n");
  REQUIRE(c.enqueue("unread-ok", in_queue("pipe", big, 1)));
  EnqueueOptions bad = in_queue("pipe", big);
  bad.max_attempts = 1;
  REQUIRE(c.enqueue("unread-bad", bad));
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "pipe", "--ttl", "5", "--owner", "w1", "--wait", "1",
                       "--exit-when-empty", "--", script});
  auto status = tool.wait_for(10s);
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);  // before the fix: 141, killed by SIGPIPE
  auto ok = c.state("unread-ok");
  CHECK(ok->done);
  CHECK(ok->result == "done\n");
  CHECK(listed(c, "unread-bad").status == JobStatus::dead);
  CHECK(listed(c, "unread-bad").error.value_or("").find("exit status 4: nope") != std::string::npos);
}

TEST_CASE("fenceq work: the daemon gone mid-job, the command and what it started are stopped "
          "and reaped before the tool exits") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  REQUIRE(c.enqueue("orphan", in_queue("gone")));
  auto script = sleeper_script(dir);
  BackgroundTool tool(dir, d,
                      {"--timeout", "1", "work", "--queue", "gone", "--ttl", "1", "--owner", "w1",
                       "--wait", "1", "--", script});
  KillAtEnd leftovers;
  const pid_t cmd = wait_pid_file(dir.file("cmd.pid"), tool);
  const pid_t child = wait_pid_file(dir.file("child.pid"), tool);
  leftovers.pids = {cmd, child};
  d.kill9();
  // Renewals get no answer; at the lease's end (1 s) the command is stopped,
  // then the next claim times out (1 s + a 1 s long-poll) and the tool exits.
  auto status = tool.wait_for(8s);
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 2);  // the daemon is unreachable: an error
  CHECK_FALSE(alive(cmd));
  CHECK_FALSE(alive(child));
  CHECK(tool.log().find("job orphan fence 1: lease lost while running (no answer from the "
                        "daemon until the lease's end") != std::string::npos);
  CHECK(tool.log().find("the command was stopped") != std::string::npos);
}

TEST_CASE("fenceq work: a lease lost under a running command stops its whole process group, "
          "then the tool goes on") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  REQUIRE(c.enqueue("taken", in_queue("lost")));
  auto script = sleeper_script(dir);
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "lost", "--ttl", "1", "--owner", "w1", "--wait", "1",
                       "--exit-when-empty", "--", script});
  KillAtEnd leftovers;
  const pid_t cmd = wait_pid_file(dir.file("cmd.pid"), tool);
  const pid_t child = wait_pid_file(dir.file("child.pid"), tool);
  leftovers.pids = {cmd, child};
  // The lease ends under the tool's feet (retry in 60 s: not claimed again
  // here); its next renewal is refused.
  REQUIRE(c.fail("taken", "w1", 1, "taken away", 60.0));
  auto status = tool.wait_for(8s);
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK_FALSE(alive(cmd));
  CHECK_FALSE(alive(child));  // before the fix: only the script got SIGTERM, its sleep lived on
  // Found by the renewal (every ttl/3) or by the check of its state (every second).
  CHECK(has_either(tool.log(), "job taken fence 1: lease lost while running (",
                   {"the renewal was refused: cancelled, or no longer this worker's)",
                    "found delayed while its command ran)"}));
  CHECK(listed(c, "taken").error == "taken away");  // nothing stored by the tool
}

TEST_CASE("fenceq work: a job cancelled under a running command (issue 18): the command is "
          "stopped, nothing is stored, the log says the renewal was refused") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  REQUIRE(c.enqueue("doomed", in_queue("cancel")));
  auto script = sleeper_script(dir);
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "cancel", "--ttl", "1", "--owner", "w1", "--wait", "1",
                       "--exit-when-empty", "--", script});
  KillAtEnd leftovers;
  const pid_t cmd = wait_pid_file(dir.file("cmd.pid"), tool);
  const pid_t child = wait_pid_file(dir.file("child.pid"), tool);
  leftovers.pids = {cmd, child};
  REQUIRE(c.cancel("doomed"));  // the holder's next renewal is refused
  auto status = tool.wait_for(8s);
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK_FALSE(alive(cmd));
  CHECK_FALSE(alive(child));
  CHECK(has_either(tool.log(), "job doomed fence 1: lease lost while running (",
                   {"the renewal was refused: cancelled, or no longer this worker's)",
                    "found cancelled while its command ran)"}));
  auto st = c.state("doomed");
  REQUIRE(st);
  CHECK_FALSE(st->done);
  CHECK_FALSE(st->result);
  CHECK(listed(c, "doomed").status == JobStatus::cancelled);
  CHECK_FALSE(listed(c, "doomed").error);  // the tool did not fail it either
}

TEST_CASE("fenceq work: a cancel reaches a running command within seconds (issue 30): not at "
          "its next renewal a third of a long lease later") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  REQUIRE(c.enqueue("long", in_queue("cancel")));
  auto script = sleeper_script(dir);
  // --ttl 300: the first renewal is 100 s away.
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "cancel", "--ttl", "300", "--owner", "w1", "--wait",
                       "1", "--exit-when-empty", "--", script});
  KillAtEnd leftovers;
  const pid_t cmd = wait_pid_file(dir.file("cmd.pid"), tool);
  const pid_t child = wait_pid_file(dir.file("child.pid"), tool);
  leftovers.pids = {cmd, child};
  REQUIRE(c.cancel("long"));
  auto status = tool.wait_for(60s);  // about a second; the renewal would be 100 s
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK_FALSE(alive(cmd));
  CHECK_FALSE(alive(child));
  CHECK(tool.log().find("job long fence 1: lease lost while running (found cancelled while its "
                        "command ran); the command was stopped (") != std::string::npos);
  CHECK(listed(c, "long").status == JobStatus::cancelled);
  CHECK_FALSE(listed(c, "long").error);
}

TEST_CASE("fenceq work: --retry-in 0 retries at once for nine attempts then waits the daemon's "
          "backoff (issue 30)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  fenceq::EnqueueOptions o = in_queue("bad");
  o.max_attempts = 0;  // no limit: only the floor stops a busy loop
  REQUIRE(c.enqueue("bad", o));
  auto script = write_script(dir, "bad.sh", "echo cannot >&2\nexit 3\n");
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "bad", "--owner", "w1", "--wait", "1", "--retry-in",
                       "0", "--exit-when-empty", "--", script});
  auto status = tool.wait_for(60s);
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);
  const auto row = listed(c, "bad");
  // Attempts 1..9 came back at once; the 10th failure waits 2^9 s.
  CHECK(row.attempts == 10);
  CHECK(row.status == JobStatus::delayed);
  CHECK(tool.log().find("job bad fence 10: failed (exit 3); retry in 512 s, not --retry-in's, "
                        "from attempt 10 on") != std::string::npos);
  CHECK(tool.log().find("job bad fence 9: failed (exit 3)\n") != std::string::npos);
}

TEST_CASE("fenceq work: SIGTERM kills a command that ignores SIGTERM after --kill-after, then "
          "releases the lease") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  REQUIRE(c.enqueue("stubborn", in_queue("term")));
  auto script = stubborn_script(dir);
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "term", "--ttl", "1", "--owner", "w1", "--kill-after",
                       "1", "--", script});
  KillAtEnd leftovers;
  const pid_t cmd = wait_pid_file(dir.file("cmd.pid"), tool);
  leftovers.pids = {cmd};
  REQUIRE(c.state("stubborn")->owner == "w1");
  const auto t0 = std::chrono::steady_clock::now();
  tool.signal(SIGTERM);
  auto status = tool.wait_for(6s);
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK(took >= 900ms);  // the grace was given
  CHECK(took < 4s);
  CHECK_FALSE(alive(cmd));
  CHECK(tool.log().find("job stubborn fence 1: stopped (signal 9, killed after --kill-after), "
                        "lease released") != std::string::npos);
  // Renewed through the grace (longer than the 1 s lease), then released.
  auto st = c.state("stubborn");
  CHECK_FALSE(st->owner);
  CHECK(st->fence == 1);
  CHECK_FALSE(st->done);
}

TEST_CASE("fenceq work: a lease lost under a command that ignores SIGTERM kills it after "
          "--kill-after") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  REQUIRE(c.enqueue("stubborn", in_queue("lost")));
  auto script = stubborn_script(dir);
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "lost", "--ttl", "1", "--owner", "w1", "--wait", "1",
                       "--exit-when-empty", "--kill-after", "1", "--", script});
  KillAtEnd leftovers;
  const pid_t cmd = wait_pid_file(dir.file("cmd.pid"), tool);
  leftovers.pids = {cmd};
  REQUIRE(c.fail("stubborn", "w1", 1, "taken away", 60.0));
  auto status = tool.wait_for(8s);
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK_FALSE(alive(cmd));
  CHECK(has_either(tool.log(), "job stubborn fence 1: lease lost while running (",
                   {"the renewal was refused: cancelled, or no longer this worker's); the command "
                    "was stopped (signal 9, killed after --kill-after)",
                    "found delayed while its command ran); the command was stopped (signal 9, "
                    "killed after --kill-after)"}));
}

// PostgreSQL text cannot hold a NUL byte: such an id exists only on SQLite.
TEST_CASE("fenceq work: a job id with a NUL byte never reaches the command: the job is failed "
          "and the id escaped in the log",
          "[sqlite]") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  auto ran = dir.file("ran.txt");
  auto script = write_script(dir, "record.sh", "echo \"$FENCEQ_JOB_ID\" >> " + ran + "\necho ok\n");
  // Its id cut at the NUL, FENCEQ_JOB_ID would name job "victim".
  const std::string nul_id("victim\0evil", 11);
  EnqueueOptions o = in_queue("ids");
  o.max_attempts = 1;
  REQUIRE(c.enqueue(nul_id, o));
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "ids", "--ttl", "5", "--owner", "w1", "--wait", "1",
                       "--exit-when-empty", "--", script});
  auto status = tool.wait_for(10s);
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);
  std::ifstream in(ran);
  std::string recorded((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(recorded.empty());  // the command never ran
  auto job = listed(c, nul_id);
  CHECK(job.status == JobStatus::dead);
  CHECK(job.error.value_or("").find("contains a NUL byte") != std::string::npos);
  CHECK(tool.log().find("job victim\\x00evil fence 1: failed (its id contains a NUL byte; the "
                        "command was not run)") != std::string::npos);
}

TEST_CASE("fenceq work: control characters in job ids are escaped in the log, never forging a "
          "line") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  auto script = write_script(dir, "ok.sh", "echo ok\n");
  const std::string forging = "a\nfenceq work: job forged fence 9: completed";
  const std::string terminal = "b\x1b[2J\r\t\x7f\\";
  REQUIRE(c.enqueue(forging, in_queue("ids")));
  REQUIRE(c.enqueue(terminal, in_queue("ids")));
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "ids", "--ttl", "5", "--owner", "w1", "--wait", "1",
                       "--exit-when-empty", "--", script});
  auto status = tool.wait_for(10s);
  const auto log = tool.log();
  INFO(log);
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK(c.state(forging)->done);
  CHECK(c.state(terminal)->done);
  CHECK(log.find("\nfenceq work: job forged") == std::string::npos);
  CHECK(log.rfind("fenceq work: job forged", 0) == std::string::npos);
  CHECK(log.find("job a\\nfenceq work: job forged fence 9: completed fence 1: completed\n") !=
        std::string::npos);
  CHECK(log.find("job b\\x1b[2J\\r\\t\\x7f\\\\ fence 1: completed\n") != std::string::npos);
  CHECK(log.find('\x1b') == std::string::npos);
  CHECK(log.find('\r') == std::string::npos);
}

namespace {

// The lines of a file (none when it does not exist).
std::vector<std::string> file_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Waits until `pred` holds (true) or 10 s pass (false).
template <typename Pred>
bool eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::int64_t leased_in(Client& c, const std::string& queue) {
  const auto q = fenceq::test::queue_stats(c, queue);
  return q ? q->leased : 0;
}

}  // namespace

TEST_CASE("fenceq work: --prefetch 4 drains 20 jobs, each command run exactly once, never more "
          "than 4 leased at once") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  // Each command records its job and how many jobs of the queue are leased
  // while it runs (the worker's own: nobody else works this queue).
  const auto ran = dir.file("ran.txt");
  const auto leased = dir.file("leased.txt");
  auto script = write_script(dir, "record.sh",
                             "echo \"$FENCEQ_JOB_ID\" >> " + ran + "\n\"" +
                                 fenceq::test::fenceq_tool_path() + "\" --endpoint " +
                                 d.endpoint() +
                                 " list --queue pf --state leased --limit 1000 | wc -l >> " +
                                 leased + "\necho \"did $FENCEQ_JOB_ID\"\n");
  std::set<std::string> ids;
  for (int i = 1; i <= 20; ++i) {
    const std::string id = "pf-" + std::to_string(i);
    ids.insert(id);
    REQUIRE(c.enqueue(id, in_queue("pf")));
  }
  // And from outside, while it runs: stats never shows more than 4 leased.
  std::atomic<bool> watching{true};
  std::atomic<std::int64_t> most_seen{0};
  std::thread watcher([&] {
    Client w(d.endpoint());
    while (watching) {
      most_seen = std::max<std::int64_t>(most_seen, leased_in(w, "pf"));
      std::this_thread::sleep_for(5ms);
    }
  });
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "pf", "--ttl", "5", "--owner", "w1", "--wait", "1",
                       "--exit-when-empty", "--prefetch", "4", "--", script});
  auto status = tool.wait_for(30s);
  watching = false;
  watcher.join();
  const auto log = tool.log();
  INFO(log);
  REQUIRE(status);
  CHECK(*status == 0);

  const auto runs = file_lines(ran);
  CHECK(runs.size() == 20);
  CHECK(std::set<std::string>(runs.begin(), runs.end()) == ids);  // each once
  const auto counts = file_lines(leased);
  REQUIRE(counts.size() == 20);
  int most = 0;
  for (const auto& n : counts) most = std::max(most, std::stoi(n));
  CHECK(most == 4);  // 4 held while each command ran: prefetched, never more
  CHECK(most_seen <= 4);
  for (const auto& id : ids) {
    auto st = c.state(id);
    REQUIRE(st);
    CHECK(st->done);
    CHECK(st->fence == 1);
    CHECK(st->result == "did " + id + "\n");
    CHECK(log.find("job " + id + " fence 1: completed\n") != std::string::npos);
  }
  CHECK(leased_in(c, "pf") == 0);
}

TEST_CASE("fenceq work: --prefetch: a job whose lease is taken while it waits its turn is "
          "dropped without running its command, the others go on") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  const auto ran = dir.file("ran.txt");
  const auto go = dir.file("go");
  // The first job's command waits for the test's go (at most 20 s).
  auto script = write_script(dir, "gated.sh",
                             "echo \"$FENCEQ_JOB_ID\" >> " + ran + "\n" +
                                 "if [ \"$FENCEQ_JOB_ID\" = first ]; then\n"
                                 "  i=0; while [ ! -e " + go + " ] && [ $i -lt 400 ]; do "
                                 "sleep 0.05; i=$((i+1)); done\n"
                                 "fi\n"
                                 "echo \"did $FENCEQ_JOB_ID\"\n");
  REQUIRE(c.enqueue("first", in_queue("steal", "", 30)));
  REQUIRE(c.enqueue("second", in_queue("steal", "", 20)));
  REQUIRE(c.enqueue("third", in_queue("steal", "", 10)));
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "steal", "--ttl", "1", "--owner", "w1", "--wait", "1",
                       "--exit-when-empty", "--prefetch", "3", "--", script});
  // `first` runs; `second` and `third` wait their turn, leased to w1.
  REQUIRE(eventually([&] { return file_lines(ran) == std::vector<std::string>{"first"}; }));
  REQUIRE(c.state("second")->owner == "w1");
  REQUIRE(c.state("third")->owner == "w1");
  // A thief takes `second`: its lease ended (a fail under w1's lease, which
  // only the test can send here), then claimed by id with fence 2.
  REQUIRE(c.fail("second", "w1", 1, "taken away", 0.0));
  REQUIRE(c.claim("second", "thief", 60) == 2);
  // The worker's next renewal (every 1/3 s) finds it gone, before `first` ends.
  REQUIRE(eventually([&] {
    return tool.log().find("job second fence 1: lease lost before its command ran (the renewal "
                           "was refused: cancelled, or no longer this worker's); dropped, the command was not run\n") !=
           std::string::npos;
  }));
  std::ofstream(go) << "go\n";
  auto status = tool.wait_for(15s);
  const auto log = tool.log();
  INFO(log);
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK(file_lines(ran) == std::vector<std::string>{"first", "third"});  // never `second`
  CHECK(c.state("first")->result == "did first\n");
  CHECK(c.state("third")->result == "did third\n");
  auto second = c.state("second");
  CHECK(second->owner == "thief");  // untouched by w1
  CHECK(second->fence == 2);
  CHECK_FALSE(second->done);
  CHECK(log.find("job second fence 1: completed") == std::string::npos);
}

TEST_CASE("fenceq work: --prefetch: SIGTERM stores what finished, stops the running command and "
          "releases every other held lease") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  // `a` finishes at once (its result then waits for the batch), `b` runs
  // until stopped, `c` waits its turn.
  auto script = write_script(dir, "mixed.sh",
                             "if [ \"$FENCEQ_JOB_ID\" = b ]; then\n"
                             "  echo $$ > " + dir.file("cmd.pid") + "\n" +
                                 "  sleep 30 &\n"
                                 "  echo $! > " + dir.file("child.pid") + "\n" +
                                 "  wait\n"
                                 "fi\n"
                                 "echo \"did $FENCEQ_JOB_ID\"\n");
  REQUIRE(c.enqueue("a", in_queue("term", "", 30)));
  REQUIRE(c.enqueue("b", in_queue("term", "", 20)));
  REQUIRE(c.enqueue("c", in_queue("term", "", 10)));
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "term", "--ttl", "5", "--owner", "w1", "--prefetch", "3",
                       "--", script});
  KillAtEnd leftovers;
  const pid_t cmd = wait_pid_file(dir.file("cmd.pid"), tool);
  const pid_t child = wait_pid_file(dir.file("child.pid"), tool);
  leftovers.pids = {cmd, child};
  CHECK_FALSE(c.state("a")->done);  // finished, not yet completed: c still waits
  CHECK(c.state("a")->owner == "w1");
  CHECK(c.state("c")->owner == "w1");
  tool.signal(SIGTERM);
  auto status = tool.wait_for(8s);
  const auto log = tool.log();
  INFO(log);
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK_FALSE(alive(cmd));
  CHECK_FALSE(alive(child));
  auto a = c.state("a");
  CHECK(a->done);
  CHECK(a->result == "did a\n");
  for (const std::string id : {"b", "c"}) {
    auto st = c.state(id);
    CHECK_FALSE(st->owner);  // released
    CHECK(st->fence == 1);
    CHECK_FALSE(st->done);
  }
  CHECK(log.find("job b fence 1: stopped (signal 15), lease released\n") != std::string::npos);
  CHECK(log.find("job a fence 1: completed\n") != std::string::npos);
  CHECK(log.find("stopping: released c\n") != std::string::npos);
  // Claimable again at once.
  CHECK(c.claim("c", "w2", 5) == 2);
}

TEST_CASE("fenceq work: --prefetch with --max-jobs claims no more than it will run, and reports "
          "a failure at once") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  auto script = write_script(dir, "some.sh",
                             "if [ \"$FENCEQ_JOB_ID\" = mj-3 ]; then echo broken >&2; exit 3; fi\n"
                             "echo ok\n");
  for (int i = 1; i <= 10; ++i) {
    EnqueueOptions o = in_queue("mj", "", 100 - i);  // claimed in number order
    o.max_attempts = 1;
    REQUIRE(c.enqueue("mj-" + std::to_string(i), o));
  }
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "mj", "--ttl", "5", "--owner", "w1", "--wait", "1",
                       "--max-jobs", "6", "--prefetch", "4", "--", script});
  auto status = tool.wait_for(15s);
  const auto log = tool.log();
  INFO(log);
  REQUIRE(status);
  CHECK(*status == 0);
  for (int i = 1; i <= 10; ++i) {
    const std::string id = "mj-" + std::to_string(i);
    INFO(id);
    const auto job = listed(c, id);
    if (i == 3) {
      CHECK(job.status == JobStatus::dead);
      CHECK(job.error.value_or("").find("exit status 3: broken") != std::string::npos);
    } else if (i <= 6) {
      CHECK(job.status == JobStatus::done);
    } else {
      CHECK(job.status == JobStatus::ready);
      CHECK(job.attempts == 0);  // never claimed: 4, then only the 2 left to do
    }
  }
  // The failure went out before the batch of successes was completed.
  const auto failed = log.find("job mj-3 fence 1: failed (exit 3)");
  const auto completed = log.find("job mj-1 fence 1: completed");
  REQUIRE(failed != std::string::npos);
  REQUIRE(completed != std::string::npos);
  CHECK(failed < completed);
}

TEST_CASE("fenceq work: --prefetch keeps each complete_many within the daemon's frame limit: "
          "large results are completed in several requests") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});  // --max-message: the default 1 MiB
  Client c(d.endpoint());
  // Three results of 400 KiB: 1.2 MiB in one complete_many would be dropped.
  auto script = write_script(dir, "large.sh", "head -c 409600 /dev/zero | tr '\\0' r\n");
  for (int i = 1; i <= 3; ++i) REQUIRE(c.enqueue("large-" + std::to_string(i), in_queue("lg")));
  BackgroundTool tool(dir, d,
                      {"--timeout", "2", "work", "--queue", "lg", "--ttl", "10", "--owner", "w1",
                       "--wait", "1", "--exit-when-empty", "--prefetch", "3", "--", script});
  auto status = tool.wait_for(20s);
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);
  for (int i = 1; i <= 3; ++i) {
    auto st = c.state("large-" + std::to_string(i));
    CHECK(st->done);
    CHECK(st->result == std::string(409600, 'r'));
  }
}

TEST_CASE("fenceq work: a job cancelled after its command exited (issue 30): the log says the "
          "command had exited, not that it was stopped, and what it left running is stopped") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  REQUIRE(c.enqueue("early", in_queue("early")));
  // The command exits at once, leaving a child that holds its stdout open:
  // the worker reads on, renewing the lease, until the child is gone.
  auto script = write_script(dir, "early.sh",
                             "echo $$ > " + dir.file("cmd.pid") + "\n" + "sleep 30 &\n" +
                                 "echo $! > " + dir.file("child.pid") + "\n" +
                                 "echo result\nexit 0\n");
  BackgroundTool tool(dir, d,
                      {"work", "--queue", "early", "--ttl", "1", "--owner", "w1", "--wait", "1",
                       "--exit-when-empty", "--", script});
  KillAtEnd leftovers;
  const pid_t cmd = wait_pid_file(dir.file("cmd.pid"), tool);
  const pid_t child = wait_pid_file(dir.file("child.pid"), tool);
  leftovers.pids = {cmd, child};
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (alive(cmd) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE_FALSE(alive(cmd));  // exited, its child still holding its stdout
  REQUIRE(alive(child));
  REQUIRE(c.cancel("early"));  // the holder's next renewal is refused
  auto status = tool.wait_for(8s);
  INFO(tool.log());
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK_FALSE(alive(child));
  // Before: "lease lost while running (...); the command was stopped (exit 0)".
  CHECK(tool.log().find("the command was stopped") == std::string::npos);
  CHECK(tool.log().find("job early fence 1: lease lost after the command had exited (exit 0): "
                        "the renewal was refused: cancelled, or no longer this worker's; what it "
                        "left running was stopped; nothing stored\n") != std::string::npos);
  CHECK(listed(c, "early").status == JobStatus::cancelled);
  CHECK_FALSE(c.state("early")->result);
}

namespace {

// Unix seconds now, as a server clock daemon reckons them.
double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TEST_CASE("fenceq work: a command exiting 75 snoozes its job for --snooze seconds with its attempt "
          "given back and a later run completes it (issue 33)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  // "Try again later" the first time (EX_TEMPFAIL), done the second.
  const std::string tried = dir.file("tried");
  auto script = write_script(dir, "later.sh",
                             "if [ ! -e " + tried + " ]; then touch " + tried +
                                 "; echo 'rate limited' >&2; exit 75; fi\n"
                                 "echo \"done on attempt $FENCEQ_ATTEMPTS with fence "
                                 "$FENCEQ_FENCE\"\n");
  EnqueueOptions o = in_queue("later");
  o.max_attempts = 1;  // a fail would leave it dead: only a snooze gives the attempt back
  REQUIRE(c.enqueue("limited", o));
  const double before = unix_now();
  auto first = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(),
                                  "work", "--queue", "later", "--owner", "w1", "--wait", "1",
                                  "--snooze", "5", "--max-jobs", "1", "--", script});
  const double after = unix_now();
  INFO(first.out);
  CHECK(first.status == 0);
  CHECK(
      first.out.find("job limited fence 1: snoozed for 5 s (exit 75), its attempt given back\n") !=
      std::string::npos);
  auto row = listed(c, "limited");
  CHECK(row.status == JobStatus::delayed);
  CHECK(row.attempts == 0);  // given back
  CHECK(row.fence == 1);     // kept
  CHECK_FALSE(row.owner);
  CHECK_FALSE(row.error);  // nothing recorded as an error
  CHECK(row.not_before >= before + 5 - 0.01);
  CHECK(row.not_before <= after + 5 + 0.01);
  const double delay_ends = row.not_before;  // the daemon's clock
  CHECK_FALSE(c.claim_next("later", "intruder", 1));  // not claimable before the delay ends

  // A later run long-polls until the delay ends, and completes the job on
  // its one attempt.
  auto second = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(),
                                   "work", "--queue", "later", "--owner", "w2", "--wait", "15",
                                   "--ttl", "30", "--max-jobs", "1", "--exit-when-empty", "--",
                                   script});
  INFO(second.out);
  CHECK(second.status == 0);
  CHECK(second.out.find("job limited fence 2: completed") != std::string::npos);
  auto state = c.state("limited");
  REQUIRE(state);
  CHECK(state->done);
  // Claimed once the delay had ended, by the daemon's clock: its lease
  // (kept by the complete) began at until - ttl. Not this process's clock:
  // a PostgreSQL sidecar keeps the database's time, which it reads ahead of
  // this host's by up to a query's latency (16 ms once in a clean clone).
  CHECK(state->until - 30 >= delay_ends);
  CHECK(state->result == "done on attempt 1 with fence 2\n");
  row = listed(c, "limited");
  CHECK(row.status == JobStatus::done);
  CHECK(row.attempts == 1);
  CHECK_FALSE(row.error);
}

TEST_CASE("fenceq work: --prefetch snoozes a job whose command exits 75 at once and completes the "
          "others (issue 33)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  auto script = write_script(dir, "some-later.sh",
                             "read x\n"
                             "if [ \"$x\" = later ]; then exit 75; fi\n"
                             "echo \"did $x\"\n");
  REQUIRE(c.enqueue("p1", in_queue("pre", "now", 3)));
  REQUIRE(c.enqueue("p2", in_queue("pre", "later", 2)));
  REQUIRE(c.enqueue("p3", in_queue("pre", "now", 1)));
  auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "work",
                              "--queue", "pre", "--owner", "w1", "--wait", "1", "--prefetch", "3",
                              "--snooze", "600", "--max-jobs", "3", "--", script});
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("job p2 fence 1: snoozed for 600 s (exit 75), its attempt given back\n") !=
        std::string::npos);
  CHECK(c.state("p1")->result == "did now\n");
  CHECK(c.state("p3")->result == "did now\n");
  const auto row = listed(c, "p2");
  CHECK(row.status == JobStatus::delayed);
  CHECK(row.attempts == 0);
  CHECK_FALSE(row.error);
  CHECK_FALSE(c.state("p2")->result);
}

TEST_CASE("fenceq work: --snooze takes 0 to 1e9 seconds and refuses anything else in one line "
          "naming the option") {
  TempDir dir;
  // Nobody serves it: a value that got through would end in an unreachable error instead.
  const std::string nobody = "ipc://" + dir.file("nobody.sock");
  for (const std::string bad : {"-1", "nan", "inf", "1e300", "1000000001", "soon"}) {
    auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", nobody, "--timeout",
                                "0.2", "work", "--snooze", bad, "--", "true"});
    INFO(bad << " -> " << r.out);
    CHECK(r.status == 2);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out.rfind("fenceq: --snooze: must be ", 0) == 0);
  }
  // The bounds themselves are taken (and then fail against nobody).
  for (const std::string good : {"0", "1000000000"}) {
    auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", nobody, "--timeout",
                                "0.2", "work", "--snooze", good, "--", "true"});
    INFO(good << " -> " << r.out);
    CHECK(r.status == 2);
    CHECK(r.out.find("unreachable: nothing serves") != std::string::npos);
  }
  auto help = fenceq::test::run({fenceq::test::fenceq_tool_path(), "work", "--help"});
  CHECK(help.out.find("--snooze") != std::string::npos);
  CHECK(help.out.find("Exit 75 (EX_TEMPFAIL") != std::string::npos);
}
