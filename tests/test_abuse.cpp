// Hostile load: what one local client can do to fenceqd with nothing but the
// sockets it may open. Each case is one reproduction of a way to crash, bloat
// or stall the daemon; each asserts that the daemon stays up, that its memory
// stays under the bound docs/operating.md ("Limits") states, and that a
// well-behaved worker elsewhere is still served quickly (its round trip is
// printed: "abuse: ..."; the bound is generous, a 10x stall fails).
//
// `make test` runs them short; `make soak` runs them with
// FENCEQ_ABUSE_SCALE=10 (more connections, longer floods).
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fenceq/client.hpp>
#include <iostream>
#include <regex>
#include <sstream>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "daemon.hpp"
#include "dashboard.hpp"
#include "fenceq_protocol/codec.hpp"
#include "policy.hpp"
#include "probe.hpp"

using fenceq::Client;
using fenceq::ClientOptions;
using namespace fenceq::test;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using json = nlohmann::json;

namespace {

// A well-behaved worker's enqueue + claim + complete must stay under this
// while the daemon is abused (about 1 ms unloaded).
constexpr double kWorkerBound = 0.5;

// A worker's round trip is timed here to show that an abuse does not hold
// the serving loop. An fsync on a busy disk takes hundreds of milliseconds
// by itself (295 ms with a dd writing beside the test), which no abuse
// caused, so every daemon whose worker is timed runs `--sync off`.
std::vector<std::string> unsynced(std::vector<std::string> args) {
  args.emplace_back("--sync");
  args.emplace_back("off");
  return args;
}

int scale() {
  const char* s = std::getenv("FENCEQ_ABUSE_SCALE");
  int n = s ? std::atoi(s) : 1;
  return n > 0 ? n : 1;
}

// The worker's round trip, printed and checked.
void check_worker(const Daemon& d, const std::string& during) {
  const double t = worker_round_trip(d);
  std::cout << "abuse: " << during << ": a worker's enqueue+claim+complete took "
            << (t < 0 ? std::string("(failed)") : std::to_string(t * 1000) + " ms") << std::endl;
  CHECK(t >= 0);
  CHECK(t < kWorkerBound);
}

std::vector<std::uint8_t> msgpack(const json& j) { return json::to_msgpack(j); }

// A frame that borrows `data` (zero-copy): the test sends the same megabyte
// a thousand times without holding a thousand copies itself.
zmq::message_t borrowed(const std::string& data) {
  return zmq::message_t(const_cast<char*>(data.data()), data.size(), nullptr, nullptr);
}

// Up to `n` idle connections to `connect()`, retried while the listener's
// backlog is full; the ones that connected.
template <typename Connect>
std::vector<int> pile_up(int n, Connect connect) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    int fd = -1;
    for (int attempt = 0; attempt < 50 && fd < 0; ++attempt) {
      fd = connect();
      if (fd < 0) std::this_thread::sleep_for(2ms);
    }
    if (fd >= 0) fds.push_back(fd);
  }
  return fds;
}

std::string socket_path(const Daemon& d) { return d.endpoint().substr(std::strlen("ipc://")); }

}  // namespace

// --- 1. file descriptors -----------------------------------------------------

TEST_CASE("abuse: fenceqd raises its soft file limit to the hard limit at start") {
  REQUIRE(raise_own_fd_limit() >= 4096);
  TempDir dir;
  Daemon d(dir, unsynced({"--clock", "client"}), true, "", SpawnOptions{1024, 20000});
  CHECK(nofile_limits(d.pid()) == std::pair<long, long>{20000, 20000});
  // 1,100 idle connections: more than the soft limit it was given.
  auto fds = pile_up(1100 * scale(), [&] { return connect_unix(socket_path(d)); });
  std::this_thread::sleep_for(500ms);
  CHECK(d.alive());
  CHECK(open_fds(d.pid()) > 1100);
  check_worker(d, std::to_string(fds.size()) + " idle connections");
  close_all(fds);
  CHECK(d.alive());
}

TEST_CASE("abuse: out of file descriptors, fenceqd refuses new connections and keeps serving") {
  REQUIRE(raise_own_fd_limit() >= 4096);
  TempDir dir;
  // A hard limit it cannot raise: 1,100 connections exceed it.
  Daemon d(dir, unsynced({"--clock", "client"}), true, "", SpawnOptions{1024, 1024});
  Client before(d.endpoint(), ClientOptions{5000ms});
  before.ping();  // connected before the flood
  auto fds = pile_up(1100 * scale(), [&] { return connect_unix(socket_path(d)); });
  std::this_thread::sleep_for(1s);
  REQUIRE(d.alive());
  std::cout << "abuse: " << fds.size() << " connections attempted against a limit of 1024; fenceqd "
            << open_fds(d.pid()) << " fds open" << std::endl;
  CHECK(open_fds(d.pid()) < 1024);
  CHECK(d.log().find("refusing new connections") != std::string::npos);
  // The client connected before is served all along.
  CHECK(before.ping().protocol == 1);
  CHECK(before.enqueue("during-flood"));
  close_all(fds);
  // Once the flood is gone, newcomers get in again.
  std::this_thread::sleep_for(300ms);
  CHECK(serves(d, 5000ms));
  check_worker(d, "after 1,100 connections against 1024 fds");
  CHECK(d.alive());
}

