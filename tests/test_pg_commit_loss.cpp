// A sidecar whose COMMIT's answer is lost (issue 55): PostgreSQL committed
// the batch, and the connection broke before its answer reached fenceqd. A
// proxy of the test's own sits between fenceqd and ctest's cluster (a Unix
// socket each side) and, when armed, drops the whole answer of the next
// pipeline that holds a BEGIN and a COMMIT (everything the server sent for
// it, up to its ReadyForQuery), then closes both sides: the server has
// committed, fenceqd saw nothing. Every reply must then be true to the state
// read afterwards, or `outcome_unknown`; never the answer of a second run of
// the batch (a claim `nil` for the job it leased, a complete `false` for the
// job it finished), and never `unavailable` ("nothing applied") for a batch
// that was applied. A connection that died while idle (nothing sent on it)
// is still reconnected without a wrong word: the requests are served.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "pg.hpp"
#include "storage/pg/pg_store.hpp"
#include "probe.hpp"

using fenceq::Client;
using fenceq::ClientOptions;
using fenceq::daemon::Call;
using fenceq::daemon::CallResult;
using fenceq::daemon::ClaimParams;
using fenceq::daemon::NewJob;
using fenceq::daemon::PgStore;
using fenceq::daemon::StoreError;
using fenceq::test::Daemon;
using fenceq::test::PgSchema;
using fenceq::test::TempDir;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// The cluster's port (scripts/pg_cluster.sh): its socket is
// <socket dir>/.s.PGSQL.5432, and the proxy's <its dir>/.s.PGSQL.5432, so
// that only the URI's host changes.
constexpr int kPort = 5432;

int listen_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (fd < 0 || path.size() >= sizeof a.sun_path) throw std::runtime_error("proxy: socket " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0) {
    ::close(fd);
    throw std::runtime_error("proxy: cannot listen on " + path + ": " + std::strerror(errno));
  }
  return fd;
}

int connect_unix_path(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), std::min(path.size() + 1, sizeof a.sun_path - 1));
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

