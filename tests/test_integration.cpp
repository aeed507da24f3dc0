// The real build/bin/fenceqd on a temporary directory, over real sockets,
// through the C++ client and raw ZeroMQ sockets.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sqlite3.h>

#include <fenceq/client.hpp>
#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "daemon.hpp"
#include "fenceq_protocol/codec.hpp"
#include "vectors.hpp"

using fenceq::Client;
using fenceq::ClientOptions;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using fenceq::test::pack;
using namespace std::chrono_literals;

namespace {

nlohmann::json unpack(const zmq::message_t& m) {
  return nlohmann::json::from_msgpack(std::string(static_cast<const char*>(m.data()), m.size()));
}

// Receives one multipart message within `timeout`; the frames, or empty.
std::vector<zmq::message_t> recv_all(zmq::socket_t& s, std::chrono::milliseconds timeout = 5s) {
  std::vector<zmq::message_t> frames;
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, timeout) == 0) return frames;
  do {
    zmq::message_t f;
    if (!s.recv(f)) break;
    frames.push_back(std::move(f));
  } while (frames.back().more());
  return frames;
}

zmq::socket_t raw_socket(zmq::context_t& ctx, zmq::socket_type type, const std::string& ep) {
  zmq::socket_t s(ctx, type);
  s.set(zmq::sockopt::linger, 0);
  s.connect(ep);
  return s;
}

// FENCEQ_ENDPOINT set (or, with nullopt, unset) and the current folder
// changed, for one scope.
class ScopedEndpointEnv {
 public:
  explicit ScopedEndpointEnv(std::optional<std::string> value,
                             std::filesystem::path cwd = std::filesystem::current_path())
      : cwd_(std::filesystem::current_path()) {
    if (const char* old = std::getenv("FENCEQ_ENDPOINT")) old_ = old;
    if (value) {
      ::setenv("FENCEQ_ENDPOINT", value->c_str(), 1);
    } else {
      ::unsetenv("FENCEQ_ENDPOINT");
    }
    std::filesystem::current_path(cwd);
  }
  ~ScopedEndpointEnv() {
    if (old_) {
      ::setenv("FENCEQ_ENDPOINT", old_->c_str(), 1);
    } else {
      ::unsetenv("FENCEQ_ENDPOINT");
    }
    std::filesystem::current_path(cwd_);
  }
  ScopedEndpointEnv(const ScopedEndpointEnv&) = delete;
  ScopedEndpointEnv& operator=(const ScopedEndpointEnv&) = delete;

 private:
  std::filesystem::path cwd_;
  std::optional<std::string> old_;
};

// Whether this host's service socket is there, as resolve_endpoint judges it
// (FENCEQ_ENDPOINT aside): step 3 would then take it over the development
// default, and tests create no files under /run.
bool service_socket_there() {
  ScopedEndpointEnv none(std::nullopt);
  return fenceq::resolve_endpoint().source == fenceq::EndpointSource::service;
}

// The message of the fenceq::Error a ping throws (FAILs when it answers).
std::string ping_error(Client& c) {
  try {
    c.ping();
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "unreachable");
    return e.what();
  }
  FAIL("expected unreachable");
  return "";
}

}  // namespace

TEST_CASE("C3 story: a stalled worker's late complete is refused, the new owner's result kept") {
  TempDir dir;
  Daemon d(dir);
  Client a(d.endpoint()), b(d.endpoint());
  REQUIRE(a.enqueue("report-9"));
  auto fa = a.claim("report-9", "worker-a", 20, 1000.0);
  REQUIRE(fa == 1);
  CHECK_FALSE(b.claim("report-9", "worker-b", 20, 1019.0));  // A's lease still runs
  // A stalls past its lease; B takes the job over.
  auto fb = b.claim("report-9", "worker-b", 20, 1021.0);
  REQUIRE(fb == 2);
  CHECK(b.complete("report-9", "worker-b", *fb, "B's result", 1025.0));
  // A wakes up and tries to write: every write of the superseded lease fails.
  CHECK_FALSE(a.renew("report-9", "worker-a", *fa, 20, 1026.0));
  CHECK_FALSE(a.complete("report-9", "worker-a", *fa, "A's late result", 1026.0));
  CHECK_FALSE(a.release("report-9", "worker-a", *fa));
  auto st = a.state("report-9");
  REQUIRE(st);
  CHECK(st->result == "B's result");
  CHECK(st->owner == "worker-b");
  CHECK(st->fence == 2);
  CHECK(st->done);
}

