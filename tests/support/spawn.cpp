#include "spawn.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

extern char** environ;

namespace fenceq::test {
namespace {

std::string name_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// This process's environment with `extra` added or replaced (an entry with
// no '=' removes the variable, as putenv does).
std::vector<std::string> merged_env(const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const bool replaced = std::any_of(extra.begin(), extra.end(), [&](const std::string& x) {
      return name_of(x) == name_of(entry);
    });
    if (!replaced) out.push_back(entry);
  }
  for (const auto& x : extra) {
    if (x.find('=') != std::string::npos) out.push_back(x);
  }
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the child: `fd` becomes `target`, open across exec (dup2 onto itself
// would keep O_CLOEXEC).
void redirect(int fd, int target) {
  if (fd == target) {
    ::fcntl(fd, F_SETFD, 0);
  } else {
    ::dup2(fd, target);
  }
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

int exit_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

Child::Child(Command cmd) {
  if (cmd.argv.empty()) throw std::invalid_argument("Child: an empty argv");
  // All the child needs is made here: after fork, in a process with threads,
  // it may only make async-signal-safe calls (no allocation).
  std::vector<char*> argv = pointers(cmd.argv);
  std::vector<std::string> env_strings;
  std::vector<char*> envp;
  if (!cmd.env.empty()) {
    env_strings = merged_env(cmd.env);
    envp = pointers(env_strings);
  }
  char** const env = cmd.env.empty() ? environ : envp.data();
  // Every descriptor is O_CLOEXEC: another test thread's child never holds
  // our pipes open.
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  int file = -1;
  auto fail = [&](const std::string& what) {
    const std::string why = what + ": " + std::strerror(errno);
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &file}) close_fd(*fd);
    throw std::runtime_error(why);
  };
  if (cmd.stdin_pipe && ::pipe2(in, O_CLOEXEC) != 0) fail("pipe");
  if (cmd.output == Command::Output::pipe && ::pipe2(out, O_CLOEXEC) != 0) fail("pipe");
  if (cmd.output == Command::Output::file) {
    // Not there: the output stays this process's, as the test's log shows it.
    file = ::open(cmd.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  const pid_t pid = ::fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    if (cmd.term_with_parent) ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (in[0] >= 0) redirect(in[0], 0);
    const int to = out[1] >= 0 ? out[1] : file;
    if (to >= 0) {
      redirect(to, 1);
      redirect(to, 2);
    }
    if (cmd.in_child) cmd.in_child();
    ::execve(argv[0], argv.data(), env);
    ::_exit(127);
  }
  pid_ = pid;
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(file);
  in_ = in[1];
  out_ = out[0];
}

Child::~Child() { release(); }

void Child::release() {
  close_fd(in_);
  close_fd(out_);
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  status_.reset();
  output_.clear();
}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      in_(std::exchange(other.in_, -1)),
      out_(std::exchange(other.out_, -1)),
      output_(std::move(other.output_)),
      status_(std::exchange(other.status_, std::nullopt)) {}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    in_ = std::exchange(other.in_, -1);
    out_ = std::exchange(other.out_, -1);
    output_ = std::move(other.output_);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

void Child::close_in() { close_fd(in_); }

bool Child::read_output(int ms) {
  if (out_ < 0) return false;
  pollfd pfd{out_, POLLIN, 0};
  if (::poll(&pfd, 1, ms) <= 0) return true;
  char buf[4096];
  const ssize_t n = ::read(out_, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  output_.append(buf, static_cast<std::size_t>(n));
  return true;
}

void Child::read_all_output() {
  while (read_output(-1)) {
  }
}

void Child::reaped(int wait_status) { status_ = exit_status(wait_status); }

bool Child::running() {
  if (status_ || pid_ <= 0) return false;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) != pid_) return true;
  reaped(st);
  return false;
}

void Child::signal(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<int> Child::wait_for(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool reading = out_ >= 0;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    // A child blocked on a full pipe would never end: read as we wait.
    if (reading) {
      reading = read_output(10);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return status_;
}

int Child::wait() {
  bool reading = out_ >= 0;
  while (reading && running()) reading = read_output(50);
  if (!status_ && pid_ > 0) {
    int st = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &st, 0)) < 0 && errno == EINTR) {
    }
    if (r == pid_) {
      reaped(st);
    } else {
      status_ = -1;  // not ours to wait for any more (reaped elsewhere)
    }
  }
  return status_.value_or(-1);
}

int Child::stop(int sig, std::chrono::milliseconds grace) {
  signal(sig);
  if (!wait_for(grace)) {
    signal(SIGKILL);
    wait();
  }
  // What it wrote last, as far as it is there now (not to the end: what it
  // started may hold the pipe open).
  if (out_ >= 0) {
    for (std::size_t before = output_.size(); read_output(0) && output_.size() > before;
         before = output_.size()) {
    }
  }
  return status_.value_or(-1);
}

}  // namespace fenceq::test