bool send_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// Forwards every byte from fenceqd to PostgreSQL as it comes; PostgreSQL's
// messages (a type byte, then a 4-byte big-endian length that counts
// itself; on a Unix socket libpq sends no SSL or GSS request, so the server
// speaks only such messages from its first byte) are held per answer, up to
// its ReadyForQuery ('Z'), and then forwarded whole, or dropped when armed
// and the answer holds the CommandComplete of a BEGIN and of a COMMIT.
// Between answers, notifications, notices and parameter statuses go through
// at once (a LISTENing session's wake-ups are not held back).
class CommitDropProxy {
 public:
  CommitDropProxy(const std::string& dir, const std::string& upstream)
      : dir_(dir), upstream_(upstream) {
    listener_ = listen_unix(dir_ + "/.s.PGSQL." + std::to_string(kPort));
    if (::pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error("proxy: pipe");
    thread_ = std::thread([this] { loop(); });
  }
  ~CommitDropProxy() {
    stop_ = true;
    poke();
    thread_.join();
    for (auto& c : conns_) close_pair(c);
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  CommitDropProxy(const CommitDropProxy&) = delete;
  CommitDropProxy& operator=(const CommitDropProxy&) = delete;

  // Drops the next answer holding a BEGIN and a COMMIT. `refuse_after`: from
  // then on, new connections are closed at once, until refuse(false).
  void arm(bool refuse_after = false) {
    refuse_after_ = refuse_after;
    armed_ = true;
  }
  void refuse(bool on) { refusing_ = on; }
  bool armed() const { return armed_; }
  int drops() const { return drops_; }
  int accepted() const { return accepted_; }
  // Closes every connection now, both sides, as a server's idle timeout or
  // a broken network would: the sessions end with nothing said.
  void cut_all() {
    std::unique_lock lock(m_);
    cut_requested_ = true;
    poke();
    cv_.wait(lock, [&] { return !cut_requested_; });
  }

 private:
  struct Pair {
    int client = -1, server = -1;
    std::string pending;  // the server's bytes not yet a whole message
    std::string answer;   // the server's whole messages of the answer under way
    bool begin = false, commit = false;
  };

  void poke() {
    char b = 1;
    (void)!::write(wake_[1], &b, 1);
  }

  static void close_pair(Pair& p) {
    if (p.client >= 0) ::close(p.client);
    if (p.server >= 0) ::close(p.server);
    p.client = p.server = -1;
  }

  // The server's new bytes on p: whole messages are held or forwarded.
  // False when the pair is to be closed.
  bool from_server(Pair& p) {
    while (p.pending.size() >= 5) {
      std::uint32_t be;
      std::memcpy(&be, p.pending.data() + 1, 4);
      const std::size_t len = 1 + ntohl(be);
      if (p.pending.size() < len) break;
      std::string msg = p.pending.substr(0, len);
      p.pending.erase(0, len);
      const char type = msg[0];
      if (p.answer.empty() && (type == 'A' || type == 'N' || type == 'S')) {
        if (!send_all(p.client, msg.data(), msg.size())) return false;
        continue;
      }
      p.answer += msg;
      if (type == 'C') {
        const std::string tag(msg.c_str() + 5);
        p.begin = p.begin || tag == "BEGIN";
        p.commit = p.commit || tag == "COMMIT";
      }
      if (type != 'Z') continue;
      if (armed_ && p.begin && p.commit) {
        // PostgreSQL committed; fenceqd hears nothing of it.
        if (refuse_after_) refusing_ = true;
        armed_ = false;
        ++drops_;
        return false;
      }
      const bool sent = send_all(p.client, p.answer.data(), p.answer.size());
      p.answer.clear();
      p.begin = p.commit = false;
      if (!sent) return false;
    }
    return true;
  }

  void loop() {
    std::vector<pollfd> fds;
    char buf[65536];
    while (!stop_) {
      {
        std::lock_guard lock(m_);
        if (cut_requested_) {
          for (auto& c : conns_) close_pair(c);
          conns_.clear();
          cut_requested_ = false;
          cv_.notify_all();
        }
      }
      fds.clear();
      fds.push_back({wake_[0], POLLIN, 0});
      fds.push_back({listener_, POLLIN, 0});
      for (auto& c : conns_) {
        fds.push_back({c.client, POLLIN, 0});
        fds.push_back({c.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 1000) <= 0) continue;
      if (fds[0].revents) {
        char drain[64];
        (void)!::read(wake_[0], drain, sizeof drain);
      }
      if (fds[1].revents & POLLIN) {
        int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client >= 0) {
          ++accepted_;
          int server = refusing_ ? -1 : connect_unix_path(upstream_);
          if (server < 0) {
            ::close(client);
          } else {
            Pair p;
            p.client = client;
            p.server = server;
            conns_.push_back(std::move(p));
          }
        }
      }
      std::size_t k = 2;
      for (auto it = conns_.begin(); it != conns_.end(); k += 2) {
        Pair& p = *it;
        bool keep = true;
        if (k < fds.size() && fds[k].fd == p.client && fds[k].revents) {
          ssize_t n = ::recv(p.client, buf, sizeof buf, 0);
          keep = n > 0 && send_all(p.server, buf, static_cast<std::size_t>(n));
        }
        if (keep && k + 1 < fds.size() && fds[k + 1].fd == p.server && fds[k + 1].revents) {
          ssize_t n = ::recv(p.server, buf, sizeof buf, 0);
          if (n > 0) {
            p.pending.append(buf, static_cast<std::size_t>(n));
            keep = from_server(p);
          } else {
            // The server closed: what it said last (a FATAL) goes through.
            p.answer += p.pending;
            send_all(p.client, p.answer.data(), p.answer.size());
            keep = false;
          }
        }
        if (keep) {
          ++it;
        } else {
          close_pair(p);
          it = conns_.erase(it);
        }
      }
    }
  }

  std::string dir_, upstream_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::list<Pair> conns_;  // the proxy's thread's alone
  std::atomic<bool> stop_{false}, armed_{false}, refuse_after_{false}, refusing_{false};
  std::atomic<int> drops_{0}, accepted_{0};
  std::mutex m_;
  std::condition_variable cv_;
  bool cut_requested_ = false;
  std::thread thread_;
};

// `uri` with its host (a socket directory) replaced by `dir`.
std::string rehost(const std::string& uri, const std::string& dir) {
  const auto q = uri.find('?');
  auto at = uri.find("host=", q);
  if (q == std::string::npos || at == std::string::npos) {
    throw std::runtime_error("the test cluster's URI names no host: " + uri);
  }
  at += 5;
  const auto end = uri.find('&', at);
  return uri.substr(0, at) + dir + (end == std::string::npos ? "" : uri.substr(end));
}

// One fenceqd on a fresh schema, connected to PostgreSQL through the proxy
// only, client clock.
struct Rig {
  Rig()
      : proxy(dir.path().string(),
              fenceq::test::pg_socket_dir() + "/.s.PGSQL." + std::to_string(kPort)),
        app("fq_" + schema.name()),
        d(dir, {"--clock", "client"}, true,
          fenceq::test::with_param(rehost(schema.uri(), dir.path().string()),
                                   "application_name=" + app)) {}
  TempDir dir;
  PgSchema schema;
  CommitDropProxy proxy;
  std::string app;  // the application_name of fenceqd's sessions
  Daemon d;
};

// What a reply of the raw protocol says: an error's code, or its result.
struct Reply {
  std::string error;  // "" when ok
  json result;
};

Reply reply_of(const json& rep) {
  if (rep.at("ok") == true) return {"", rep.at("result")};
  return {rep.at("error").at("code").get<std::string>(), nullptr};
}

// A call through the C++ client, as a Reply.
template <class F>
Reply call(F&& f) {
  try {
    return {"", json(f())};
  } catch (const fenceq::Error& e) {
    return {e.code(), nullptr};
  }
}

json as_json(const std::optional<std::int64_t>& fence) {
  return fence ? json(*fence) : json(nullptr);
}
json as_json(const std::optional<fenceq::ClaimedJob>& j) {
  return j ? json{{"id", j->id}, {"fence", j->fence}} : json(nullptr);
}

// The state of `id` through the daemon once it serves again (it reconnects
// by itself; `unavailable` until then).
std::optional<fenceq::JobState> state_after(Daemon& d, const std::string& id) {
  Client c(d.endpoint(), ClientOptions{5s});
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    try {
      return c.state(id);
    } catch (const fenceq::Error& e) {
      if (e.code() != "unavailable" || std::chrono::steady_clock::now() > give_up) throw;
      std::this_thread::sleep_for(50ms);
    }
  }
}

// The judgement of one reply against the state read afterwards: the
// batch was applied (PostgreSQL committed it), so a reply must say so or
// say that the outcome is unknown.
void claim_judged(const Reply& r, const std::optional<fenceq::JobState>& st,
                  const std::string& owner, std::int64_t fence) {
  INFO("reply: " << (r.error.empty() ? r.result.dump() : r.error));
  REQUIRE(st);  // the batch was applied: the job is leased to `owner`
  REQUIRE(st->owner == owner);
  REQUIRE(st->fence == fence);
  if (!r.error.empty()) {
    CHECK(r.error == "outcome_unknown");
    return;
  }
  CHECK(r.result == json(fence));  // nil would deny the lease `owner` holds
}

void complete_judged(const Reply& r, const std::optional<fenceq::JobState>& st,
                     const std::string& result) {
  INFO("reply: " << (r.error.empty() ? r.result.dump() : r.error));
  REQUIRE(st);
  REQUIRE(st->done);
  REQUIRE(st->result == result);
  if (!r.error.empty()) {
    CHECK(r.error == "outcome_unknown");
    return;
  }
  CHECK(r.result == true);  // false would deny the result stored
}

// A claim_next's reply (one job or nil; or, with max, an array) against the
// jobs `ids` of its queue: those leased to `owner` now are the ones it took.
void claim_next_judged(Daemon& d, const Reply& r, const std::vector<std::string>& ids,
                       const std::string& owner, bool many) {
  json leased = json::array();
  for (const auto& id : ids) {
    auto st = state_after(d, id);
    REQUIRE(st);
    if (st->owner == owner) leased.push_back({{"id", id}, {"fence", st->fence}});
  }
  INFO("reply: " << (r.error.empty() ? r.result.dump() : r.error) << ", leased to " << owner
                 << ": " << leased.dump());
  REQUIRE_FALSE(leased.empty());  // the batch was applied
  if (!r.error.empty()) {
    CHECK(r.error == "outcome_unknown");
    return;
  }
  json got = json::array();
  for (const auto& j : many ? r.result : json::array({r.result})) {
    if (!j.is_null()) got.push_back({{"id", j.at("id")}, {"fence", j.at("fence")}});
  }
  std::sort(got.begin(), got.end());
  std::sort(leased.begin(), leased.end());
  CHECK(got == leased);
}

std::vector<std::string> ids_of(const std::string& prefix, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

void enqueue_in(Client& c, const std::string& queue, const std::vector<std::string>& ids) {
  fenceq::EnqueueOptions o;
  o.queue = queue;
  o.now = 1.0;
  for (const auto& id : ids) REQUIRE(c.enqueue(id, o));
}

// A DEALER that has spoken with the daemon once (so that the requests sent
// while it is stopped wait in its socket, not in a handshake).
zmq::socket_t ready_dealer(zmq::context_t& ctx, Daemon& d) {
  auto s = fenceq::test::dealer(ctx, d.endpoint());
  auto ping = json::to_msgpack(json{{"op", "ping"}, {"rid", -1}});
  s.send(zmq::buffer(ping.data(), ping.size()));
  zmq::message_t m;
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  REQUIRE(zmq::poll(&item, 1, 5000ms) > 0);
  REQUIRE(s.recv(m));
  return s;
}

// Sends `requests` (rid = index) while the daemon is stopped, so that it
// reads them all at once: one batch, one transaction. `before_resume` runs
// while it is stopped. Returns the replies by rid.
std::vector<Reply> one_batch(Daemon& d, const std::vector<json>& requests,
                             const std::function<void()>& before_resume) {
  zmq::context_t ctx;
  auto s = ready_dealer(ctx, d);
  d.pause();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    json r = requests[i];
    r["rid"] = i;
    auto bytes = json::to_msgpack(r);
    s.send(zmq::buffer(bytes.data(), bytes.size()));
  }
  // ZeroMQ writes them out from a thread of its own: let them all reach the
  // daemon's socket before it runs again.
  std::this_thread::sleep_for(100ms);
  before_resume();
  d.resume();
  std::vector<Reply> out(requests.size());
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  for (std::size_t n = 0; n < requests.size(); ++n) {
    REQUIRE(zmq::poll(&item, 1, 10000ms) > 0);
    zmq::message_t m;
    REQUIRE(s.recv(m));
    auto rep = json::from_msgpack(std::string(m.to_string_view()));
    out.at(rep.at("rid").get<std::size_t>()) = reply_of(rep);
  }
  return out;
}

}  // namespace