TEST_CASE("abuse: HTTP connections cannot take the file descriptors the job socket needs") {
  REQUIRE(raise_own_fd_limit() >= 4096);
  TempDir dir;
  Daemon d(dir, unsynced({"--clock", "client", "--metrics-listen", "127.0.0.1:0"}), true, "",
           SpawnOptions{1024, 1024});
  const int port = http_port(d);
  REQUIRE(port > 0);
  auto fds = pile_up(1100 * scale(), [&] { return connect_tcp(port); });
  std::this_thread::sleep_for(1s);
  REQUIRE(d.alive());
  std::cout << "abuse: " << fds.size() << " HTTP connections held; fenceqd " << open_fds(d.pid())
            << " fds open" << std::endl;
  // A new job client still gets in, and the daemon is still there.
  CHECK(serves(d, 5000ms));
  check_worker(d, "1,100 idle HTTP connections");
  close_all(fds);
  std::this_thread::sleep_for(300ms);
  CHECK(http_request(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     5000ms) == 200);
  CHECK(d.alive());
}

// --- 2. multi-frame messages -------------------------------------------------

TEST_CASE("abuse: a message of a thousand 1 MiB frames is dropped and its memory given back") {
  TempDir dir;
  Daemon d(dir, unsynced({"--clock", "client"}));
  const long base = proc_status(d.pid(), "VmHWM");
  const auto ping = msgpack({{"op", "ping"}});
  const auto ping2 = msgpack({{"op", "ping"}, {"rid", 2}});
  zmq::context_t ctx;
  auto s = dealer(ctx, d.endpoint());
  const int scale = kRssMeaningful ? 10 : 1;
  // The same message twice, then the same gigabyte in frames of 127 KiB.
  // Before issue 26 the second message stayed (845 MiB: glibc's threshold had
  // slid up to 1 MiB when the first one's frames were freed, and the next ones
  // came from the heap), and so did the small frames (1,001 MiB, below any
  // threshold). Now the serving loop hands the memory back once its input is
  // drained (daemon/base/memory_policy.hpp), before it replies.
  const std::vector<std::pair<int, std::size_t>> rounds{
      {100 * scale, (1 << 20) - 64}, {100 * scale, (1 << 20) - 64}, {800 * scale, 127 * 1024}};
  for (const auto& [frames, size] : rounds) {
    const std::string frame(size, 'e');
    for (int i = 0; i < frames; ++i) s.send(borrowed(frame), zmq::send_flags::sndmore);
    s.send(zmq::buffer(ping.data(), ping.size()));
    // A connection's messages are read in order: once the ping sent after
    // it is answered, the message was read and dropped (however long it took
    // to arrive whole on a busy machine). It got no reply: an envelope like
    // that routes nowhere a client of the protocol is.
    s.send(zmq::buffer(ping2.data(), ping2.size()));
    zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    REQUIRE(zmq::poll(&item, 1, 120000ms) == 1);
    zmq::message_t reply;
    REQUIRE(s.recv(reply));
    CHECK(nlohmann::json::from_msgpack(std::string(static_cast<const char*>(reply.data()),
                                                   reply.size()))
              .value("rid", 0) == 2);
    CHECK(zmq::poll(&item, 1, 200ms) == 0);  // and nothing else
    CHECK(d.alive());
    report("one message of " + std::to_string(frames) + " frames of " +
               std::to_string(size / 1024) + " KiB",
           d.pid(), base);
    // libzmq assembles a multipart message whole before fenceqd sees its
    // first frame (the peak); once dropped, the memory must be returned.
    if (kRssMeaningful) CHECK(proc_status(d.pid(), "VmRSS") < base + 64 * kMiB);
    CHECK(serves(d));
  }
  check_worker(d, "after three messages of about 1 GB");
}

TEST_CASE("abuse: parked claims with megabyte envelope frames hold none of them") {
  TempDir dir;
  Daemon d(dir, unsynced({"--clock", "client"}));
  const long base = proc_status(d.pid(), "VmHWM");
  const std::string frame((1 << 20) - 64, 'e');
  const auto claim = msgpack({{"op", "claim_next"}, {"queue", "empty"}, {"owner", "w"},
                              {"ttl", 10}, {"wait", 60}, {"now", 1.0}});
  zmq::context_t ctx;
  auto s = dealer(ctx, d.endpoint());
  const int requests = kRssMeaningful ? 50 : 10;
  for (int r = 0; r < requests; ++r) {
    for (int i = 0; i < 30; ++i) s.send(borrowed(frame), zmq::send_flags::sndmore);
    s.send(zmq::buffer(claim.data(), claim.size()));
  }
  std::this_thread::sleep_for(2s);
  CHECK(d.alive());
  report(std::to_string(requests) + " claim_next with 30 envelope frames of 1 MiB", d.pid(), base);
  // Each was 30 MiB held for its whole wait (1.5 GB for 50).
  if (kRssMeaningful) CHECK(proc_status(d.pid(), "VmRSS") < base + 64 * kMiB);
  Client c(d.endpoint());
  CHECK(c.stats().waiting_claims == 0);
  check_worker(d, "after 50 claims with 30 MiB envelopes");
}