TEST_CASE("C3.7 16 threads claim one new job at once: exactly one gets a fence (x25 jobs)") {
  TempDir dir;
  Daemon d(dir);
  constexpr int kThreads = 16, kJobs = 25;
  Client setup(d.endpoint());
  for (int j = 0; j < kJobs; ++j) REQUIRE(setup.enqueue("race-" + std::to_string(j)));
  std::vector<std::vector<std::optional<std::int64_t>>> got(
      kJobs, std::vector<std::optional<std::int64_t>>(kThreads));
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Client c(d.endpoint());
      c.ping();  // connected before the race starts
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int j = 0; j < kJobs; ++j) {
        got[j][t] = c.claim("race-" + std::to_string(j), "t" + std::to_string(t), 60, 5.0);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int j = 0; j < kJobs; ++j) {
    INFO("job " << j);
    int winners = 0;
    std::string winner;
    for (int t = 0; t < kThreads; ++t) {
      if (got[j][t]) {
        ++winners;
        CHECK(*got[j][t] == 1);
        winner = "t" + std::to_string(t);
      }
    }
    CHECK(winners == 1);
    CHECK(setup.state("race-" + std::to_string(j))->owner == winner);
  }
}

TEST_CASE("protocol: REQ, DEALER with the empty frame and bare DEALER envelopes all work") {
  TempDir dir;
  Daemon d(dir);
  zmq::context_t ctx;
  const std::string req = pack({{"op", "ping"}, {"rid", "r"}});

  auto r = raw_socket(ctx, zmq::socket_type::req, d.endpoint());
  r.send(zmq::buffer(req));
  auto frames = recv_all(r);
  REQUIRE(frames.size() == 1);  // REQ strips the delimiter
  CHECK(unpack(frames[0])["result"]["protocol"] == 1);
  CHECK(unpack(frames[0])["rid"] == "r");

  auto dealer = raw_socket(ctx, zmq::socket_type::dealer, d.endpoint());
  dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(req));
  frames = recv_all(dealer);
  REQUIRE(frames.size() == 2);
  CHECK(frames[0].size() == 0);
  CHECK(unpack(frames[1])["ok"] == true);

  auto bare = raw_socket(ctx, zmq::socket_type::dealer, d.endpoint());
  bare.send(zmq::buffer(req));
  frames = recv_all(bare);
  REQUIRE(frames.size() == 1);
  CHECK(unpack(frames[0])["result"]["clock"] == "client");

  // Extra envelope frames (a proxy hop) come back unchanged.
  bare.send(zmq::str_buffer("hop-1"), zmq::send_flags::sndmore);
  bare.send(zmq::message_t(), zmq::send_flags::sndmore);
  bare.send(zmq::buffer(req));
  frames = recv_all(bare);
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].to_string() == "hop-1");
  CHECK(frames[1].size() == 0);
  CHECK(unpack(frames[2])["ok"] == true);
}