TEST_CASE("pg commit loss: a COMMIT's answer lost after PostgreSQL committed: a claim, a "
          "complete and a claim_next each answer the truth or outcome_unknown, never a second "
          "run's answer") {
  Rig rig;
  Client c(rig.d.endpoint(), ClientOptions{10s});
  REQUIRE(c.enqueue("c1"));
  REQUIRE(c.enqueue("c2"));
  enqueue_in(c, "q", {"q0"});
  REQUIRE(c.claim("c2", "w0", 100, 1.0) == 1);

  SECTION("claim") {
    rig.proxy.arm();
    auto r = call([&] { return as_json(c.claim("c1", "w0", 100, 2.0)); });
    REQUIRE(rig.proxy.drops() == 1);
    auto st = state_after(rig.d, "c1");
    claim_judged(r, st, "w0", 1);
    CHECK(st->until == Approx(102));
  }
  SECTION("complete") {
    rig.proxy.arm();
    auto r = call([&] { return c.complete("c2", "w0", 1, std::string("r2"), 2.0); });
    REQUIRE(rig.proxy.drops() == 1);
    complete_judged(r, state_after(rig.d, "c2"), "r2");
  }
  SECTION("claim_next") {
    rig.proxy.arm();
    auto r = call([&] { return as_json(c.claim_next("q", "w0", 100, 0, 2.0)); });
    REQUIRE(rig.proxy.drops() == 1);
    claim_next_judged(rig.d, r, {"q0"}, "w0", false);
  }
  // And the daemon serves on: the next request is answered on a new session.
  CHECK(c.enqueue("after"));
  CHECK(rig.proxy.drops() == 1);
  CHECK_FALSE(rig.proxy.armed());
}

