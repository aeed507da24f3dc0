// fenceqd as a systemd service, without a running systemd: the
// notify protocol against a datagram socket this test owns, the socket mode,
// the config file, journald-style logging, and the unit itself checked with
// systemd-analyze (verify, security) and by running fenceqd under the unit's
// system call filter; and the database files fenceqd refuses at start (bad
// file: ...). The Debian package has its own test
// (service/check_install.sh).
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fenceq/client.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "daemon.hpp"
#include "storage/job_rules.hpp"

using fenceq::Client;
using fenceq::ClientOptions;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// The receiving end of NOTIFY_SOCKET, as systemd binds it.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof a.sun_path);
    path.copy(a.sun_path, path.size());
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~NotifySocket() { ::close(fd_); }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  // The next datagram, or nullopt after `timeout`.
  std::optional<std::string> receive(std::chrono::milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0) return std::nullopt;
    return std::string(buf, static_cast<std::size_t>(n));
  }

  // Skips datagrams until one contains `what`; gives up after `timeout`.
  std::optional<std::string> wait_for(const std::string& what, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      auto m = receive(std::max(left, 1ms));
      if (m && m->find(what) != std::string::npos) return m;
    }
    return std::nullopt;
  }

 private:
  int fd_ = -1;
};

// Sets (or, with nullopt, unsets) an environment variable for one scope: the
// daemons a test starts inherit it. Each TEST_CASE runs in its own process.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// The permission bits of a socket file; -1 when it is missing or no socket.
int socket_mode(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) lines.push_back(l);
  }
  return lines;
}

std::string unit_path() { return fenceq::test::source_dir() + "/systemd/fenceqd.service"; }

// The unit with ExecStart= pointing at the fenceqd under test, for verify.
std::string unit_for_build(const TempDir& dir) {
  std::string unit = read_file(unit_path());
  const std::string from = "ExecStart=/usr/bin/fenceqd";
  auto at = unit.find(from);
  REQUIRE(at != std::string::npos);
  unit.replace(at, from.size(), "ExecStart=" + fenceq::test::fenceqd_path());
  auto path = dir.file("fenceqd.service");
  write_file(path, unit);
  return path;
}

// Runs fenceqd through sh with stderr appended to `log` (so its inode is
// known beforehand) and returns the exit status.
int run_logging_to(const std::string& log, const std::vector<std::string>& args,
                   const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>>'" + log + "'",
                                fenceq::test::fenceqd_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return fenceq::test::run(argv, env).status;
}

}  // namespace

// ---------------------------------------------------------------------------
// sd_notify

TEST_CASE("READY=1 once fenceqd answers, STATUS while serving, STOPPING=1 on SIGTERM") {
  TempDir dir;
  NotifySocket notify(dir.file("notify"));
  ScopedEnv socket("NOTIFY_SOCKET", dir.file("notify"));
  ScopedEnv watchdog("WATCHDOG_USEC", "400000");  // ticks every 200 ms, for STATUS
  ScopedEnv watchdog_pid("WATCHDOG_PID", std::nullopt);
  Daemon d(dir, {"--clock", "client", "--ipc-mode", "0660"}, /*wait_ready=*/false);

  auto ready = notify.receive(10s);
  REQUIRE(ready);
  CHECK(ready->rfind("READY=1\n", 0) == 0);  // the first message
  CHECK(ready->find("STATUS=") != std::string::npos);
  // READY=1 means the database is open and every endpoint bound: the socket
  // file is there with its mode, and the first ping is answered at once (a
  // client that found no socket would wait for ZeroMQ's reconnect).
  CHECK(std::filesystem::exists(d.db()));
  CHECK(socket_mode(d.endpoint().substr(6)) == 0660);
  Client c(d.endpoint(), ClientOptions{500ms});
  CHECK(c.ping().clock == "client");
  CHECK(c.enqueue("job-1"));
  CHECK(c.enqueue("job-2"));

  // The live summary: the jobs (recounted at most once a second) and the
  // requests served (ping and two enqueues).
  const std::regex summary(
      R"(STATUS=(stopping after )?(\d+) jobs \((\d+) ready, (\d+) leased, (\d+) dead\), (\d+) requests in \d+ batches)");
  std::smatch m;
  CHECK(std::regex_search(*ready, m, summary));
  bool counted = false;
  for (auto until = Clock::now() + 5s; !counted && Clock::now() < until;) {
    auto status = notify.wait_for("STATUS=", 1s);
    counted = status && std::regex_search(*status, m, summary) && m[2] == "2" && m[3] == "2" &&
              std::stoi(m[6]) >= 3;
  }
  CHECK(counted);

  REQUIRE(d.stop(SIGTERM) == 0);
  auto stopping = notify.wait_for("STOPPING=1", 1s);
  REQUIRE(stopping);
  REQUIRE(std::regex_search(*stopping, m, summary));
  CHECK(m[1] == "stopping after ");
  CHECK(m[2] == "2");
  CHECK(std::stoi(m[6]) >= 3);
}