TEST_CASE("protocol: 200 pipelined requests on one DEALER are all answered, matched by rid") {
  TempDir dir;
  Daemon d(dir);
  zmq::context_t ctx;
  auto s = raw_socket(ctx, zmq::socket_type::dealer, d.endpoint());
  // rid i: enqueue p<i/2> for even i, state p<i/2> for odd i: each odd reply
  // must show the job its own even request created.
  for (int i = 0; i < 200; ++i) {
    std::string id = "p" + std::to_string(i / 2);
    s.send(zmq::message_t(), zmq::send_flags::sndmore);
    s.send(zmq::buffer(pack({{"op", i % 2 ? "state" : "enqueue"},
                             {"id", id},
                             {"rid", i}})));
  }
  std::set<int> seen;
  for (int n = 0; n < 200; ++n) {
    auto frames = recv_all(s);
    REQUIRE(frames.size() == 2);
    auto rep = unpack(frames[1]);
    int rid = rep["rid"];
    CHECK(seen.insert(rid).second);
    if (rid % 2 == 0) {
      CHECK(rep["result"] == true);
    } else {
      CHECK(rep["result"]["id"] == "p" + std::to_string(rid / 2));
    }
  }
  CHECK(seen.size() == 200);
}

TEST_CASE("C1.4 kill -9 under load, restart: every acknowledged write is there, fences go on") {
  TempDir dir;
  Daemon d(dir, {"--clock", "client", "--sync", "full"});
  constexpr int kWorkers = 6;
  struct Acked {
    std::map<std::string, std::int64_t> claimed;    // job -> acknowledged fence
    std::map<std::string, std::string> completed;   // job -> acknowledged result
  };
  std::vector<Acked> acked(kWorkers);
  std::atomic<bool> stop{false};
  std::atomic<int> completes{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      Client c(d.endpoint(), ClientOptions{500ms});
      for (int i = 0; i < 100000 && !stop.load(); ++i) {
        std::string id = "k" + std::to_string(w) + "-" + std::to_string(i);
        try {
          c.enqueue(id);
          auto f = c.claim(id, "w" + std::to_string(w), 100, 1.0);
          if (!f) continue;
          acked[w].claimed[id] = *f;
          if (i % 3 == 0) continue;  // leave some leased, not completed
          std::string result = "r" + std::to_string(i);
          if (c.complete(id, "w" + std::to_string(w), *f, result, 2.0)) {
            acked[w].completed[id] = result;
            completes.fetch_add(1);
          }
        } catch (const fenceq::Error&) {
          return;  // the daemon died: whatever was not answered may or may not have happened
        }
      }
    });
  }
  // Under load: at least 700 ms, and until 60 completes were acknowledged
  // (a busy machine made fewer than 50 in 700 ms).
  std::this_thread::sleep_for(700ms);
  for (auto until = std::chrono::steady_clock::now() + 30s;
       completes.load() < 60 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(20ms);
  }
  CHECK(d.stop(SIGKILL) == 128 + SIGKILL);
  stop = true;
  for (auto& t : threads) t.join();

  d.restart();
  Client c(d.endpoint());
  std::size_t n_claimed = 0, n_completed = 0;
  for (const auto& a : acked) {
    for (const auto& [id, result] : a.completed) {
      auto st = c.state(id);
      REQUIRE(st);
      CHECK(st->done);
      CHECK(st->result == result);
      ++n_completed;
    }
    for (const auto& [id, fence] : a.claimed) {
      auto st = c.state(id);
      REQUIRE(st);
      CHECK(st->fence >= fence);
      if (!st->done) {
        // The lease (until 101) ends; the next claim continues the fence.
        CHECK(c.claim(id, "after", 5, 500.0) == st->fence + 1);
      }
      ++n_claimed;
    }
  }
  CHECK(n_completed > 50);  // the load actually ran before the kill
  INFO("claimed " << n_claimed << ", completed " << n_completed);
}

TEST_CASE("C1.3 a second daemon on the same database exits non-zero and the first serves on",
          "[sqlite]") {
  TempDir dir;
  Daemon d(dir);
  auto r = fenceq::test::run({fenceq::test::fenceqd_path(), "--db", d.db(), "--listen",
                              "ipc://" + dir.file("other.sock"), "--clock", "client"});
  CHECK(r.status != 0);
  CHECK(r.out.find("already owned by another fenceqd") != std::string::npos);
  // Same endpoint too: the loser must not take the first daemon's socket away.
  r = fenceq::test::run({fenceq::test::fenceqd_path(), "--db", d.db(), "--listen", d.endpoint()});
  CHECK(r.status != 0);
  Client c(d.endpoint(), ClientOptions{2s});
  CHECK(c.ping().clock == "client");
  CHECK(c.enqueue("still-here"));
}

