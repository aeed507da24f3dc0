// Faults of the machine under a running fenceqd: the disk refusing writes or
// failing its fsync (C1.4, SQLite's file), and the daemon under valgrind's
// memcheck (C4.1: never leaks; on either store).
// kill -9 at random moments is the history run's (tests/history).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fenceq/client.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "daemon.hpp"

using fenceq::Client;
using fenceq::ClientOptions;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using namespace std::chrono_literals;

namespace {

// Sets the file-size limit of a running process (RLIMIT_FSIZE, as `ulimit -f`
// or systemd's LimitFSIZE= would): past it every write fails with EFBIG,
// which SQLite reports as a full disk or an I/O error.
void limit_file_size(pid_t pid, rlim_t bytes) {
  struct rlimit lim {};
  REQUIRE(::prlimit(pid, RLIMIT_FSIZE, nullptr, &lim) == 0);
  lim.rlim_cur = bytes;
  REQUIRE(::prlimit(pid, RLIMIT_FSIZE, &lim, nullptr) == 0);
}

std::string error_code(const std::function<void()>& call) {
  try {
    call();
  } catch (const fenceq::Error& e) {
    return e.code();
  }
  return "none";
}

std::string pack_enqueue(const std::string& id, int rid) {
  std::string m =
      "\x83\xa2op\xa7"
      "enqueue\xa2id";
  m += static_cast<char>(0xa0 | id.size());
  m += id;
  m += "\xa3rid";
  m += static_cast<char>(rid);  // positive fixint, rid < 128
  return m;
}

}  // namespace

TEST_CASE("C1.4 the disk refuses writes: internal, nothing applied, reads served, then recovery",
          "[sqlite]") {
  TempDir dir;
  Daemon d(dir, {"--clock", "client", "--sync", "full"});
  Client c(d.endpoint(), ClientOptions{5000ms});
  REQUIRE(c.enqueue("kept"));
  REQUIRE(c.claim("kept", "w", 100, 1.0) == 1);
  for (int i = 0; i < 5; ++i) REQUIRE(c.enqueue("before-" + std::to_string(i)));

  // From now on the write-ahead log cannot grow: the next commit fails.
  const auto wal = std::filesystem::file_size(d.db() + "-wal");
  REQUIRE(wal > std::filesystem::file_size(dir.file("fenceqd.log")));
  limit_file_size(d.pid(), wal);

  CHECK(error_code([&] { c.enqueue("lost-1"); }) == "internal");
  CHECK(error_code([&] { c.complete("kept", "w", 1, "lost result", 2.0); }) == "internal");
  CHECK(error_code([&] { c.claim("before-0", "w", 100, 2.0); }) == "internal");
  // A pipelined batch: every request of it fails, none is applied.
  {
    zmq::context_t ctx;
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(d.endpoint());
    for (int i = 0; i < 50; ++i) s.send(zmq::buffer(pack_enqueue("batch-" + std::to_string(i), i)));
    std::set<std::string> codes;
    for (int i = 0; i < 50; ++i) {
      zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
      REQUIRE(zmq::poll(&item, 1, 5000ms) == 1);
      zmq::message_t m;
      REQUIRE(s.recv(m));
      codes.insert(m.to_string().find("internal") != std::string::npos ? "internal" : "other");
    }
    CHECK(codes == std::set<std::string>{"internal"});
  }
  // The daemon is alive and reads are served from the committed state.
  CHECK(c.ping().protocol == 1);
  auto st = c.state("kept");
  REQUIRE(st);
  CHECK(st->fence == 1);
  CHECK_FALSE(st->done);
  CHECK_FALSE(c.state("lost-1"));
  CHECK(c.state("before-4"));

  // Space returns: writes resume, on the state from before the failure.
  limit_file_size(d.pid(), RLIM_INFINITY);
  CHECK(c.enqueue("after"));
  CHECK(c.complete("kept", "w", 1, "kept result", 3.0));
  CHECK(c.claim("before-0", "w", 100, 3.0) == 1);
  CHECK(c.enqueue("lost-1"));  // it did not exist: the failed enqueue left nothing

  // And all of it is durable: kill -9, restart, look again.
  d.kill9();
  d.restart();
  Client again(d.endpoint());
  CHECK(again.state("kept")->result == "kept result");
  CHECK(again.state("after"));
  for (int i = 0; i < 50; ++i) CHECK_FALSE(again.state("batch-" + std::to_string(i)));
  CHECK(d.log().find("rolled back") != std::string::npos);
}