TEST_CASE("pg commit loss: a COMMIT's answer lost for one batch of claim, complete, claim_next, "
          "complete_many and claim_next_many: each reply is the truth or outcome_unknown") {
  Rig rig;
  Client c(rig.d.endpoint(), ClientOptions{10s});
  for (const auto& id : {"b1", "b2", "m1", "m2"}) REQUIRE(c.enqueue(id));
  enqueue_in(c, "bq", {"bq0"});
  enqueue_in(c, "mq", ids_of("mq", 3));
  REQUIRE(c.claim("b2", "w0", 100, 1.0) == 1);
  REQUIRE(c.claim("m1", "w0", 100, 1.0) == 1);
  REQUIRE(c.claim("m2", "w0", 100, 1.0) == 1);

  const std::vector<json> requests = {
      {{"op", "claim"}, {"id", "b1"}, {"owner", "w0"}, {"ttl", 100}, {"now", 2.0}},
      {{"op", "complete"}, {"id", "b2"}, {"owner", "w0"}, {"fence", 1}, {"result", "rb2"},
       {"now", 2.0}},
      {{"op", "claim_next"}, {"queue", "bq"}, {"owner", "w0"}, {"ttl", 100}, {"now", 2.0}},
      {{"op", "complete_many"},
       {"items",
        {{{"id", "m1"}, {"owner", "w0"}, {"fence", 1}, {"result", "rm1"}},
         {{"id", "m2"}, {"owner", "w0"}, {"fence", 1}, {"result", "rm2"}}}},
       {"now", 2.0}},
      {{"op", "claim_next"}, {"queue", "mq"}, {"owner", "w1"}, {"ttl", 100}, {"max", 2},
       {"now", 2.0}},
  };
  auto replies = one_batch(rig.d, requests, [&] { rig.proxy.arm(); });
  REQUIRE(rig.proxy.drops() == 1);

  claim_judged(replies[0], state_after(rig.d, "b1"), "w0", 1);
  complete_judged(replies[1], state_after(rig.d, "b2"), "rb2");
  claim_next_judged(rig.d, replies[2], {"bq0"}, "w0", false);
  {
    // complete_many: each item's answer against its job.
    const auto& r = replies[3];
    INFO("complete_many: " << (r.error.empty() ? r.result.dump() : r.error));
    for (int i = 0; i < 2; ++i) {
      const std::string id = "m" + std::to_string(i + 1);
      auto st = state_after(rig.d, id);
      REQUIRE(st);
      REQUIRE(st->done);
      REQUIRE(st->result == "r" + id);
      if (r.error.empty()) CHECK(r.result.at(i) == true);
    }
    if (!r.error.empty()) CHECK(r.error == "outcome_unknown");
  }
  claim_next_judged(rig.d, replies[4], ids_of("mq", 3), "w1", true);
  // Five requests of one transaction: one answer lost, one fate for all.
  for (const auto& r : replies) CHECK(r.error == replies[0].error);
}