TEST_CASE("C2.3 server clock: `now` is refused, leases come from a non-decreasing clock") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  REQUIRE(c.enqueue("sc"));
  try {
    c.claim("sc", "o", 10, 123.0);
    FAIL("server clock accepted now");
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "invalid_argument");
  }
  double wall = std::chrono::duration<double>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  REQUIRE(c.claim("sc", "o", 10) == 1);
  auto st = c.state("sc");
  CHECK(st->until >= wall + 10 - 1);
  CHECK(st->until <= wall + 10 + 60);
}

TEST_CASE("C2.3 server clock: the high-water mark persists across a restart", "[sqlite]") {
  TempDir dir;
  const double future = 4.0e9;
  {
    Daemon d(dir, {"--clock", "server"});
    Client c(d.endpoint());
    c.enqueue("hw");
    c.enqueue("first");
    REQUIRE(c.claim("first", "o", 1) == 1);  // uses, and so persists, the clock
    REQUIRE(d.stop(SIGTERM) == 0);
  }
  // Pretend an earlier run saw a clock far ahead of this machine's.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(dir.file("fenceq.db").c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "UPDATE fenceq_meta SET value = 4.0e9 WHERE key = 'clock_high_water'",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  CHECK(sqlite3_changes(db) == 1);  // the first run persisted its clock
  sqlite3_close(db);
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  REQUIRE(c.claim("hw", "o", 7) == 1);
  CHECK(c.state("hw")->until >= future + 7);
}

TEST_CASE("SIGTERM: the daemon answers what it took, exits 0 and logs one stop line") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  for (int i = 0; i < 50; ++i) c.enqueue("t" + std::to_string(i));
  CHECK(d.stop(SIGTERM) == 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("fenceqd.sock")));  // no stale socket file
  auto log = d.log();
  CHECK(log.find("started") != std::string::npos);
  CHECK(log.find("stopped (signal)") != std::string::npos);
  // Nothing per request at info level.
  CHECK(std::count(log.begin(), log.end(), '\n') == 2);
  d.restart();
  CHECK(Client(d.endpoint()).state("t49"));
}

TEST_CASE("C4.1 garbage from one client: coded errors, an oversized frame drops only it") {
  TempDir dir;
  Daemon d(dir, {"--clock", "client", "--max-message", "4096"});
  zmq::context_t ctx;
  auto bad = raw_socket(ctx, zmq::socket_type::dealer, d.endpoint());
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string junk(rng() % 200, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    bad.send(zmq::buffer(junk));
  }
  for (int i = 0; i < 300; ++i) {
    auto frames = recv_all(bad);
    REQUIRE(frames.size() == 1);
    auto rep = unpack(frames[0]);
    CHECK(rep["ok"] == false);
    CHECK_FALSE(rep["error"]["code"].get<std::string>().empty());
  }
  // A frame over --max-message: the transport drops the connection, no reply.
  auto big = raw_socket(ctx, zmq::socket_type::dealer, d.endpoint());
  big.send(zmq::buffer(pack({{"op", "enqueue"}, {"id", std::string(8000, 'x')}})));
  CHECK(recv_all(big, 500ms).empty());
  // Everyone else is served, and nothing was created.
  Client c(d.endpoint());
  CHECK(c.ping().protocol == 1);
  CHECK_FALSE(c.state(std::string(8000, 'x').substr(0, 1000)));
  CHECK(d.running());
}