TEST_CASE("WATCHDOG=1 at half of WATCHDOG_USEC from the serving loop, idle and busy") {
  TempDir dir;
  NotifySocket notify(dir.file("notify"));
  ScopedEnv socket("NOTIFY_SOCKET", dir.file("notify"));
  ScopedEnv watchdog("WATCHDOG_USEC", "500000");  // systemd would kill after 500 ms of silence
  ScopedEnv watchdog_pid("WATCHDOG_PID", std::nullopt);
  Daemon d(dir, {"--clock", "client"}, /*wait_ready=*/false);
  REQUIRE(notify.wait_for("READY=1", 10s));

  // Counts WATCHDOG=1 over `span` and the longest silence between two.
  auto observe = [&](std::chrono::milliseconds span) {
    int pings = 0;
    auto last = Clock::now();
    auto longest = 0ms;
    const auto end = Clock::now() + span;
    while (Clock::now() < end) {
      auto m = notify.receive(100ms);
      if (!m || m->find("WATCHDOG=1") == std::string::npos) continue;
      auto now = Clock::now();
      longest =
          std::max(longest, std::chrono::duration_cast<std::chrono::milliseconds>(now - last));
      last = now;
      ++pings;
    }
    return std::pair{pings, longest};
  };

  SECTION("idle") {
    auto [pings, longest] = observe(1300ms);
    CHECK(pings >= 4);  // every 250 ms
    CHECK(pings <= 8);
    CHECK(longest < 500ms);
  }
  SECTION("busy: requests back to back from four clients") {
    std::atomic<bool> stop{false};
    std::atomic<long> served{0};
    std::vector<std::thread> load;
    for (int t = 0; t < 4; ++t) {
      load.emplace_back([&, t] {
        Client c(d.endpoint(), ClientOptions{5000ms});
        for (long i = 0; !stop; ++i) {
          std::string id = std::to_string(t);  // (not a + chain: GCC 12's -Wrestrict)
          id += '-';
          id += std::to_string(i);
          c.enqueue(id);
          ++served;
        }
      });
    }
    auto [pings, longest] = observe(1300ms);
    stop = true;
    for (auto& t : load) t.join();
    CHECK(served > 100);
    CHECK(pings >= 4);
    CHECK(longest < 500ms);
  }
  CHECK(d.stop(SIGTERM) == 0);
}

TEST_CASE("no WATCHDOG=1 when WATCHDOG_PID names another process") {
  TempDir dir;
  NotifySocket notify(dir.file("notify"));
  ScopedEnv socket("NOTIFY_SOCKET", dir.file("notify"));
  ScopedEnv watchdog("WATCHDOG_USEC", "100000");
  ScopedEnv watchdog_pid("WATCHDOG_PID", "1");
  Daemon d(dir, {"--clock", "client"}, /*wait_ready=*/false);
  REQUIRE(notify.wait_for("READY=1", 10s));
  CHECK_FALSE(notify.wait_for("WATCHDOG=1", 600ms));
  CHECK(d.stop(SIGTERM) == 0);
}

TEST_CASE("without NOTIFY_SOCKET fenceqd serves and stops as always") {
  TempDir dir;
  ScopedEnv socket("NOTIFY_SOCKET", std::nullopt);
  ScopedEnv watchdog("WATCHDOG_USEC", "100000");  // asked for, but nobody to tell
  Daemon d(dir, {"--clock", "client"});
  Client c(d.endpoint(), ClientOptions{3000ms});
  CHECK(c.enqueue("job"));
  CHECK(c.claim("job", "w", 30, 1.0) == 1);
  CHECK(d.stop(SIGTERM) == 0);
  CHECK(socket_mode(d.endpoint().substr(6)) == -1);  // removed at exit, as always
}

// ---------------------------------------------------------------------------
// Socket mode, config file