TEST_CASE("pg commit loss: a COMMIT's answer lost and PostgreSQL out of reach afterwards: "
          "outcome_unknown, not unavailable, for the batch that was applied") {
  Rig rig;
  Client c(rig.d.endpoint(), ClientOptions{10s});
  REQUIRE(c.enqueue("c1"));
  REQUIRE(c.enqueue("c2"));
  REQUIRE(c.claim("c2", "w0", 100, 1.0) == 1);

  rig.proxy.arm(true);  // and every connection after the drop is refused
  auto claim = call([&] { return as_json(c.claim("c1", "w0", 100, 2.0)); });
  REQUIRE(rig.proxy.drops() == 1);
  // While PostgreSQL is out of reach, a new request is refused: nothing of
  // it is applied.
  auto refused = call([&] { return c.enqueue("during"); });
  CHECK(refused.error == "unavailable");
  rig.proxy.refuse(false);
  claim_judged(claim, state_after(rig.d, "c1"), "w0", 1);

  rig.proxy.arm(true);
  auto complete = call([&] { return c.complete("c2", "w0", 1, std::string("r2"), 2.0); });
  REQUIRE(rig.proxy.drops() == 2);
  rig.proxy.refuse(false);
  complete_judged(complete, state_after(rig.d, "c2"), "r2");
  CHECK_FALSE(state_after(rig.d, "during"));
}

TEST_CASE("pg commit loss: sessions that ended while idle are replaced before a batch is sent: "
          "served, no outcome_unknown") {
  Rig rig;
  Client c(rig.d.endpoint(), ClientOptions{10s});
  for (const auto& id : ids_of("j", 4)) REQUIRE(c.enqueue(id));
  const auto claims = [](const std::string& id) {
    return std::vector<json>{
        {{"op", "claim"}, {"id", id}, {"owner", "w"}, {"ttl", 100}, {"now", 2.0}},
        {{"op", "enqueue"}, {"id", id + "-next"}},
    };
  };
  const auto served = [&](const std::vector<Reply>& replies, const std::string& id) {
    REQUIRE(replies.size() == 2);
    INFO(replies[0].error << " " << replies[1].error);
    CHECK(replies[0].error.empty());
    CHECK(replies[0].result == 1);
    CHECK(replies[1].error.empty());
    CHECK(replies[1].result == true);
    auto st = state_after(rig.d, id);
    REQUIRE(st);
    CHECK(st->owner == "w");
  };

  SECTION("closed with nothing said (an idle timeout, a proxy)") {
    for (int i = 0; i < 2; ++i) {
      const auto id = "j" + std::to_string(i);
      served(one_batch(rig.d, claims(id), [&] { rig.proxy.cut_all(); }), id);
    }
  }
  SECTION("ended by the server (pg_terminate_backend: a FATAL 57P01, as at a restart)") {
    for (int i = 2; i < 4; ++i) {
      const auto id = "j" + std::to_string(i);
      served(one_batch(rig.d, claims(id),
                       [&] {
                         CHECK(rig.schema.exec("SELECT count(pg_terminate_backend(pid, 5000)) "
                                               "FROM pg_stat_activity WHERE application_name = '" +
                                               rig.app + "'") != "0");
                       }),
             id);
    }
  }
  CHECK(rig.proxy.drops() == 0);
}