TEST_CASE("C4.1 describe: the C++ client reads every op the daemon serves and its fields") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  CHECK(c.ping().ops.empty());  // plain ping: no list
  auto info = c.describe();
  CHECK(info.protocol == 1);
  CHECK(info.version == std::string(fenceq::protocol::kVersion));
  REQUIRE(info.ops.size() == fenceq::protocol::kOpCount);
  for (const auto& op : fenceq::protocol::kOps) {
    CHECK(info.ops.count(std::string(op.name)) == 1);
  }
  const auto& claim = info.ops.at("claim");
  CHECK(claim == std::vector<std::string>{"id", "owner", "ttl"});
  const auto& many = info.ops.at("enqueue_many");
  CHECK(std::find(many.begin(), many.end(), "jobs[].after") != many.end());
  const auto& next = info.ops.at("complete_many");
  CHECK(std::find(next.begin(), next.end(), "next.queue") != next.end());
}

TEST_CASE("vectors: every suite against the real daemon, reply bytes exact where given") {
  for (const auto& suite : fenceq::test::load_vector_suites()) {
    TempDir dir;
    Daemon d(dir, {"--clock", suite.clock});
    zmq::context_t ctx;
    auto s = raw_socket(ctx, zmq::socket_type::dealer, d.endpoint());
    for (const auto& step : suite.steps) {
      INFO(suite.name << " / " << step.name);
      s.send(zmq::message_t(), zmq::send_flags::sndmore);
      s.send(zmq::buffer(step.request));
      auto frames = recv_all(s);
      REQUIRE(frames.size() == 2);
      CHECK(fenceq::test::vector_mismatch(step, frames[1].to_string()) == "");
    }
  }
}

TEST_CASE("client: a timed-out call's late reply is never taken for the next call's reply") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint(), ClientOptions{300ms});
  REQUIRE(c.enqueue("late"));
  d.pause();  // the daemon stalls with the claim queued
  try {
    c.claim("late", "me", 50, 1.0);
    FAIL("expected a timeout");
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "timeout");
  }
  d.resume();
  // The claim's reply (fence 1) arrives late; the next call must get its own.
  auto st = c.state("late");
  REQUIRE(st);
  CHECK(st->fence == 1);  // the timed-out claim did happen
  CHECK_FALSE(c.renew("late", "me", 1, 5, 100.0));  // a bool, not the stale int reply
  CHECK(c.ping().protocol == 1);
}

