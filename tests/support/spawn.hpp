// Test support: the one fork/exec of the C++ tests. A Child is a process
// started from an argv (no shell, no PATH search), with its stdout and stderr
// together in a pipe or a file, its stdin from a pipe when asked; it is
// killed (SIGKILL) and reaped when the object goes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fenceq::test {

struct Command {
  std::vector<std::string> argv;  // argv[0]: the program's path
  // "NAME=value" entries set in the child's environment (this process's,
  // with these added or replaced).
  std::vector<std::string> env = {};
  // Where stdout and stderr go, both to the same place.
  enum class Output { inherit, pipe, file };
  Output output = Output::inherit;
  std::string output_file = {};  // Output::file: appended to, created 0644
  bool stdin_pipe = false;       // stdin from a pipe whose write end is Child::in()
  // SIGTERM to the child when the thread that started it exits (a crash, a
  // ctest timeout): for a process that must clean up after itself, such as a
  // FUSE mount.
  bool term_with_parent = false;
  // Runs in the child after the redirections, before exec (only
  // async-signal-safe calls: setrlimit, umask); it may _exit.
  std::function<void()> in_child = nullptr;
};

// A started process. Throws std::runtime_error when it cannot be started
// (pipe, fork); an exec that fails exits 127.
class Child {
 public:
  explicit Child(Command cmd);
  // Closes its pipes, then kills (SIGKILL) and reaps it if it still runs.
  ~Child();
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // The write end of its stdin pipe (Command::stdin_pipe), -1 once closed.
  int in() const { return in_; }
  void close_in();
  // The read end of its output pipe (Output::pipe), -1 once closed.
  int out() const { return out_; }

  // Output::pipe: reads what is there, waiting up to `ms` (-1: for ever)
  // for something, and appends it to output(). False at the end of the
  // output (every writer gone).
  bool read_output(int ms);
  // Reads the output to its end.
  void read_all_output();
  const std::string& output() const { return output_; }

  // Whether it has not exited yet (reaps it, and remembers how it ended,
  // when it has).
  bool running();
  // How it ended: its exit status, or 128 + signal when killed; nullopt
  // while it runs.
  const std::optional<int>& status() const { return status_; }
  // Sends `sig` (nothing once it has been reaped).
  void signal(int sig);
  // Waits up to `limit` for it to end, reading its output meanwhile
  // (Output::pipe); its status, or nullopt when it still runs.
  std::optional<int> wait_for(std::chrono::milliseconds limit);
  // Waits for it to end; its status.
  int wait();
  // Sends `sig`, waits up to `grace`, then SIGKILL; its status.
  int stop(int sig, std::chrono::milliseconds grace = std::chrono::seconds(10));

 private:
  void reaped(int wait_status);
  void release();
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string output_;
  std::optional<int> status_;
};

// The exit status of a waitpid() status: its exit code, or 128 + signal.
int exit_status(int wait_status);

}  // namespace fenceq::test
