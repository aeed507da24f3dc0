#include "daemon.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fenceq/client.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace fenceq::test {

std::string fenceqd_path() {
  const char* other = std::getenv("FENCEQ_TEST_FENCEQD_BIN");
  return other && *other ? other : FENCEQ_TEST_FENCEQD;
}
std::string fenceq_tool_path() { return FENCEQ_TEST_TOOL; }

RunResult tool(const Daemon& d, std::vector<std::string> args) {
  std::vector<std::string> argv{fenceq_tool_path(), "--endpoint", d.endpoint(), "--timeout", "3"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}

fenceq::EnqueueOptions in_queue(std::string q, std::string payload, std::int64_t priority) {
  fenceq::EnqueueOptions o;
  o.queue = std::move(q);
  if (!payload.empty()) o.payload = fenceq::Payload{std::move(payload), false};
  o.priority = priority;
  return o;
}

fenceq::JobInfo listed(fenceq::Client& c, const std::string& id) {
  auto d = c.job(id);
  if (!d) throw std::runtime_error("job " + id + " not listed");
  return d->info;
}

bool until_reaped(fenceq::Client& c, double now, const std::function<bool()>& reaped) {
  static int ticks = 0;
  for (int tick = 0; tick < 50; ++tick) {
    fenceq::EnqueueOptions at;
    at.queue = "ticks";  // out of the way of the tests' claims
    at.now = now;
    c.enqueue("tick-" + std::to_string(++ticks), at);
    if (reaped()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::optional<fenceq::QueueStats> queue_stats(fenceq::Client& c, const std::string& queue) {
  auto st = c.stats();
  for (auto& q : st.queues) {
    if (q.queue == queue) return std::move(q);
  }
  return std::nullopt;
}

std::string source_dir() { return FENCEQ_TEST_SOURCE_DIR; }

TempDir::TempDir() {
  char tmpl[] = "/tmp/fqt-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  pg_.reset();
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::db() const {
  if (!pg_mode()) return file("fenceq.db");
  if (!pg_) pg_ = std::make_unique<PgSchema>();
  return pg_->uri();
}

namespace {

// In the daemon's process, before exec: its limits and umask (only
// async-signal-safe calls).
void limit_in_child(const SpawnOptions& how) {
  if (how.nofile_soft >= 0 || how.nofile_hard >= 0) {
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    if (how.nofile_hard >= 0) rl.rlim_max = static_cast<rlim_t>(how.nofile_hard);
    if (how.nofile_soft >= 0) rl.rlim_cur = static_cast<rlim_t>(how.nofile_soft);
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(126);
  }
  if (how.umask >= 0) ::umask(static_cast<mode_t>(how.umask));
}

}  // namespace

Daemon::Daemon(const TempDir& dir, std::vector<std::string> args, bool wait_ready, std::string db,
               SpawnOptions how)
    : dir_(dir), args_(std::move(args)), spawn_(how) {
  db_ = db.empty() ? dir.db() : std::move(db);
  endpoint_ = "ipc://" + dir.file("fenceqd.sock");
  spawn();
  if (wait_ready) restart();
}

void Daemon::spawn() {
  std::vector<std::string> argv{fenceqd_path(), "--db", db_, "--listen", endpoint_};
  argv.insert(argv.end(), args_.begin(), args_.end());
  const SpawnOptions how = spawn_;
  proc_.emplace(Command{.argv = std::move(argv),
                        .output = Command::Output::file,
                        .output_file = dir_.file("fenceqd.log"),
                        .in_child = [how] { limit_in_child(how); }});
}

void Daemon::restart() {
  if (!proc_) spawn();
  // Ready when it answers ping; give up after 10 s.
  fenceq::Client c(endpoint_, fenceq::ClientOptions{std::chrono::milliseconds(200)});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!proc_->running()) {
      proc_.reset();
      throw std::runtime_error("fenceqd exited at start: " + log());
    }
    try {
      c.ping();
      return;
    } catch (const fenceq::Error& e) {
      // No socket yet (said at once): give the daemon a moment to bind.
      if (e.code() == "unreachable") std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  throw std::runtime_error("fenceqd did not answer ping within 10 s: " + log());
}

void Daemon::start_on(std::string db, const std::vector<std::string>& once) {
  if (proc_) throw std::runtime_error("Daemon::start_on: the daemon is running");
  db_ = std::move(db);
  const auto args = args_;
  args_.insert(args_.end(), once.begin(), once.end());
  try {
    restart();
  } catch (...) {
    args_ = args;
    throw;
  }
  args_ = args;
}

int Daemon::stop(int sig) {
  if (!proc_) return -1;
  proc_->signal(sig);
  const int status = proc_->wait();
  proc_.reset();
  return status;
}

bool Daemon::alive() {
  if (!proc_) return false;
  if (proc_->running()) return true;
  exit_status_ = proc_->status().value_or(-1);
  proc_.reset();
  return false;
}

// The process, if still there, is killed (SIGKILL) and reaped by Child.
Daemon::~Daemon() = default;

void Daemon::pause() {
  if (!proc_) throw std::runtime_error("pause: fenceqd is not running");
  const std::string pid = std::to_string(proc_->pid());
  const auto task_dir = "/proc/" + pid + "/task";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // First, the serving thread (the main one) waiting in poll for requests:
  // the batch before has ended. A wait that ends just as SIGSTOP lands gives
  // a poll result older than what is sent meanwhile; the daemon looks at its
  // signals once more after such a wait (Server::run).
  for (;;) {
    std::ifstream in(task_dir + "/" + pid + "/wchan");
    std::string wchan((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (wchan.find("poll") != std::string::npos) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("fenceqd's serving thread did not wait in poll within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  proc_->signal(SIGSTOP);
  while (std::chrono::steady_clock::now() < deadline) {
    bool all_stopped = true;
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator(task_dir, ec)) {
      std::ifstream in(t.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // "pid (comm) S ...": the state follows the last ')'.
      auto p = stat.rfind(')');
      if (p == std::string::npos || p + 2 >= stat.size() || stat[p + 2] != 'T') {
        all_stopped = false;
        break;
      }
    }
    if (all_stopped && !ec) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  throw std::runtime_error("fenceqd did not stop within 10 s of SIGSTOP");
}

void Daemon::resume() {
  if (proc_) proc_->signal(SIGCONT);
}

std::string Daemon::log() const {
  std::ifstream in(dir_.file("fenceqd.log"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult run(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  Child child(Command{.argv = argv, .env = env, .output = Command::Output::pipe});
  RunResult r;
  if (auto status = child.wait_for(kRunLimit)) {
    // What it wrote last (a child of its own may hold the pipe: a bound).
    for (int n = 0; n < 50 && child.read_output(100); ++n) {
    }
    r.status = *status;
    r.out = child.output();
    return r;
  }
  // A hang fails the test with what the process said, not ctest's timeout
  // with nothing.
  child.signal(SIGKILL);
  r.status = child.wait();
  r.out = child.output() + "\n[fenceq::test::run: " + argv.front() + " still ran after " +
          std::to_string(kRunLimit.count()) + " s; killed]\n";
  return r;
}

}  // namespace fenceq::test