TEST_CASE("client: an ipc:// socket file that does not exist fails at once with unreachable") {
  TempDir dir;
  Client c("ipc://" + dir.file("fenceqd.sock"), ClientOptions{5s});
  auto t0 = std::chrono::steady_clock::now();
  try {
    c.ping();
    FAIL("expected unreachable");
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "unreachable");
    CHECK(std::string(e.what()).find("there is no socket at " + dir.file("fenceqd.sock")) !=
          std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  // The daemon comes up: the same Client works, and nothing was queued.
  Daemon d(dir);
  REQUIRE(d.endpoint() == "ipc://" + dir.file("fenceqd.sock"));
  CHECK(c.ping().protocol == 1);
  CHECK_FALSE(c.state("x"));
}

TEST_CASE("client: the endpoint order is given then FENCEQ_ENDPOINT then the service's socket "
          "then the development default") {
  using fenceq::EndpointSource;
  using fenceq::resolve_endpoint;
  const auto check = [](const fenceq::ResolvedEndpoint& r, const std::string& endpoint,
                        EndpointSource source) {
    CHECK(r.endpoint == endpoint);
    CHECK(r.source == source);
  };
  for (bool service : {false, true}) {
    check(resolve_endpoint("ipc:///a.sock", "ipc:///env.sock", service), "ipc:///a.sock",
          EndpointSource::given);
    check(resolve_endpoint("ipc:///a.sock", nullptr, service), "ipc:///a.sock",
          EndpointSource::given);
    check(resolve_endpoint("", "ipc:///env.sock", service), "ipc:///env.sock",
          EndpointSource::environment);
  }
  check(resolve_endpoint("", nullptr, true), "ipc:///run/fenceq/fenceqd.sock",
        EndpointSource::service);
  check(resolve_endpoint("", "", true), "ipc:///run/fenceq/fenceqd.sock", EndpointSource::service);
  check(resolve_endpoint("", nullptr, false), "ipc://var/fenceqd.sock",
        EndpointSource::development);
  check(resolve_endpoint("", "", false), "ipc://var/fenceqd.sock", EndpointSource::development);
  // The packaged service's socket (systemd/fenceqd.conf) is the one step 3 looks for.
  std::ifstream conf(fenceq::test::source_dir() + "/systemd/fenceqd.conf");
  std::stringstream text;
  text << conf.rdbuf();
  CHECK(text.str().find(std::string("\nlisten = ") + fenceq::kServiceEndpoint + "\n") !=
        std::string::npos);
}

TEST_CASE("client: with no endpoint given a Client connects to FENCEQ_ENDPOINT") {
  TempDir dir, elsewhere;
  Daemon d(dir);
  ScopedEndpointEnv env(d.endpoint(), elsewhere.path());
  Client c;
  CHECK(c.endpoint() == d.endpoint());
  CHECK(c.endpoint_source() == fenceq::EndpointSource::environment);
  REQUIRE(c.enqueue("from-env"));
  CHECK(Client(d.endpoint()).state("from-env"));
}

TEST_CASE("client: an endpoint given to the constructor beats FENCEQ_ENDPOINT") {
  TempDir dir_env, dir_given;
  Daemon by_env(dir_env), given(dir_given);
  ScopedEndpointEnv env(by_env.endpoint());
  Client c(given.endpoint());
  CHECK(c.endpoint() == given.endpoint());
  CHECK(c.endpoint_source() == fenceq::EndpointSource::given);
  REQUIRE(c.enqueue("given-job"));
  CHECK(Client(given.endpoint()).state("given-job"));
  CHECK_FALSE(Client(by_env.endpoint()).state("given-job"));
}

TEST_CASE("client: with neither the development default ipc://var/fenceqd.sock is used") {
  if (service_socket_there()) {
    WARN("the fenceqd service's socket exists on this host: step 4 cannot be reached");
    return;
  }
  TempDir dir, repo;
  Daemon d(dir);
  // A folder laid out as `make run` leaves the repository: var/fenceqd.sock.
  std::filesystem::create_directory(repo.path() / "var");
  std::filesystem::create_symlink(dir.file("fenceqd.sock"), repo.path() / "var" / "fenceqd.sock");
  ScopedEndpointEnv env(std::nullopt, repo.path());
  Client c;
  CHECK(c.endpoint() == "ipc://var/fenceqd.sock");
  CHECK(c.endpoint_source() == fenceq::EndpointSource::development);
  CHECK(fenceq::default_endpoint() == "ipc://var/fenceqd.sock");
  REQUIRE(c.enqueue("dev-job"));
  CHECK(Client(d.endpoint()).state("dev-job"));
  ScopedEndpointEnv empty_env("", repo.path());  // set but empty: not a choice
  CHECK(Client().endpoint_source() == fenceq::EndpointSource::development);
}

TEST_CASE("client: nothing served says which step chose the endpoint and to pass it to the "
          "constructor or set FENCEQ_ENDPOINT") {
  if (service_socket_there()) {
    WARN("the fenceqd service's socket exists on this host: step 4 cannot be reached");
    return;
  }
  TempDir dir;
  const std::string choose =
      "; to use another endpoint, pass it to fenceq::Client's constructor or set FENCEQ_ENDPOINT";
  {
    ScopedEndpointEnv env(std::nullopt, dir.path());
    Client c(std::string{}, ClientOptions{5s});
    const auto what = ping_error(c);
    CHECK(what.find("nothing serves ipc://var/fenceqd.sock (the development default): there is "
                    "no socket at " + dir.file("var/fenceqd.sock")) != std::string::npos);
    CHECK(what.find(choose) != std::string::npos);
  }
  {
    ScopedEndpointEnv env("ipc://" + dir.file("env.sock"));
    Client c;
    const auto what = ping_error(c);
    CHECK(what.find("nothing serves ipc://" + dir.file("env.sock") + " (from FENCEQ_ENDPOINT)") !=
          std::string::npos);
    CHECK(what.find(choose) != std::string::npos);
  }
  {
    ScopedEndpointEnv env("ipc://" + dir.file("env.sock"));
    Client c("ipc://" + dir.file("given.sock"));
    const auto what = ping_error(c);
    CHECK(what.find("nothing serves ipc://" + dir.file("given.sock") + " (given explicitly)") !=
          std::string::npos);
    CHECK(what.find("; to use another endpoint, pass it to fenceq::Client's constructor "
                    "(FENCEQ_ENDPOINT is read only when none is given)") != std::string::npos);
  }
  {
    // A program with its own way to choose says it.
    ClientOptions options;
    options.choose_endpoint = "set endpoint= in app.conf";
    Client c("ipc://" + dir.file("given.sock"), options);
    CHECK(ping_error(c).find("to use another endpoint, set endpoint= in app.conf") !=
          std::string::npos);
  }
}

TEST_CASE("client: a socket file nobody accepts on times out with code timeout") {
  TempDir dir;
  Daemon d(dir);
  d.kill9();  // its socket file stays, refusing connections
  Client c(d.endpoint(), ClientOptions{200ms});
  auto t0 = std::chrono::steady_clock::now();
  try {
    c.ping();
    FAIL("expected a timeout");
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "timeout");
  }
  CHECK(std::chrono::steady_clock::now() - t0 >= 200ms);
}