TEST_CASE("socket mode: --ipc-mode gives each ipc socket file its mode") {
  TempDir dir;
  auto mode = GENERATE(0660, 0600, 0666);
  char text[8];
  std::snprintf(text, sizeof text, "%04o", mode);
  auto second = "ipc://" + dir.file("second.sock");
  Daemon d(dir, {"--clock", "client", "--ipc-mode", text, "--listen", second});
  CHECK(socket_mode(d.endpoint().substr(6)) == mode);
  CHECK(socket_mode(dir.file("second.sock")) == mode);
  // The umask was only narrowed while binding: the database keeps its own mode.
  struct stat st {};
  REQUIRE(::stat(d.db().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) != 0);
}

TEST_CASE("socket mode: without --ipc-mode each socket file is 0600, whatever the umask") {
  TempDir dir;
  auto second = "ipc://" + dir.file("second.sock");
  // The daemon inherits the umask 000 a careless unit or shell would give it.
  fenceq::test::SpawnOptions how;
  how.umask = 0;
  auto d = std::make_unique<Daemon>(dir, std::vector<std::string>{"--clock", "client", "--listen", second},
                                    true, "", how);
  CHECK(socket_mode(d->endpoint().substr(6)) == 0600);
  CHECK(socket_mode(dir.file("second.sock")) == 0600);
}

TEST_CASE("socket mode: --ipc-mode rejects what is not an octal mode") {
  for (const char* bad : {"660x", "0999", "1777", "", "rw-rw----"}) {
    auto r = fenceq::test::run({fenceq::test::fenceqd_path(), "--ipc-mode", bad});
    CHECK(r.status == 2);
    CHECK(r.out.find("--ipc-mode") != std::string::npos);
  }
}

TEST_CASE("config file: the options' keys, repeated listen, the command line wins") {
  TempDir dir;
  write_file(dir.file("fenceqd.conf"),
             "# a comment\n"
             "; another comment\n"
             "db = " +
                 dir.file("conf.db") +
                 "\n"
                 "listen = ipc://" +
                 dir.file("a.sock") +
                 "\n"
                 "listen = \"ipc://" +
                 dir.file("b.sock") +
                 "\"\n"
                 "\n"
                 "  ipc-mode = 0640  \n"
                 "clock = client\n"
                 "max_batch = 64\n"  // '_' for '-' is accepted
                 "log-level = warn\n");

  SECTION("alone") {
    auto r = fenceq::test::run({fenceq::test::fenceqd_path(), "--config", dir.file("fenceqd.conf"),
                                "--idle-exit", "0.2", "--log-level", "info"});
    CHECK(r.status == 0);
    CHECK(r.out.find("db=" + dir.file("conf.db")) != std::string::npos);
    CHECK(r.out.find("listen=ipc://" + dir.file("a.sock") + " ipc://" + dir.file("b.sock")) !=
          std::string::npos);
    CHECK(r.out.find("clock=client") != std::string::npos);
    CHECK(r.out.find("max_batch=64") != std::string::npos);
    CHECK(std::filesystem::exists(dir.file("conf.db")));
  }
  SECTION("under the command line") {
    // The test daemon's --db and --listen override the file's; the rest applies.
    Daemon d(dir, {"--config", dir.file("fenceqd.conf")});
    Client c(d.endpoint(), ClientOptions{3000ms});
    CHECK(c.ping().clock == "client");
    CHECK(socket_mode(d.endpoint().substr(6)) == 0640);
    CHECK_FALSE(std::filesystem::exists(dir.file("conf.db")));
    CHECK_FALSE(std::filesystem::exists(dir.file("a.sock")));
    CHECK(d.stop(SIGTERM) == 0);
  }
}

TEST_CASE("a config file with a mistake is one line naming FILE:LINE, nothing started") {
  TempDir dir;
  const std::string head = "db = " + dir.file("x.db") + "\nlisten = ipc://" + dir.file("x.sock") +
                           "\n# the mistake is on line 4\n";
  struct Case {
    std::string line, says;
  };
  auto c = GENERATE(Case{"lisen = ipc://x", "unknown key `lisen`"}, Case{"sync = fast", "--sync"},
                    Case{"max-batch = many", "--max-batch"}, Case{"ipc-mode = 0999", "--ipc-mode"},
                    Case{"db = " + std::string("/tmp/other.db"), "`db` is already set on line 1"},
                    Case{"idle-exit 5", "expected `key = value`"},
                    Case{"config = /etc/fenceq/other.conf", "unknown key `config`"},
                    Case{"help = true", "unknown key `help`"},
                    Case{"restored = true", "`restored` is for the command line only"});
  auto conf = dir.file("fenceqd.conf");
  write_file(conf, head + c.line + "\nclock = client\n");
  auto r = fenceq::test::run({fenceq::test::fenceqd_path(), "--config", conf});
  INFO(r.out);
  CHECK(r.status == 2);
  auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("fenceqd: " + conf + ":4: ", 0) == 0);
  CHECK(lines[0].find(c.says) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("x.db")));
  CHECK_FALSE(std::filesystem::exists(dir.file("x.sock")));
}