TEST_CASE("pg commit loss: in the store, a session that ended while idle is replaced before a "
          "batch with its COMMIT is sent, and a lost answer to that COMMIT is outcome_unknown") {
  TempDir dir;
  PgSchema schema;
  CommitDropProxy proxy(dir.path().string(),
                        fenceq::test::pg_socket_dir() + "/.s.PGSQL." + std::to_string(kPort));
  const std::string app = "fq_" + schema.name();
  PgStore s(fenceq::test::with_param(rehost(schema.uri(), dir.path().string()),
                                     "application_name=" + app),
            false);
  s.begin();
  for (const auto& id : ids_of("j", 5)) REQUIRE(s.enqueue(NewJob{id}, 1.0));
  s.commit();
  // A claim as fenceqd sends a batch on a shared database: its BEGIN, its
  // statements and its COMMIT in one pipeline. What it threw: "none", or
  // the kind of the StoreError.
  const auto claim = [&](const std::string& id) -> std::string {
    s.begin();
    try {
      std::vector<CallResult> out;
      const bool committed = s.run({Call{ClaimParams{id, "w", 2.0, 100}}}, out, true);
      CHECK(committed);
      CHECK(out.at(0).number == 1);
      return "none";
    } catch (const StoreError& e) {
      s.rollback();
      INFO(e.what());
      switch (e.kind) {
        case StoreError::Kind::unavailable: return "unavailable";
        case StoreError::Kind::outcome_unknown: return "outcome_unknown";
        default: return "other: " + std::string(e.what());
      }
    }
  };
  const auto leased = [&](const std::string& id) {
    s.begin();
    auto st = s.state(id);
    s.commit();
    return st && st->owner == "w" && st->fence == 1;
  };
  const auto epoch = s.connection_epoch();

  // Closed while idle with nothing said (an idle timeout, a proxy): the
  // end of the stream waits in the socket; the batch goes out on a new
  // session, and is applied once.
  proxy.cut_all();
  CHECK(claim("j0") == "none");
  CHECK(s.connection_epoch() == epoch + 1);
  CHECK(leased("j0"));

  // Ended by the server (pg_terminate_backend: a FATAL 57P01, as each
  // session gets at a restart).
  REQUIRE(s.wakeup_fd() >= 0);
  const int fd = s.wakeup_fd();
  CHECK(schema.exec("SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                    "WHERE application_name = '" + app + "'") == "1");
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);  // what the server said has come through the proxy
  CHECK(claim("j1") == "none");
  CHECK(s.connection_epoch() == epoch + 2);
  CHECK(leased("j1"));

  // The answer to COMMIT lost after PostgreSQL committed.
  proxy.arm();
  CHECK(claim("j2") == "outcome_unknown");
  CHECK(proxy.drops() == 1);
  CHECK(leased("j2"));  // it was applied, once
  // ... and PostgreSQL out of reach afterwards: still outcome_unknown.
  proxy.arm(true);
  CHECK(claim("j3") == "outcome_unknown");
  CHECK(proxy.drops() == 2);
  CHECK(claim("j4") == "unavailable");  // nothing sent: nothing applied
  proxy.refuse(false);
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  bool back = false;
  while (!back && std::chrono::steady_clock::now() < give_up) {
    try {
      back = leased("j3");
      REQUIRE(back);
    } catch (const StoreError& e) {
      s.rollback();
      REQUIRE(e.kind == StoreError::Kind::unavailable);
      std::this_thread::sleep_for(50ms);
    }
  }
  CHECK(back);
  CHECK_FALSE(leased("j4"));
}