TEST_CASE("client: once answered, a Client waits for a restarting daemon's socket") {
  TempDir dir;
  Daemon d(dir);
  // The wait is what is checked, not its length: on PostgreSQL a start
  // makes the schema's functions again, and beside a loaded ctest run (a
  // clean clone's, 2026-12-07, with the three-sidecar history run beside
  // it) the restart took more than the 5 s this allowed.
  Client c(d.endpoint(), ClientOptions{20s});
  REQUIRE(c.enqueue("before"));
  d.stop(SIGTERM);
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    d.restart();
  });
  CHECK(c.enqueue("during"));  // queued until the daemon is back, then applied
  later.join();
  CHECK(c.state("during"));
}

TEST_CASE("client: one Client used by two threads at once fails loudly with misuse") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint(), ClientOptions{2s});
  c.enqueue("shared");
  d.pause();  // hold the first call in flight
  std::thread first([&] {
    try {
      c.state("shared");
    } catch (const fenceq::Error&) {
    }
  });
  std::this_thread::sleep_for(200ms);
  try {
    c.state("shared");
    FAIL("concurrent use was not detected");
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "misuse");
  }
  d.resume();
  first.join();
}

TEST_CASE("client: a malformed endpoint is invalid_argument, as in every client (Client errors)") {
  try {
    Client c("not-an-endpoint");
    FAIL("expected invalid_argument");
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "invalid_argument");
    CHECK(std::string(e.what()).find("not-an-endpoint") != std::string::npos);
  }
}

TEST_CASE("SIGTERM with requests queued: each is answered unavailable and none is applied") {
  TempDir dir;
  Daemon d(dir);
  zmq::context_t ctx;
  auto s = raw_socket(ctx, zmq::socket_type::dealer, d.endpoint());
  // The connection is up (a ping answered) before the daemon stops, so the
  // requests below reach it as soon as it runs again.
  s.send(zmq::buffer(pack({{"op", "ping"}, {"rid", -1}})));
  REQUIRE(recv_all(s).size() == 1);
  d.pause();  // stopped for sure: nothing sent from now on is served before SIGTERM
  for (int i = 0; i < 20; ++i) {
    s.send(zmq::buffer(pack({{"op", "enqueue"}, {"id", "q" + std::to_string(i)}, {"rid", i}})));
  }
  std::this_thread::sleep_for(200ms);  // the requests reach the daemon's queue
  ::kill(d.pid(), SIGTERM);
  d.resume();
  std::set<int> rids;
  for (int i = 0; i < 20; ++i) {
    auto frames = recv_all(s);
    REQUIRE(frames.size() == 1);
    auto rep = unpack(frames[0]);
    CHECK(rep["error"]["code"] == "unavailable");
    rids.insert(rep["rid"].get<int>());
  }
  CHECK(rids.size() == 20);
  CHECK(d.stop(SIGTERM) == 0);
  d.restart();
  Client c(d.endpoint());
  for (int i = 0; i < 20; ++i) CHECK_FALSE(c.state("q" + std::to_string(i)));
}