TEST_CASE("abuse: envelopes beyond 32 frames or 255 bytes a frame are dropped, others answered") {
  TempDir dir;
  Daemon d(dir);
  const auto ping = msgpack({{"op", "ping"}, {"rid", 7}});
  zmq::context_t ctx;
  auto send = [&](zmq::socket_t& s, int frames, std::size_t size) {
    const std::string frame(size, 'f');
    for (int i = 0; i < frames; ++i) s.send(zmq::buffer(frame), zmq::send_flags::sndmore);
    s.send(zmq::buffer(ping.data(), ping.size()));
    zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, 1000ms) == 0) return -1;
    int got = 0;
    zmq::message_t m;
    do {
      (void)s.recv(m);
      ++got;
    } while (m.more());
    return got - 1;  // envelope frames that came back
  };
  auto s = dealer(ctx, d.endpoint());
  // The ROUTER adds the peer's routing id: 31 of the client's frames make 32.
  CHECK(send(s, 31, 255) == 31);
  CHECK(send(s, 32, 1) == -1);
  CHECK(send(s, 1, 256) == -1);
  CHECK(send(s, 2, 0) == 2);
  CHECK(d.alive());
  CHECK(serves(d));
}

// --- 3. parked claims on many queues ----------------------------------------

TEST_CASE("abuse: 10,000 claims parked on 10,000 queues cost nothing while idle") {
  TempDir dir;
  Daemon d(dir, unsynced({"--clock", "server"}));
  zmq::context_t ctx;
  auto s = dealer(ctx, d.endpoint());
  constexpr int kParked = 10000;
  for (int i = 0; i < kParked; ++i) {
    auto m = msgpack({{"op", "claim_next"}, {"queue", "q" + std::to_string(i)}, {"owner", "w"},
                      {"ttl", 10}, {"wait", 600}, {"rid", i}});
    s.send(zmq::buffer(m.data(), m.size()));
  }
  Client c(d.endpoint(), ClientOptions{10000ms});
  const auto deadline = SteadyClock::now() + 30s;
  while (c.stats().waiting_claims < kParked && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  REQUIRE(c.stats().waiting_claims == kParked);
  // Idle: what does the daemon spend?
  const double cpu0 = cpu_seconds(d.pid());
  std::this_thread::sleep_for(2s);
  const double busy = (cpu_seconds(d.pid()) - cpu0) / 2.0;
  std::vector<double> pings;
  for (int i = 0; i < 21; ++i) {
    auto t0 = SteadyClock::now();
    c.ping();
    pings.push_back(std::chrono::duration<double>(SteadyClock::now() - t0).count());
  }
  std::sort(pings.begin(), pings.end());
  std::cout << "abuse: 10,000 parked claims on 10,000 queues, idle: " << busy * 100
            << "% of a core; ping median " << pings[10] * 1000 << " ms" << std::endl;
  CHECK(busy < 0.05);
  CHECK(pings[10] < 0.02);
  check_worker(d, "10,000 parked claims");
  // And they still work: a job on one of those queues goes to its waiter.
  fenceq::EnqueueOptions o;
  o.queue = "q4242";
  REQUIRE(c.enqueue("for-4242", o));
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  REQUIRE(zmq::poll(&item, 1, 5000ms) == 1);
  zmq::message_t reply;
  REQUIRE(s.recv(reply));
  auto j = json::from_msgpack(std::string(reply.to_string_view()));
  CHECK(j["rid"] == 4242);
  CHECK(j["result"]["id"] == "for-4242");
}

// --- 4. the HTTP listener -----------------------------------------------------

TEST_CASE("abuse: HTTP request bodies and headers are bounded, slow clients do not block scrapes") {
  TempDir dir;
  Daemon d(dir, unsynced({"--clock", "client", "--metrics-listen", "127.0.0.1:0"}));
  const int port = http_port(d);
  REQUIRE(port > 0);
  const long base = proc_status(d.pid(), "VmHWM");
  const std::string scrape = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  REQUIRE(http_request(port, scrape, 5000ms) == 200);

  SECTION("a 1 GiB body is not read") {
    int fd = connect_tcp(port);
    REQUIRE(fd >= 0);
    const std::string head = "POST /anything HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n";
    ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
    const std::string chunk(1 << 20, 'b');
    std::size_t sent = 0;
    const auto until = SteadyClock::now() + 10s;
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    while (sent < (1ul << 30) && SteadyClock::now() < until) {
      ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;  // refused: the connection is closed, or nothing is read
      sent += static_cast<std::size_t>(n);
    }
    ::close(fd);
    std::cout << "abuse: a 1 GiB POST: " << sent / kMiB << " MiB sent before fenceqd stopped reading"
              << std::endl;
    report("a 1 GiB HTTP POST", d.pid(), base);
    CHECK(sent < 64 * kMiB);
    CHECK(within(d.pid(), base, 64 * kMiB));
  }
  SECTION("a 1 MiB header is refused") {
    std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(1 << 20, 'h') +
                      "\r\n\r\n";
    const int status = http_request(port, req, 5000ms);
    std::cout << "abuse: a 1 MiB header: status " << status << std::endl;
    CHECK(status != 200);
    report("a 1 MiB HTTP header", d.pid(), base);
    CHECK(within(d.pid(), base, 32 * kMiB));
  }
  SECTION("500 slow clients (slowloris)") {
    std::vector<int> slow = pile_up(500 * scale(), [&] { return connect_tcp(port); });
    for (int fd : slow) ::send(fd, "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL);
    int ok = 0, tries = 0;
    const auto until = SteadyClock::now() + std::chrono::seconds(6 * scale());
    while (SteadyClock::now() < until) {
      for (int fd : slow) ::send(fd, "X", 1, MSG_NOSIGNAL);  // a byte now and then
      ++tries;
      if (http_request(port, scrape, 2000ms) == 200) ++ok;
      std::this_thread::sleep_for(300ms);
    }
    std::cout << "abuse: " << slow.size() << " slowloris connections: " << ok << " of " << tries
              << " scrapes answered" << std::endl;
    CHECK(ok == tries);
    close_all(slow);
  }
  CHECK(d.alive());
  check_worker(d, "HTTP abuse");
  CHECK(http_request(port, scrape, 5000ms) == 200);
}

// --- 5. replies nobody reads --------------------------------------------------

TEST_CASE("abuse: unread replies are bounded in bytes per client") {
  TempDir dir;
  Daemon d(dir, unsynced({"--clock", "client"}));
  {
    // 1,000 jobs, each with a 64 KiB error: a `list` of them is ~9 MB.
    Client c(d.endpoint(), ClientOptions{10000ms});
    const std::string error(64 * 1024, 'e');
    for (int i = 0; i < 1000; ++i) {
      fenceq::EnqueueOptions o;
      o.queue = "big";
      o.now = 1.0;
      REQUIRE(c.enqueue("job-" + std::to_string(i), o));
      auto job = c.claim_next("big", "w", 10, 0, 1.0);
      REQUIRE(job);
      REQUIRE(c.fail(job->id, "w", job->fence, error, 3600.0, 1.0));
    }
  }
  const long base = proc_status(d.pid(), "VmHWM");
  zmq::context_t ctx;
  auto s = dealer(ctx, d.endpoint());
  s.set(zmq::sockopt::rcvhwm, 1);  // this client's own queue takes (almost) nothing
  s.set(zmq::sockopt::rcvbuf, 4096);
  const int requests = 200 * scale();
  for (int i = 0; i < requests; ++i) {
    auto m = msgpack({{"op", "list"}, {"queue", "big"}, {"limit", 1000}, {"now", 1.0}, {"rid", i}});
    s.send(zmq::buffer(m.data(), m.size()));
  }
  std::this_thread::sleep_for(std::chrono::seconds(3 * scale()));
  CHECK(d.alive());
  report(std::to_string(requests) + " unread list replies of 1,000 jobs", d.pid(), base);
  CHECK(within(d.pid(), base, 128 * kMiB));
  check_worker(d, "200 unread list replies");
  // The client reading now finds its replies: served, or refused for its
  // backlog with a coded error; never silence for a request it could read.
  int served = 0, refused = 0;
  zmq::message_t m;
  while (s.recv(m, zmq::recv_flags::dontwait) || [&] {
    zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    return zmq::poll(&item, 1, 1000ms) > 0 && s.recv(m, zmq::recv_flags::dontwait);
  }()) {
    auto j = json::from_msgpack(std::string(m.to_string_view()));
    if (j.contains("result")) ++served;
    if (j.contains("error")) {
      CHECK(j["error"]["code"] == "unavailable");
      ++refused;
    }
  }
  std::cout << "abuse: the slow reader then read " << served << " lists and " << refused
            << " refusals" << std::endl;
  CHECK(served >= 1);
}

// --- 6. stats on a large store ----------------------------------------------

// A SQLite store in `dir` with `n` jobs bulk-1..bulk-n over 50 queues (a
// third delayed), written straight into the file before the daemon starts.
void bulk_store(const TempDir& dir, const std::vector<std::string>& args, int n) {
  {
    Daemon first(dir, args);  // creates the schema
    first.stop(SIGTERM);
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(dir.file("fenceq.db").c_str(), &db) == SQLITE_OK);
  const std::string fill =
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
      std::to_string(n) +
      ") INSERT INTO jobs(id, queue, seq, created, not_before) SELECT 'bulk-' || i, "
      "'bulk' || (i % 50), i, 1.0, CASE WHEN i % 3 = 0 THEN 1e12 ELSE 0 END FROM n";
  REQUIRE(sqlite3_exec(db, fill.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

// [latency]: its bound is a worker's round trip, so it runs with the timed
// tests, alone (tests/CMakeLists.txt): beside the deadlock run and ctest -j3
// one clean clone measured 832 ms (4,422 round trips), where alone it
// measures 28-36 ms.
TEST_CASE("abuse: stats and /metrics on 300,000 jobs do not stall claims", "[sqlite][latency]") {
  TempDir dir;
  std::vector<std::string> args{"--clock", "client", "--metrics-listen", "127.0.0.1:0"};
  bulk_store(dir, args, 300000);
  Daemon d(dir, unsynced(args));
  const int port = http_port(d);
  REQUIRE(port > 0);
  std::atomic<bool> stop{false};
  std::atomic<int> scrapes{0};
  std::vector<std::thread> scrapers;
  for (int i = 0; i < 4; ++i) {
    scrapers.emplace_back([&] {
      Client c(d.endpoint(), ClientOptions{30000ms});
      while (!stop) {
        try {
          c.stats();
          ++scrapes;
        } catch (const fenceq::Error&) {
        }
      }
    });
    scrapers.emplace_back([&] {
      while (!stop) {
        if (http_request(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                         30000ms) == 200) {
          ++scrapes;
        }
      }
    });
  }
  double worst = 0;
  int rounds = 0, failed = 0;
  const auto until = SteadyClock::now() + std::chrono::seconds(5 * scale());
  while (SteadyClock::now() < until) {
    double t = worker_round_trip(d);
    if (t < 0) ++failed;
    worst = std::max(worst, t);
    ++rounds;
  }
  stop = true;
  for (auto& t : scrapers) t.join();
  std::cout << "abuse: 8 scrapers on 300,000 jobs: " << scrapes << " scrapes; " << rounds
            << " worker round trips, the slowest " << worst * 1000 << " ms" << std::endl;
  CHECK(failed == 0);
  CHECK(worst < kWorkerBound);
  CHECK(scrapes > 0);
  // The counts are right, if not instant.
  Client c(d.endpoint());
  auto st = c.stats();
  std::int64_t total = 0;
  for (const auto& q : st.queues) {
    if (q.queue.rfind("bulk", 0) == 0) total += q.ready + q.delayed;
  }
  CHECK(total == 300000);
}

// --- 8. the smaller ones --------------------------------------------------------

TEST_CASE("abuse: unknown_op's message is valid UTF-8 whatever the op's bytes") {
  TempDir dir;
  Daemon d(dir);
  zmq::context_t ctx;
  auto s = dealer(ctx, d.endpoint());
  // 63 ASCII bytes, then a two-byte character across the cut at byte 64; a
  // control character; a long op of multi-byte characters.
  const std::vector<std::string> ops = {std::string(63, 'x') + "\xc3\xa9" + "tail",
                                        "bad\nop\x01", std::string(100, '\x7f'),
                                        [] {
                                          std::string s;
                                          for (int i = 0; i < 40; ++i) s += "\xe2\x82\xac";
                                          return s;
                                        }()};
  for (const auto& op : ops) {
    json j = {{"op", op}, {"rid", 1}};
    auto m = json::to_msgpack(j);
    s.send(zmq::buffer(m.data(), m.size()));
    zmq::message_t reply;
    REQUIRE(s.recv(reply));
    auto r = json::from_msgpack(std::string(reply.to_string_view()), true, false);
    REQUIRE(r.contains("error"));
    CHECK(r["error"]["code"] == "unknown_op");
    const std::string msg = r["error"]["message"].get<std::string>();
    CHECK(fenceq::protocol::valid_utf8(msg));
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(msg.size() < 300);
  }
}

TEST_CASE("abuse: database files are created private, or as open as the socket, never more",
          "[sqlite]") {
  TempDir dir;
  auto check_modes = [&](const std::vector<std::string>& args, mode_t expected) {
    std::filesystem::remove(dir.file("fenceq.db"));
    Daemon d(dir, args, true, "", SpawnOptions{-1, -1, 022});
    Client c(d.endpoint());
    REQUIRE(c.enqueue("x"));
    for (const char* suffix : {"", "-wal", "-shm"}) {
      struct stat st {};
      REQUIRE(::stat((dir.file("fenceq.db") + suffix).c_str(), &st) == 0);
      INFO("fenceq.db" << suffix);
      CHECK((st.st_mode & 0777) == expected);
    }
    d.stop(SIGTERM);
    for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(dir.file("fenceq.db") + suffix);
  };
  check_modes({"--clock", "client"}, 0600);
  check_modes({"--clock", "client", "--ipc-mode", "0660"}, 0640);
  check_modes({"--clock", "client", "--ipc-mode", "0666"}, 0640);
}

// --- job and await on a large store -------------------------------------------

namespace {

// The median and the 99th percentile of `n` timings of `f`, in seconds.
template <typename F>
std::pair<double, double> timed(int n, F f) {
  std::vector<double> ts;
  for (int i = 0; i < n; ++i) {
    const auto t0 = SteadyClock::now();
    f();
    ts.push_back(std::chrono::duration<double>(SteadyClock::now() - t0).count());
  }
  std::sort(ts.begin(), ts.end());
  return {ts[ts.size() / 2], ts[ts.size() * 99 / 100]};
}

}  // namespace

TEST_CASE("abuse: job on a missing or late id is a point read, and 1,000 awaits parked on late "
          "ids do not slow workers", "[sqlite]") {
  TempDir dir;
  std::vector<std::string> args{"--clock", "server"};
  const int jobs = 300000 * scale();
  bulk_store(dir, args, jobs);
  Daemon d(dir, unsynced(args));
  Client c(d.endpoint(), ClientOptions{30000ms});
  const std::string late = "bulk-" + std::to_string(jobs - 1);  // near the end of the id index
  // `job` against `state`, which reads one row by its key: the same order.
  const auto state = timed(41, [&] { c.state("zzz-missing"); });
  const auto missing = timed(41, [&] { CHECK_FALSE(c.job("zzz-missing")); });
  const auto found = timed(41, [&] { CHECK(c.job(late)); });
  std::cout << "abuse: on " << jobs << " jobs, medians: state " << state.first * 1000
            << " ms, job (missing) " << missing.first * 1000 << " ms, job (late id) "
            << found.first * 1000 << " ms" << std::endl;
  CHECK(missing.first < 3 * state.first + 0.001);
  CHECK(found.first < 3 * state.first + 0.001);
  // 1,000 awaits on late, unfinished (delayed) ids, parked from one socket.
  const auto quiet = timed(200, [&] { c.ping(); });
  zmq::context_t ctx;
  auto s = dealer(ctx, d.endpoint());
  for (int i = 0; i < 1000; ++i) {
    const std::string id = "bulk-" + std::to_string(jobs - 3 * i);  // i % 3 == 0: delayed
    auto m = msgpack({{"op", "await"}, {"id", id}, {"wait", 60}, {"rid", i}});
    s.send(zmq::buffer(m.data(), m.size()));
  }
  // Parked: nothing answered yet (a reply would be an error or a finished job).
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  CHECK(zmq::poll(&item, 1, 1000ms) == 0);
  // Pings for 3 s: the awaits are swept about three times meanwhile.
  std::vector<double> pings;
  const auto until = SteadyClock::now() + 3s;
  while (SteadyClock::now() < until && pings.size() < 100000) {
    const auto t0 = SteadyClock::now();
    c.ping();
    pings.push_back(std::chrono::duration<double>(SteadyClock::now() - t0).count());
  }
  std::sort(pings.begin(), pings.end());
  const double median = pings[pings.size() / 2], p99 = pings[pings.size() * 99 / 100];
  std::cout << "abuse: ping with 1,000 awaits parked: median " << median * 1000 << " ms, p99 "
            << p99 * 1000 << " ms (quiet: " << quiet.first * 1000 << " ms, "
            << quiet.second * 1000 << " ms), " << pings.size() << " pings" << std::endl;
  CHECK(median < 3 * quiet.first + 0.001);
  CHECK(pings.back() < kWorkerBound);
  check_worker(d, "1,000 awaits parked");
  CHECK(zmq::poll(&item, 1, 0ms) == 0);  // still parked, none answered by mistake
}

// --- periodic jobs -----------------------------------------------------------

TEST_CASE("abuse: no client can take a periodic job's next tick id and silence it") {
  TempDir dir;
  Daemon d(dir);  // client clock: each request's `now` moves time
  Client c(d.endpoint());
  const double t0 = utc(2026, 6, 1, 10, 2);
  REQUIRE(raw(d, {{"op", "schedule_set"}, {"name", "report"}, {"cron", "*/5 * * * *"},
                  {"queue", "jobs"}, {"now", t0}})["ok"] == true);
  // The next tick's id, planted first in another queue with a long delay:
  // refused, alone or in a batch (which is then refused whole).
  const std::string tick = "report@2026-06-01T10:05Z";
  auto planted = raw(d, {{"op", "enqueue"}, {"id", tick}, {"queue", "elsewhere"},
                         {"delay", 1e8}, {"now", t0}});
  CHECK(planted["error"]["code"] == "invalid_argument");
  auto batch = raw(d, {{"op", "enqueue_many"},
                       {"jobs", json::array({{{"id", "fine"}}, {{"id", tick}}})},
                       {"now", t0}});
  CHECK(batch["error"]["code"] == "invalid_argument");
  CHECK_FALSE(c.job("fine"));
  // The tick comes, and its job is in its own queue.
  CHECK(ids_at(d, "jobs", utc(2026, 6, 1, 10, 5) + 30) == std::vector<std::string>{tick});
  CHECK(ids_at(d, "elsewhere", utc(2026, 6, 1, 10, 6)).empty());
  if (std::getenv("FENCEQ_TEST_STORE")) return;  // the rest writes the SQLite file itself
  // A tick id already there anyway (written by hand, or by an older fenceqd):
  // the log says the tick was not enqueued, rather than that it was.
  d.stop(SIGTERM);
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(d.db().c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "INSERT INTO jobs(id, queue) VALUES('report@2026-06-01T10:10Z', 'x')",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  d.restart();
  CHECK(ids_at(d, "jobs", utc(2026, 6, 1, 10, 10) + 30) == std::vector<std::string>{tick});
  const auto log = d.log();
  CHECK(log.find("schedule 'report': tick 'report@2026-06-01T10:10Z' NOT enqueued") != std::string::npos);
  CHECK(log.find("enqueued 'report@2026-06-01T10:10Z'") == std::string::npos);
}

// --- the dashboard: logins, hosts, arguments --------------------------------

namespace {

// A counter of /metrics, -1 when it is not there.
double metric(const Dashboard& db, const std::string& name) {
  auto r = db.as("").get("/metrics");
  REQUIRE(r.status == 200);
  std::istringstream in(r.body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

int retry_after(const Http::Reply& r) {
  std::smatch m;
  if (!std::regex_search(r.head, m, std::regex("Retry-After: (\\d+)"))) return -1;
  return std::stoi(m[1]);
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("abuse: dashboard login guessing waits after 5 failures (429, Retry-After), is counted "
          "and logged at most every 10 s, and the right password works once the wait is over") {
  Dashboard db;
  // Five failures cost nothing: each is answered 401.
  for (int i = 0; i < 5; ++i) CHECK(db.as("ops:guess" + std::to_string(i)).get("/").status == 401);
  // The sixth is still judged (401), and makes the address and the user wait.
  CHECK(db.as("ops:guess5").get("/").status == 401);
  // While they wait, no password is even looked at: the right one too is 429.
  const auto guessed = db.as("ops:guess6").get("/api/session");
  CHECK(guessed.status == 429);
  CHECK(retry_after(guessed) >= 1);
  const auto right = db.as().get("/api/session");
  CHECK(right.status == 429);
  // A guessing loop for up to 3 s gets no more than a few answers judged:
  // each failure doubles the wait.
  int judged = 0, refused = 0;
  const auto until = SteadyClock::now() + 3s;
  for (int i = 0; i < 300 && SteadyClock::now() < until; ++i) {
    const int status = db.as("ops:loop" + std::to_string(i)).get("/").status;
    (status == 429 ? refused : judged) += 1;
    if (status == 429) std::this_thread::sleep_for(10ms);
  }
  INFO("judged " << judged << ", refused " << refused);
  CHECK(judged <= 3);  // at 1 s, then 2 s: a third would need 4 s more
  CHECK(refused > 0);
  // Once the wait is over, the right password gets in, and starts it over.
  auto in = db.as().get("/api/session");
  for (int i = 0; i < 70 && in.status == 429; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(std::max(1, retry_after(in))));
    in = db.as().get("/api/session");
  }
  CHECK(in.status == 200);
  CHECK(db.as("ops:wrong").get("/").status == 401);
  CHECK(db.as().get("/api/session").status == 200);
  // Counted in /metrics (no login needed), each refusal and each wait.
  CHECK(metric(db, "fenceq_http_login_failures_total") == 6 + judged + 1);
  CHECK(metric(db, "fenceq_http_login_throttled_total") >= 2 + refused);
  // Logged, but not a line a guess: the first failure, then at most one line
  // every 10 s.
  const auto lines = count_of(db.d->log(), "failed login(s)");
  CHECK(lines >= 1);
  CHECK(lines <= 2);
}

TEST_CASE("abuse: the dashboard takes Basic credentials as RFC 7617 says: the scheme in any case, "
          "the whole password, NUL bytes refused") {
  Dashboard db;
  auto with = [&](const std::string& header) {
    return db.as("").send("GET", "/api/session", {"Authorization: " + header}).status;
  };
  CHECK(with("basic " + basic("ops:secret")) == 200);
  CHECK(with("BASIC " + basic("ops:secret")) == 200);
  // A C string would end at the NUL and find "secret".
  CHECK(with("Basic " + basic(std::string("ops:secret\0junk", 15))) == 401);
  CHECK(with("Basic " + basic(std::string("ops\0x:secret", 12))) == 401);
  CHECK(with("Basic not*base64") == 401);
  CHECK(with("Bearer " + basic("ops:secret")) == 401);
}

TEST_CASE("abuse: the dashboard answers only to its own host names (DNS rebinding: 421)") {
  Dashboard db({"--http-allowed-hosts", "fenceq.internal,Ops.Example"});
  const std::string port = std::to_string(db.port);
  // Each request names exactly one host (Http::send names 127.0.0.1).
  auto only = [&](const std::string& host) {
    std::string req = "GET /api/session HTTP/1.1\r\nHost: " + host +
                      "\r\nConnection: close\r\nAuthorization: Basic " + basic("ops:secret") +
                      "\r\n\r\n";
    return http_request(db.port, req, 8000ms);
  };
  CHECK(only("127.0.0.1:" + port) == 200);
  CHECK(only("localhost:" + port) == 200);
  CHECK(only("LOCALHOST") == 200);
  CHECK(only("fenceq.internal:" + port) == 200);
  CHECK(only("ops.example") == 200);
  CHECK(only("evil.example:" + port) == 421);
  CHECK(only("127.0.0.1.evil.example") == 421);
  CHECK(only("fenceq.internal.evil") == 421);
  // Scrapes and health checks have no job data: any name.
  CHECK(http_request(db.port, "GET /metrics HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
                     8000ms) == 200);
}

TEST_CASE("abuse: the dashboard's actions read numbers as the wire does, and refuse the rest (400, "
          "nothing applied)") {
  Dashboard db;
  Client c(db.d->endpoint());
  const std::string token = db.csrf();
  auto act = [&](const std::string& query) {
    return db.as().send("POST", "/api/limit?queue=q&" + query, {csrf_header(token)});
  };
  for (const char* bad : {"max_leased=2.9", "rate=0.5", "max_leased=0x10", "rate=1e300",
                          "max_leased=nan", "rate=inf", "max_leased=99999999999999999999",
                          "per=nan", "per=inf", "per=0x10", "rate=+5", "max_leased= 3"}) {
    INFO(bad);
    const auto r = act(bad);
    CHECK(r.status == 400);
    CHECK(r.data()["error"]["code"] == "bad_request");
  }
  auto config = [&]() -> std::optional<fenceq::QueueConfig> {
    for (const auto& q : c.stats().queues) {
      if (q.queue == "q" && q.config) return *q.config;
    }
    return std::nullopt;
  };
  CHECK_FALSE(config().has_value());
  REQUIRE(c.enqueue("in-q", in_queue("q")));
  CHECK(act("max_leased=3&rate=10&per=2.5").status == 200);
  auto cfg = config();
  REQUIRE(cfg);
  CHECK(cfg->max_leased == 3);
  CHECK(cfg->rate == 10);
  CHECK(cfg->per == 2.5);
  for (const char* bad : {"limit=1e3", "limit=0x10", "limit=2.5"}) {
    INFO(bad);
    CHECK(db.as().get(std::string("/api/jobs?") + bad).status == 400);
  }
  CHECK(db.as().get("/api/jobs?limit=1000").status == 200);
}

TEST_CASE("abuse: the dashboard's page runs no inline script or style (CSP 'self' only)") {
  Dashboard db;
  const auto page = db.as().get("/");
  REQUIRE(page.status == 200);
  CHECK(page.head.find("script-src 'self'") != std::string::npos);
  CHECK(page.head.find("unsafe-inline") == std::string::npos);
  CHECK(page.body.find("<script src=\"/dashboard.js\"></script>") != std::string::npos);
  CHECK(page.body.find("<script>") == std::string::npos);
  CHECK(page.body.find("<style") == std::string::npos);
  const auto js = db.as().get("/dashboard.js");
  CHECK(js.status == 200);
  CHECK(js.head.find("Content-Type: text/javascript") != std::string::npos);
  CHECK(js.body.find("function visible(") != std::string::npos);
  CHECK(db.as().get("/dashboard.css").status == 200);
  CHECK(db.as("").get("/dashboard.js").status == 401);
}

TEST_CASE("abuse: client text in the daemon's log cannot forge a line or reach the terminal") {
  Dashboard db;
  Client c(db.d->endpoint());
  const std::string id = "x\n[2026-01-01 00:00:00.000] [fenceqd] [info] forged\x1b[2J\x07";
  REQUIRE(c.enqueue(id));
  const std::string token = db.csrf();
  std::string escaped;
  for (unsigned char ch : id) {
    char b[4];
    std::snprintf(b, sizeof b, "%%%02X", ch);
    escaped += b;
  }
  CHECK(db.as().send("POST", "/api/cancel?id=" + escaped, {csrf_header(token)}).status == 200);
  CHECK(db.as().send("POST", "/api/cancel?id=x", {csrf_header(token), "Origin: http://e\x1b[2Jvil"})
            .status == 403);
  const std::string log = db.d->log();
  CHECK(log.find("dashboard: ops cancel job 'x\\x0a[2026-01-01") != std::string::npos);
  CHECK(log.find("\n[2026-01-01 00:00:00.000] [fenceqd] [info] forged") == std::string::npos);
  CHECK(log.find('\x1b') == std::string::npos);
  CHECK(log.find('\x07') == std::string::npos);
  CHECK(log.find("\\x0a[2026-01-01") != std::string::npos);
}

TEST_CASE("abuse: a flood of /metrics scrapes costs one count a second and does not slow "
          "/healthz or the dashboard", "[sqlite]") {
  TempDir dir;
  const auto users = auth_file(dir, "ops:secret\n");
  std::vector<std::string> args{"--clock", "server", "--http-listen", "127.0.0.1:0",
                                "--http-auth-file", users};
  bulk_store(dir, args, 300000 * scale());
  Daemon d(dir, args);
  const int port = http_port(d);
  REQUIRE(port > 0);
  const Http as_ops{port, "ops:secret"};
  // One /healthz and one dashboard read, timed; -1 when either failed.
  auto probe = [&] {
    const auto t0 = SteadyClock::now();
    const int health =
        http_request(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     10000ms);
    const int session = as_ops.get("/api/session").status;
    UNSCOPED_INFO("healthz " << health << ", session " << session);
    const bool ok = health == 200 && session == 200;
    return ok ? std::chrono::duration<double>(SteadyClock::now() - t0).count() : -1.0;
  };
  auto median_of = [&](int n) {
    std::vector<double> ts;
    int failed = 0;
    for (int i = 0; i < n; ++i) {
      const double t = probe();
      t < 0 ? ++failed : (ts.push_back(t), 0);
      std::this_thread::sleep_for(50ms);
    }
    CHECK(failed == 0);
    std::sort(ts.begin(), ts.end());
    return ts.empty() ? 1e9 : ts[ts.size() / 2];
  };
  const double quiet = median_of(15);
  Client c(d.endpoint());
  const auto before = c.stats().requests;
  std::atomic<bool> stop{false};
  std::atomic<int> scrapes{0};
  std::vector<std::thread> flood;
  for (int i = 0; i < 80; ++i) {
    flood.emplace_back([&] {
      for (int n = 0; n < 100000 && !stop; ++n) {
        if (http_request(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                         10000ms) == 200) {
          ++scrapes;
        }
      }
    });
  }
  // The first scrape counts 300,000 jobs, and every scraper waits for it:
  // seconds under AddressSanitizer on a busy machine. The measured window
  // starts once it is answered, so it begins with a fresh cache whatever
  // that first count cost.
  const auto flood_start = SteadyClock::now();
  while (scrapes == 0 && SteadyClock::now() - flood_start < 120s) {
    std::this_thread::sleep_for(10ms);
  }
  const int first = scrapes;
  const auto t0 = SteadyClock::now();
  const double flooded = median_of(30);
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count() +
                         std::chrono::duration<double>(t0 - flood_start).count();
  const int in_window = scrapes - first;
  stop = true;
  for (auto& t : flood) t.join();
  const auto served = c.stats().requests - before;
  std::cout << "abuse: 80 /metrics scrapers on " << 300000 * scale() << " jobs: first answered after "
            << std::chrono::duration<double>(t0 - flood_start).count() << " s, then " << in_window
            << " scrapes; " << served << " requests reached the serving loop in " << seconds
            << " s; /healthz + dashboard median " << quiet * 1000 << " ms quiet, "
            << flooded * 1000 << " ms flooded" << std::endl;
  REQUIRE(first > 0);
  // A fresh cache answers every scraper at once, many times over.
  CHECK(in_window > 80);
  // Every scrape but about one a second came from the cache: the serving loop
  // saw the probes (two a round: healthz and the session read none), the
  // scrapes of the cache's renewals, and little else.
  CHECK(served <= 30 + 4 * seconds + 10);
  CHECK(flooded < quiet * 10 + 0.05);
}
