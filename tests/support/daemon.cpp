#include "daemon.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

fenceq::JobInfo listed(fenceq::Client& c, const std::string& id) {
  auto d = c.job(id);
  if (!d) throw std::runtime_error("job " + id + " not listed");
  return d->info;
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
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int fd = ::open(dir_.file("fenceqd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 2);
      ::dup2(fd, 1);
    }
    if (spawn_.nofile_soft >= 0 || spawn_.nofile_hard >= 0) {
      rlimit rl{};
      ::getrlimit(RLIMIT_NOFILE, &rl);
      if (spawn_.nofile_hard >= 0) rl.rlim_max = static_cast<rlim_t>(spawn_.nofile_hard);
      if (spawn_.nofile_soft >= 0) rl.rlim_cur = static_cast<rlim_t>(spawn_.nofile_soft);
      if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(126);
    }
    if (spawn_.umask >= 0) ::umask(static_cast<mode_t>(spawn_.umask));
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  pid_ = pid;
}

void Daemon::restart() {
  if (pid_ <= 0) spawn();
  // Ready when it answers ping; give up after 10 s.
  fenceq::Client c(endpoint_, fenceq::ClientOptions{std::chrono::milliseconds(200)});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
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

int Daemon::stop(int sig) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, sig);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

bool Daemon::alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
  pid_ = -1;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return false;
}

Daemon::~Daemon() {
  if (pid_ > 0) stop(SIGKILL);
}

void Daemon::pause() {
  const auto task_dir = "/proc/" + std::to_string(pid_) + "/task";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // First, the serving thread (the main one) waiting in poll for requests:
  // stopped anywhere else, it may resume with a poll result taken before the
  // stop and serve what was sent meanwhile as if no signal had come since.
  // Idle, nothing wakes it, so it is still there when SIGSTOP lands.
  for (;;) {
    std::ifstream in(task_dir + "/" + std::to_string(pid_) + "/wchan");
    std::string wchan((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (wchan.find("poll") != std::string::npos) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("fenceqd's serving thread did not wait in poll within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(pid_, SIGSTOP);
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

void Daemon::resume() { ::kill(pid_, SIGCONT); }

std::string Daemon::log() const {
  std::ifstream in(dir_.file("fenceqd.log"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult run(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  RunResult r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) r.out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace fenceq::test