TEST_CASE("C4.1 U+0000 in a string: SQLite stores it, PostgreSQL refuses that request alone "
          "with invalid_argument") {
  TempDir dir;
  Daemon d(dir);
  zmq::context_t ctx;
  auto s = raw_socket(ctx, zmq::socket_type::dealer, d.endpoint());
  const std::string nul_id("a\0b", 3);
  // Back to back, so they usually share a batch: one request's refusal must
  // not touch the other's.
  s.send(zmq::buffer(pack({{"op", "enqueue"}, {"id", nul_id}, {"rid", 1}})));
  s.send(zmq::buffer(pack({{"op", "enqueue"}, {"id", "plain"}, {"rid", 2}})));
  std::map<int, nlohmann::json> replies;
  for (int i = 0; i < 2; ++i) {
    auto frames = recv_all(s);
    REQUIRE(frames.size() == 1);
    auto rep = unpack(frames[0]);
    replies[rep["rid"].get<int>()] = rep;
  }
  CHECK(replies[2]["ok"] == true);
  CHECK(replies[2]["result"] == true);
  Client c(d.endpoint());
  if (fenceq::test::pg_mode()) {
    CHECK(replies[1]["ok"] == false);
    CHECK(replies[1]["error"]["code"] == "invalid_argument");
    CHECK(replies[1]["error"]["message"].get<std::string>().find("U+0000") != std::string::npos);
    CHECK_FALSE(c.state(nul_id));
    CHECK_FALSE(c.claim(nul_id, "o", 10, 1.0));  // no such job: nil, not an error
  } else {
    CHECK(replies[1]["result"] == true);
    CHECK(c.claim(nul_id, "o", 10, 1.0) == 1);
  }
  CHECK(c.state("plain"));
}

TEST_CASE("C3.21 --outbox: a committed row of the application's SQLite outbox becomes a job and "
          "stats reports the outbox through the C++ client",
          "[sqlite][outbox]") {
  TempDir dir;
  const auto app = dir.file("app.db");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(app.c_str(), &db) == SQLITE_OK);
  // The application's own migration: the schema fenceqd prints.
  const auto schema = fenceq::test::run({fenceq::test::fenceqd_path(), "--outbox-schema", "sqlite"});
  REQUIRE(schema.status == 0);
  REQUIRE(sqlite3_exec(db, schema.out.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  Daemon d(dir, {"--clock", "server", "--outbox", app, "--outbox-poll", "0.01"});
  Client c(d.endpoint());
  REQUIRE(c.stats().outbox);
  CHECK(c.stats().outbox->drained == 0);
  REQUIRE(sqlite3_exec(db,
                       "BEGIN; INSERT INTO fenceq_outbox(id, queue, payload, priority) "
                       "VALUES ('ob-1', 'mail', 'hello', 4); COMMIT; BEGIN; INSERT INTO "
                       "fenceq_outbox(id) VALUES ('ob-rolled'); ROLLBACK;",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!c.state("ob-1") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  auto job = c.claim_next("mail", "w", 30);
  REQUIRE(job);
  CHECK(job->id == "ob-1");
  REQUIRE(job->payload);
  CHECK(job->payload->bytes == "hello");
  CHECK_FALSE(c.state("ob-rolled"));
  const auto st = c.stats();
  REQUIRE(st.outbox);
  CHECK(st.outbox->drained == 1);
  CHECK(st.outbox->rejected == 0);
  CHECK(st.outbox->high_water >= 1);
  sqlite3_close(db);
}