TEST_CASE("a missing config file is an error") {
  auto r =
      fenceq::test::run({fenceq::test::fenceqd_path(), "--config", "/nonexistent/fenceqd.conf"});
  CHECK(r.status == 2);
  CHECK(lines_of(r.out).size() == 1);
  CHECK(r.out.find("cannot read config file /nonexistent/fenceqd.conf") != std::string::npos);
}

TEST_CASE("the example config (installed as /etc/fenceq/fenceqd.conf) is accepted") {
  TempDir dir;
  auto conf = fenceq::test::source_dir() + "/systemd/fenceqd.conf";
  auto text = read_file(conf);
  CHECK(text.find("\ndb = /var/lib/fenceq/fenceq.db\n") != std::string::npos);
  CHECK(text.find("\nlisten = ipc:///run/fenceq/fenceqd.sock\n") != std::string::npos);
  CHECK(text.find("\nipc-mode = 0660\n") != std::string::npos);
  // Its paths exist only under systemd: the command line moves them here.
  auto r =
      fenceq::test::run({fenceq::test::fenceqd_path(), "--config", conf, "--db", dir.file("x.db"),
                         "--listen", "ipc://" + dir.file("x.sock"), "--idle-exit", "0.1"});
  INFO(r.out);
  CHECK(r.status == 0);
}

// ---------------------------------------------------------------------------
// journald

TEST_CASE("under journald (JOURNAL_STREAM) lines carry <priority> and no timestamp") {
  TempDir dir;
  auto log = dir.file("journal");
  write_file(log, "");
  struct stat st {};
  REQUIRE(::stat(log.c_str(), &st) == 0);
  const std::string stream =
      "JOURNAL_STREAM=" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const std::regex timestamp(R"(\d{4}-\d\d-\d\d \d\d:\d\d)");

  SECTION("info and error lines") {
    CHECK(run_logging_to(log,
                         {"--db", dir.file("j.db"), "--listen", "ipc://" + dir.file("j.sock"),
                          "--idle-exit", "0.1"},
                         {stream}) == 0);
    // A start that fails: the error line is priority 3 (journalctl -p err).
    CHECK(run_logging_to(log, {"--db", dir.file("j.db"), "--listen", "bogus://x"}, {stream}) == 1);
    auto lines = lines_of(read_file(log));
    REQUIRE(lines.size() >= 3);
    CHECK(lines.front().rfind("<6>info fenceqd ", 0) == 0);  // the start line
    CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
            return l.rfind("<6>info fenceqd stopped (idle)", 0) == 0;
          }) == 1);
    CHECK(lines.back().rfind("<3>fenceqd: cannot listen on bogus://x", 0) == 0);
    for (const auto& l : lines) {
      CHECK(std::regex_search(l, std::regex("^<[0-7]>")));
      CHECK_FALSE(std::regex_search(l, timestamp));
    }
  }
  SECTION("a bad option is an error line too") {
    CHECK(run_logging_to(log, {"--sync", "sometimes"}, {stream}) == 2);
    auto lines = lines_of(read_file(log));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].rfind("<3>fenceqd: --sync", 0) == 0);
  }
  SECTION("a JOURNAL_STREAM that is not our stderr is ignored") {
    CHECK(run_logging_to(log,
                         {"--db", dir.file("j.db"), "--listen", "ipc://" + dir.file("j.sock"),
                          "--idle-exit", "0.1"},
                         {"JOURNAL_STREAM=1:1"}) == 0);
    auto lines = lines_of(read_file(log));
    REQUIRE_FALSE(lines.empty());
    CHECK(lines[0].rfind("<", 0) != 0);
    CHECK(std::regex_search(lines[0], timestamp));
  }
}