TEST_CASE("C1.4 a failed fsync at COMMIT: outcome_unknown, fenceqd stops, what it acknowledged "
          "stays",
          "[sqlite]") {
  TempDir dir;
  const auto trigger = dir.file("fail-fsync");
  // fsync and fdatasync fail while `trigger` exists (tests/support/failsync.cpp).
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string asan_options =
      std::string(asan ? asan : "") + ":verify_asan_link_order=0";  // the shim comes first
  ::setenv("LD_PRELOAD", FENCEQ_TEST_FAILSYNC, 1);
  ::setenv("FENCEQ_FAILSYNC_TRIGGER", trigger.c_str(), 1);
  ::setenv("ASAN_OPTIONS", asan_options.c_str(), 1);
  Daemon d(dir, {"--clock", "client", "--sync", "full"});
  ::unsetenv("LD_PRELOAD");  // for this daemon only, not for its restart below
  ::unsetenv("FENCEQ_FAILSYNC_TRIGGER");
  if (asan) ::setenv("ASAN_OPTIONS", asan, 1); else ::unsetenv("ASAN_OPTIONS");

  Client c(d.endpoint(), ClientOptions{5000ms});
  REQUIRE(c.enqueue("acked"));
  REQUIRE(c.claim("acked", "w", 100, 1.0) == 1);

  std::ofstream(trigger).put('x');  // the disk now fails its flushes
  // Its WAL frames were written and may reach the disk anyway: neither
  // `internal` ("nothing applied") nor `unavailable` would be true.
  CHECK(error_code([&] { c.enqueue("unknown"); }) == "outcome_unknown");
  // A failed fsync cannot be retried: it stops rather than go on unsure.
  bool exited = false;
  for (int i = 0; i < 100 && !exited; ++i) {
    std::ifstream stat("/proc/" + std::to_string(d.pid()) + "/stat");
    std::string line;
    std::getline(stat, line);
    exited = line.find(") Z ") != std::string::npos;
    if (!exited) std::this_thread::sleep_for(50ms);
  }
  REQUIRE(exited);
  CHECK(d.stop(SIGTERM) == 1);
  CHECK(d.log().find("stopping, nothing after the last good fsync is known durable") !=
        std::string::npos);

  // The disk heals; a new daemon finds every acknowledged change.
  std::filesystem::remove(trigger);
  d.restart();
  Client again(d.endpoint());
  auto st = again.state("acked");
  REQUIRE(st);
  CHECK(st->owner == "w");
  CHECK(st->fence == 1);
  CHECK(again.claim("acked", "v", 100, 200.0) == 2);
}

TEST_CASE("valgrind: fenceqd under memcheck serves a mixed workload and exits with no leak") {
#ifdef FENCEQ_SANITIZED_ALLOCATOR
  WARN("valgrind cannot run a sanitizer build; this check runs in the plain build");
  return;
#else
  if (::access("/usr/bin/valgrind", X_OK) != 0) FAIL("valgrind is not installed (scripts/deps.sh)");
  TempDir dir;
  const std::string endpoint = "ipc://" + dir.file("vg.sock");
  const std::string log = dir.file("valgrind.log");
  fenceq::test::Child valgrind({.argv = {"/usr/bin/valgrind",
                                         "--quiet",
                                         "--leak-check=full",
                                         "--show-leak-kinds=definite,indirect",
                                         "--errors-for-leak-kinds=definite,indirect",
                                         "--error-exitcode=99",
                                         "--log-file=" + log,
                                         fenceq::test::fenceqd_path(),
                                         "--db",
                                         dir.db(),  // with FENCEQ_TEST_STORE=postgres, libpq's too
                                         "--listen",
                                         endpoint,
                                         "--clock",
                                         "client",
                                         "--max-message",
                                         "65536"},
                                .output = fenceq::test::Command::Output::file,
                                .output_file = dir.file("fenceqd.log")});
  // Valgrind starts slowly: wait for the first answer. Each request may take
  // seconds under memcheck on a busy machine (the PostgreSQL store's libpq
  // too): what is checked here is memory, not time (a 1 s timeout failed
  // beside a callgrind run and make test's suites, 2026-12-06).
  Client c(endpoint, ClientOptions{10000ms});
  bool up = false;
  for (auto end = std::chrono::steady_clock::now() + 60s;
       !up && std::chrono::steady_clock::now() < end;) {
    try {
      up = c.ping().protocol == 1;
    } catch (const fenceq::Error& e) {
      if (e.code() == "unreachable") std::this_thread::sleep_for(20ms);  // not bound yet
    }
  }
  REQUIRE(up);
  for (int i = 0; i < 100; ++i) {
    std::string id = "v" + std::to_string(i);
    REQUIRE(c.enqueue(id));
    auto f = c.claim(id, "w", 10, 1.0 + i);
    REQUIRE(f);
    if (i % 3 == 0) CHECK_FALSE(c.complete(id, "w", *f + 1, "stale", 2.0 + i));
    if (i % 2 == 0) CHECK(c.complete(id, "w", *f, "r", 2.0 + i));
    if (i % 2 == 1) CHECK(c.release(id, "w", *f));
    CHECK(c.state(id));
  }
  {
    // Garbage, an oversized frame (the connection is dropped), a client that
    // leaves with replies pending.
    zmq::context_t ctx;
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(endpoint);
    for (int i = 0; i < 20; ++i)
      s.send(zmq::buffer(std::string(i * 7 + 1, static_cast<char>(0xc1 + i))));
    zmq::socket_t big(ctx, zmq::socket_type::dealer);
    big.set(zmq::sockopt::linger, 0);
    big.connect(endpoint);
    big.send(zmq::buffer(std::string(70000, 'x')));
    std::this_thread::sleep_for(500ms);
  }
  CHECK(c.ping().protocol == 1);
  valgrind.signal(SIGTERM);
  const int status = valgrind.wait();
  std::ifstream in(log);
  std::stringstream report;
  report << in.rdbuf();
  INFO("valgrind log:\n" << report.str());
  REQUIRE(status < 128);  // exited, not killed by a signal
  CHECK(status == 0);     // 99: memcheck found an error or a leak
#endif
}