// ---------------------------------------------------------------------------
// The unit, checked by systemd's own tools

TEST_CASE("systemd-analyze verify accepts the unit") {
  TempDir dir;
  auto r = fenceq::test::run({"/usr/bin/systemd-analyze", "verify", unit_for_build(dir)});
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("fenceqd.service:") == std::string::npos);  // no warning about it
}

TEST_CASE("systemd-analyze security rates the unit's exposure 1.0 or lower") {
  auto r = fenceq::test::run(
      {"/usr/bin/systemd-analyze", "security", "--offline=true", "--no-pager", unit_path()});
  INFO(r.out);
  std::smatch m;
  REQUIRE(std::regex_search(
      r.out, m, std::regex(R"(Overall exposure level for fenceqd\.service: (\d+\.\d))")));
  CHECK(std::stod(m[1]) <= 1.0);
}

namespace {

// The unit's SystemCallFilter= as systemd applies it: the first line is an
// allow list, later lines add to it or (with ~) take from it; @groups are
// expanded with systemd-analyze's own tables.
std::set<std::string> unit_syscall_allow_list() {
  auto tables = fenceq::test::run({"/usr/bin/systemd-analyze", "syscall-filter", "--no-pager"});
  REQUIRE(tables.status == 0);
  std::map<std::string, std::vector<std::string>> groups;
  std::string group;
  for (const auto& l : lines_of(tables.out)) {
    if (l[0] == '@') {
      group = l.substr(0, l.find(' '));
    } else if (!group.empty()) {
      auto b = l.find_first_not_of(' ');
      if (b != std::string::npos && l[b] != '#') groups[group].push_back(l.substr(b));
    }
  }
  std::function<void(const std::string&, std::set<std::string>&)> expand =
      [&](const std::string& name, std::set<std::string>& out) {
        if (name[0] != '@') {
          out.insert(name);
          return;
        }
        REQUIRE(groups.count(name));
        for (const auto& n : groups[name]) expand(n, out);
      };

  std::set<std::string> allowed;
  bool first = true;
  for (const auto& l : lines_of(read_file(unit_path()))) {
    const std::string key = "SystemCallFilter=";
    if (l.rfind(key, 0) != 0) continue;
    std::string value = l.substr(key.size());
    bool deny = !value.empty() && value[0] == '~';
    if (deny) value.erase(0, 1);
    REQUIRE((!first || !deny));  // an allow list, as the unit is written
    first = false;
    std::istringstream words(value);
    for (std::string w; words >> w;) {
      std::set<std::string> names;
      expand(w, names);
      for (const auto& n : names) {
        if (deny) {
          allowed.erase(n);
        } else {
          allowed.insert(n);
        }
      }
    }
  }
  return allowed;
}

}  // namespace

TEST_CASE("fenceqd serves under the unit's system call filter, on Unix sockets only") {
  // systemd's seccomp filter answers EPERM (SystemCallErrorNumber=) to every
  // call outside the allow list; strace injects exactly that. ZeroMQ aborts
  // when a call it needs fails, so a missing entry shows here, not in production.
  auto allowed = unit_syscall_allow_list();
  REQUIRE(allowed.count("read"));
  REQUIRE_FALSE(allowed.count("mount"));
  // "?name": strace skips names it does not know on this architecture.
  std::string set, without_socket;
  for (const auto& n : allowed) {
    set += (set.empty() ? "?" : ",?") + n;
    if (n != "socket") without_socket += (without_socket.empty() ? "?" : ",?") + n;
  }

  TempDir dir;
  auto endpoint = "ipc://" + dir.file("s.sock");
  auto trace = dir.file("strace.out");
  std::atomic<int> status{-1};
  std::thread daemon([&] {
    status = fenceq::test::run({"/usr/bin/strace", "-f", "-qq", "-o", trace, "-e",
                                "trace=!" + without_socket,  // the denied calls, and socket()
                                "-e", "inject=!" + set + ":error=EPERM",
                                fenceq::test::fenceqd_path(), "--db", dir.file("f.db"), "--listen",
                                endpoint, "--ipc-mode", "0660", "--idle-exit", "2"})
                 .status;
  });
  {
    Client c(endpoint, ClientOptions{500ms});
    bool up = false;
    for (auto end = std::chrono::steady_clock::now() + 20s;
         !up && std::chrono::steady_clock::now() < end;) {
      try {
        c.ping();
        up = true;
      } catch (const fenceq::Error& e) {
        if (e.code() == "unreachable") std::this_thread::sleep_for(20ms);  // not bound yet
      }
    }
    REQUIRE(up);
    CHECK(c.enqueue("job"));
    auto fence = c.claim("job", "w", 30);
    REQUIRE(fence);
    CHECK(c.complete("job", "w", *fence, "done"));
    CHECK(c.state("job")->done);
  }
  daemon.join();  // --idle-exit
  auto out = read_file(trace);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("killed by") == std::string::npos);
  CHECK(out.find("socket(") != std::string::npos);
  for (const auto& l : lines_of(out)) {
    if (l.find("socket(") != std::string::npos)
      CHECK(l.find("socket(AF_UNIX,") != std::string::npos);
  }
}

TEST_CASE("the sysusers.d and tmpfiles.d entries create user, group and state dir") {
  TempDir root;
  std::filesystem::create_directories(root.path() / "etc");
  std::filesystem::create_directories(root.path() / "usr/lib/sysusers.d");
  std::filesystem::create_directories(root.path() / "usr/lib/tmpfiles.d");
  auto src = fenceq::test::source_dir() + "/systemd/";
  std::filesystem::copy_file(src + "fenceq.sysusers", root.file("usr/lib/sysusers.d/fenceq.conf"));
  std::filesystem::copy_file(src + "fenceq.tmpfiles", root.file("usr/lib/tmpfiles.d/fenceq.conf"));

  auto r = fenceq::test::run({"/usr/bin/systemd-sysusers", "--root=" + root.path().string()});
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::smatch m;
  auto passwd = read_file(root.file("etc/passwd"));
  REQUIRE(
      std::regex_search(passwd, m, std::regex(R"(^fenceq:x:(\d+):(\d+):[^:]*:/var/lib/fenceq:)")));
  auto uid = std::stoul(m[1]), gid = std::stoul(m[2]);
  CHECK(uid < 1000);  // a system user
  CHECK(read_file(root.file("etc/group")).find("fenceq:x:" + std::to_string(gid) + ":") !=
        std::string::npos);

  r = fenceq::test::run(
      {"/usr/bin/systemd-tmpfiles", "--root=" + root.path().string(), "--create"});
  REQUIRE(r.status == 0);
  struct stat st {};
  REQUIRE(::stat(root.file("var/lib/fenceq").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0750);
  CHECK(st.st_uid == uid);
  CHECK(st.st_gid == gid);
}

// ---------------------------------------------------------------------------
// The database file: what fenceqd refuses to open (docs/operating.md), each
// case one line naming the path and the problem, exit status 1, the file
// unchanged byte for byte and nothing left beside it; and what it opens.

namespace {

void sql_on(const std::string& path, const std::string& text) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, &err);
  INFO((err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

// The first column of the first row of `text`, read without writing a byte
// (immutable: no -wal, -shm or lock).
std::string sql_value(const std::string& path, const std::string& text) {
  sqlite3* db = nullptr;
  const std::string uri = "file:" + path + "?mode=ro&immutable=1";
  REQUIRE(sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) ==
          SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  std::string out = "<error>";
  if (sqlite3_prepare_v2(db, text.c_str(), -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const auto* v = sqlite3_column_text(st, 0);
    out = v ? reinterpret_cast<const char*>(v) : "";
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// fenceqd on `db`, stopping on its own once idle; `argv`: how to run it
// (setpriv, a copy), fenceqd_path() when empty.
fenceq::test::RunResult start_on(const std::string& db, std::vector<std::string> argv = {}) {
  if (argv.empty()) argv.push_back(fenceq::test::fenceqd_path());
  // The socket beside the database (in a folder the daemon's user can write).
  const auto folder = std::filesystem::path(db).parent_path().string();
  for (const auto& a : {std::string("--db"), db, std::string("--listen"),
                        "ipc://" + folder + "/s.sock", std::string("--idle-exit"),
                        std::string("0.1"), std::string("--log-level"), std::string("warn")}) {
    argv.push_back(a);
  }
  return fenceq::test::run(argv);
}

// A fenceq database of 2,000 jobs at `path`, closed cleanly (no -wal).
void make_fenceq_db(const std::string& path) {
  auto r = start_on(path);
  INFO(r.out);
  REQUIRE(r.status == 0);
  sql_on(path,
         "INSERT INTO jobs(id, queue, seq, created) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
         "SELECT i + 1 FROM n WHERE i < 2000) SELECT 'job-' || i, 'q', i, 1000.0 + i FROM n");
  std::filesystem::remove(path + ".lock");
  REQUIRE_FALSE(std::filesystem::exists(path + "-wal"));
}

std::set<std::string> names_in(const std::filesystem::path& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    names.insert(e.path().string());
  }
  return names;
}

// fenceqd refuses `db` at start: status 1, one line naming it and `problem`,
// the file's bytes as they were, no file added in `dir`.
void check_refused(const TempDir& dir, const std::string& db, const std::string& problem,
                   const std::vector<std::string>& argv = {}) {
  const std::string before = read_file(db);
  const auto files = names_in(dir.path());
  auto r = start_on(db, argv);
  INFO(r.out);
  CHECK(r.status == 1);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("fenceqd: cannot open database " + db + ": ", 0) == 0);
  CHECK(lines[0].find(problem) != std::string::npos);
  CHECK(read_file(db) == before);
  CHECK(names_in(dir.path()) == files);  // no -wal, -shm or .lock left
}

}  // namespace

TEST_CASE("bad file: a file that is not SQLite is refused, unchanged") {
  TempDir dir;
  const auto path = dir.file("notes.db");
  write_file(path, "dear diary,\nthis is not a database.\n");
  check_refused(dir, path, "not an SQLite database");
}

TEST_CASE("bad file: a truncated fenceq database is refused, unchanged") {
  TempDir dir;
  const auto whole = dir.file("whole.db");
  make_fenceq_db(whole);
  const std::string bytes = read_file(whole);
  REQUIRE(bytes.size() > 16 * 4096);
  struct Cut {
    std::size_t size;
    std::string says;
  };
  for (const auto& cut : {Cut{50, "truncated: 50 bytes, shorter than SQLite's 100-byte header"},
                          Cut{100, "truncated: 100 bytes is not a whole number of its 4096-byte"},
                          Cut{bytes.size() / 2 + 10, "truncated"},
                          Cut{8 * 4096, "truncated: 32768 bytes, but its header says"}}) {
    const auto path = dir.file("cut" + std::to_string(cut.size) + ".db");
    write_file(path, bytes.substr(0, cut.size));
    check_refused(dir, path, cut.says);
  }
}

TEST_CASE("bad file: another application's SQLite file is refused, unchanged") {
  TempDir dir;
  const auto app = dir.file("app.db");
  sql_on(app, "CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL);"
              "INSERT INTO invoices VALUES(1, 42.5)");
  check_refused(dir, app, "not a fenceq database: its tables (invoices)");
  // Its own `jobs`, and a schema version of its own; in WAL mode.
  const auto other = dir.file("other.db");
  sql_on(other, "PRAGMA journal_mode=WAL; CREATE TABLE jobs(id INTEGER PRIMARY KEY, name TEXT);"
                "CREATE TABLE runs(job INTEGER); PRAGMA user_version = 3");
  check_refused(dir, other, "not a fenceq database: its tables (jobs, runs)");
  // The contract's six columns, and one more of its own: not the seed's table.
  const auto wider = dir.file("wider.db");
  sql_on(wider, "CREATE TABLE jobs(id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL "
                "DEFAULT 0, fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT "
                "NULL DEFAULT 0, customer TEXT)");
  check_refused(dir, wider, "not a fenceq database");
}

TEST_CASE("bad file: a read-only file, and a file in a read-only folder, are refused, unchanged") {
  // As root, permissions stop nothing: fenceqd runs as nobody (setpriv), a
  // copy of it in the test's folder, which nobody can enter.
  TempDir dir;
  std::vector<std::string> argv{fenceq::test::fenceqd_path()};
  const bool root = ::geteuid() == 0;
  if (root) {
    const auto copy = dir.file("fenceqd");
    std::filesystem::copy_file(fenceq::test::fenceqd_path(), copy);
    REQUIRE(::chmod(copy.c_str(), 0755) == 0);
    REQUIRE(::chmod(dir.path().c_str(), 0711) == 0);
    argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", copy};
  }
  const auto owned = [&](const std::string& path) {
    if (root) REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  };
  const auto open = dir.file("open");
  std::filesystem::create_directory(open);
  REQUIRE(::chmod(open.c_str(), 0777) == 0);
  const auto file = open + "/ro.db";
  make_fenceq_db(file);
  owned(file);
  REQUIRE(::chmod(file.c_str(), 0444) == 0);
  check_refused(dir, file, "the file is read-only to this user", argv);

  const auto closed = dir.file("closed");
  std::filesystem::create_directory(closed);
  const auto inside = closed + "/rw.db";
  make_fenceq_db(inside);
  owned(inside);
  REQUIRE(::chmod(inside.c_str(), 0644) == 0);
  REQUIRE(::chmod(closed.c_str(), 0555) == 0);
  check_refused(dir, inside, "its folder " + closed + " is read-only to this user", argv);
  // Writable again, both start.
  REQUIRE(::chmod(closed.c_str(), 0777) == 0);
  REQUIRE(::chmod(file.c_str(), 0644) == 0);
  for (const auto& path : {file, inside}) {
    auto r = start_on(path, argv);
    INFO(r.out);
    CHECK(r.status == 0);
  }
}

TEST_CASE("bad file: a database that fails PRAGMA quick_check is refused, unchanged") {
  TempDir dir;
  const auto path = dir.file("corrupt.db");
  make_fenceq_db(path);
  // jobs_next's root page (an interior page over 2,000 jobs): its cell
  // pointers overwritten.
  const int root = std::stoi(sql_value(path, "SELECT rootpage FROM sqlite_schema WHERE name = "
                                             "'jobs_next'"));
  REQUIRE(root > 1);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(root - 1) * 4096 + 12);
    f.write("\xff\xff\xff\xff\xff\xff\xff\xff", 8);
  }
  CHECK(sql_value(path, "PRAGMA integrity_check") != "ok");
  CHECK(sql_value(path, "PRAGMA quick_check") != "ok");
  CHECK(sql_value(path, "SELECT count(*) FROM jobs") == "2000");  // the table reads
  check_refused(dir, path, "corrupt: PRAGMA quick_check says: On tree page " +
                               std::to_string(root));
}

TEST_CASE("bad file: a schema newer than this fenceqd is refused naming both versions, unchanged") {
  TempDir dir;
  const auto path = dir.file("newer.db");
  make_fenceq_db(path);
  const int newer = fenceq::daemon::rules::kSchemaVersion + 1;
  sql_on(path, "PRAGMA user_version = " + std::to_string(newer));
  REQUIRE(read_file(path).substr(18, 2) == std::string("\x02\x02"));  // in WAL mode
  const std::string says = "its fenceq schema is version " + std::to_string(newer) +
                           ", newer than this fenceqd knows (" +
                           std::to_string(fenceq::daemon::rules::kSchemaVersion) + ")";
  check_refused(dir, path, says);
  // Out of WAL mode (copied by a tool that does that): PRAGMA journal_mode=WAL
  // would rewrite its header.
  sql_on(path, "PRAGMA journal_mode=DELETE");
  REQUIRE(read_file(path).substr(18, 2) == std::string("\x01\x01"));
  check_refused(dir, path, says);
}

TEST_CASE("bad file: a new path, an empty file, an empty SQLite database and the seed's "
          "six-column file still start") {
  TempDir dir;
  const auto fresh = dir.file("fresh.db");
  const auto empty = dir.file("empty.db");
  write_file(empty, "");
  const auto empty_sqlite = dir.file("empty_sqlite.db");
  sql_on(empty_sqlite, "PRAGMA page_size = 1024; VACUUM");
  REQUIRE(std::filesystem::file_size(empty_sqlite) > 0);
  const auto seed = dir.file("seed.db");
  sql_on(seed, "CREATE TABLE jobs(id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT "
               "0, fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT "
               "0); INSERT INTO jobs VALUES('seed', 'w', 50.0, 4, NULL, 0)");
  const auto version = std::to_string(fenceq::daemon::rules::kSchemaVersion);
  for (const auto& path : {fresh, empty, empty_sqlite, seed}) {
    auto r = start_on(path);
    INFO(path << ": " << r.out);
    CHECK(r.status == 0);
    CHECK(sql_value(path, "PRAGMA user_version") == version);
  }
  CHECK(sql_value(seed, "SELECT fence FROM jobs WHERE id = 'seed'") == "4");  // upgraded in place
}

TEST_CASE("bad file: a fenceq database killed with its -wal beside it starts and keeps its jobs") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("kept", fenceq::test::in_queue("q")));
  d.kill9();
  REQUIRE(std::filesystem::exists(dir.db() + "-wal"));
  d.restart();
  Client again(d.endpoint());
  CHECK(again.state("kept"));
}
