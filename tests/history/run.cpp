// fenceq-history: a randomized workload against a real fenceqd, recorded and
// checked (checker.cpp), with the daemon killed -9 and restarted during it.
//
// Worker threads, each with its own fenceq::Client and owner name, enqueue,
// claim, renew, complete, release and read a small window of jobs, stalling
// at random between the steps of a job. The daemon runs in client clock mode
// and every request carries `now` from one simulated clock that a separate
// thread moves forward in jumps, so leases expire in the middle of jobs and
// the workers' late writes meet newer leases. Threads share three owner names
// (a worker restarted under the same name), so only the fence can tell an old
// lease from the current one. Workers also replay their old fences on
// purpose, and an intruder writes with fences it never got.
//
// The clock only moves while no request is in flight: all requests in flight
// carry the same `now`, so in whatever order they arrive, the `now` values the
// daemon sees never go back (C2.2). A request without a reply is abandoned
// with its socket (linger 0), so it is not re-sent to the next daemon.
//
//   fenceq-history [--clients N] [--seconds S] [--kills K] [--min-ops N]
//                  [--seed N] [--timeout-ms MS] [--window W] [--sync MODE]
//                  [--pg --sidecars N | --lossyfs PATH] [--restores N]
//
// --pg: the jobs live in the PostgreSQL test cluster (tests/support/pg.hpp)
// and N sidecars (default 3) serve them, the workers spread over them. Every
// second kill is a restart of PostgreSQL itself instead of a sidecar's kill -9.
//
// --lossyfs PATH (the fenceq-lossyfs binary): the database lives on a
// fenceq-lossyfs mount (the IPC socket outside it), and every kill -9 is
// followed by a power cut, which drops every write the daemon did not fsync,
// before the daemon restarts. After each cut SQLite's integrity check runs on
// a copy of the database; at the end, on the file itself. With --sync full
// (the default) the checker judges a cut like a kill -9: every acknowledged
// write must survive. With --sync normal or off the contract lets a cut drop
// the last acknowledged commits (C1.4), so the checker lets a request
// answered after a cut miss a write acknowledged before it, and nothing else:
// a fence must still never be handed out twice, nor a stale write accepted.
// The workers then also claim jobs of a pool that lives for the whole run,
// most of all in a burst just before each cut (see Shared::pool), so that a
// cut finds claims acknowledged but not yet fsynced on jobs that survive it
// and are claimed again.
//
// --restores N (not with --lossyfs): N times during the run a backup is
// taken while the daemon serves (`fenceq backup`; with --pg `pg_dump -Fc`),
// the run goes on (fences rise, leases stay open), then the daemons are
// killed -9, the backup put back (restore.hpp: the SQLite file replaced; a
// `pg_restore` into a fresh database, the first sidecar started with
// --restored) and the run goes on. The checker knows where each backup
// started and each restore fell: a write answered after the backup started
// may be lost, in any --sync mode; a fence must still never be handed out
// twice, and no write of a lease claimed before the restore be accepted
// after it. --restore-unflagged (with --pg): the sidecars start on the copy
// without --restored, which the contract forbids: the checker must then
// report violations (it shows the run can fail).
//
// Prints one summary line and exits 0 when no violation was found, the run
// did at least --min-ops operations and survived every kill; 1 otherwise.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fenceq/client.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "history.hpp"
#include "lossy_mount.hpp"
#include "restore.hpp"

namespace {

using namespace std::chrono_literals;
using fenceq::history::Kind;
using fenceq::history::Op;
using fenceq::history::Outcome;
using SteadyClock = std::chrono::steady_clock;

struct Config {
  int clients = 8;
  double seconds = 20;
  int kills = 6;
  std::uint64_t min_ops = 0;
  std::uint64_t seed = 0;
  int timeout_ms = 1000;
  int window = 10;
  std::string sync = "full";
  bool pg = false;
  int sidecars = 3;
  std::string lossyfs;  // the fenceq-lossyfs binary; empty: no power cuts
  int restores = 0;
  bool restore_unflagged = false;
};

// The simulated clock. Requests enter() and leave(); advance() waits until
// none is in flight, so every request in flight carries the same `now`.
class SimClock {
 public:
  double enter() {
    std::unique_lock l(m_);
    cv_.wait(l, [&] { return !advancing_; });
    ++in_flight_;
    return now_;
  }
  void leave() {
    std::lock_guard l(m_);
    if (--in_flight_ == 0) cv_.notify_all();
  }
  void advance(double by) {
    std::unique_lock l(m_);
    advancing_ = true;
    cv_.wait(l, [&] { return in_flight_ == 0; });
    now_ += by;
    advancing_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  bool advancing_ = false;
  double now_ = 1000.0;
};

struct Shared {
  Shared(const Config& c, std::vector<std::string> e) : cfg(c), endpoints(std::move(e)) {}
  const Config& cfg;
  std::vector<std::string> endpoints;  // the sidecars; worker i talks to i % size
  SimClock clock;
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::int64_t> frontier{0};  // jobs j0 .. j<frontier-1> were enqueued (or tried)
  // --lossyfs: the pool, jobs p0 .. p<pool-1> that live for the whole run
  // (never completed), and the burst of claims on them before each cut. The
  // window of new jobs moves on within milliseconds, and its jobs are mostly
  // created after the last fsync, so a cut takes them back whole and nobody
  // claims them again. A claim lost at a cut shows only when the job
  // survives it and is claimed again: the pool's jobs do, and are.
  int pool = 0;
  std::atomic<bool> burst{false};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> unexpected_errors{0};
};

std::string job_name(std::int64_t i) { return "j" + std::to_string(i); }
std::string pool_job(int i) { return "p" + std::to_string(i); }

class Worker {
 public:
  Worker(Shared& sh, int id, std::uint64_t seed)
      : sh_(sh), id_(id), rng_(seed), me_("w" + std::to_string(id % 3)) {
    connect();
  }

  std::vector<Op> ops;

  void run(std::uint64_t max_ops) {
    while (!sh_.stop.load() && ops.size() < max_ops) step();
  }

  // One recorded request. `fn` performs the call and fills the reply fields.
  template <typename Fn>
  void record(Op op, Fn fn) {
    op.thread = id_;
    double now = sh_.clock.enter();
    if (op.kind == Kind::claim || op.kind == Kind::renew || op.kind == Kind::complete) {
      op.now = now;
    }
    op.invoked = sh_.seq.fetch_add(1);
    try {
      fn(op);
      op.outcome = Outcome::ok;
      op.returned = sh_.seq.fetch_add(1);
    } catch (const fenceq::Error& e) {
      op.error = e.code();
      if (e.code() == "timeout" || e.code() == "transport" || e.code() == "outcome_unknown") {
        op.outcome = Outcome::unknown;  // may or may not have been applied
      } else {
        op.outcome = Outcome::refused;
        op.returned = sh_.seq.fetch_add(1);
        // Only a store failure or a stop may refuse this workload's requests.
        if (e.code() != "internal" && e.code() != "unavailable") {
          sh_.unexpected_errors.fetch_add(1);
          std::cerr << "fenceq-history: unexpected error reply: " << e.what() << "\n";
        }
      }
    }
    sh_.clock.leave();
    const bool lost = op.outcome == Outcome::unknown;
    ops.push_back(std::move(op));
    if (lost) {
      // Drop the socket and whatever it still queues: a request without a
      // reply must not be delivered to the next daemon behind our back.
      connect();
      std::this_thread::sleep_for(20ms);
    }
  }

  void enqueue(const std::string& job) {
    Op op;
    op.kind = Kind::enqueue;
    op.job = job;
    record(std::move(op), [&](Op& o) { o.flag = client_->enqueue(o.job); });
  }

  // Waits, unrecorded, until the daemon answers a read instead of refusing
  // it `unavailable` (a sidecar that has not yet reconnected to a restarted
  // PostgreSQL), for up to `limit`: the final reads compare states, and a
  // refusal is none.
  void wait_served(std::chrono::seconds limit) {
    const auto until = SteadyClock::now() + limit;
    for (;;) {
      try {
        (void)client_->state("history-ready-probe");
        return;
      } catch (const fenceq::Error& e) {
        if (SteadyClock::now() > until) return;
        if (e.code() != "unavailable") connect();
        std::this_thread::sleep_for(50ms);
      }
    }
  }

  void state(const std::string& job) {
    Op op;
    op.kind = Kind::state;
    op.job = job;
    record(std::move(op), [&](Op& o) {
      if (auto st = client_->state(o.job)) {
        o.row = fenceq::history::Row{st->owner, st->until, st->fence, st->result, st->done};
      }
    });
  }

  std::optional<std::int64_t> claim(const std::string& job, double ttl) {
    Op op;
    op.kind = Kind::claim;
    op.job = job;
    op.owner = me_;
    op.ttl = ttl;
    record(std::move(op),
           [&](Op& o) { o.fence_got = client_->claim(o.job, o.owner, o.ttl, o.now); });
    const Op& done = ops.back();
    if (done.acked() && done.fence_got) leases_.emplace_back(job, *done.fence_got);
    return done.acked() ? done.fence_got : std::nullopt;
  }

  bool write(Kind kind, const std::string& job, const std::string& owner, std::int64_t fence) {
    Op op;
    op.kind = kind;
    op.job = job;
    op.owner = owner;
    op.fence = fence;
    if (kind == Kind::renew) op.ttl = ttl();
    if (kind == Kind::complete) {
      // Unique, so a state's result names the one request that wrote it.
      if (pick(10) > 0) op.result = me_ + "-" + std::to_string(ops.size());
    }
    record(std::move(op), [&](Op& o) {
      switch (o.kind) {
        case Kind::renew:
          o.flag = client_->renew(o.job, o.owner, o.fence, o.ttl, o.now);
          break;
        case Kind::complete:
          o.flag = client_->complete(
              o.job, o.owner, o.fence,
              o.result ? std::optional<std::string_view>(*o.result) : std::nullopt, o.now);
          break;
        case Kind::release:
          o.flag = client_->release(o.job, o.owner, o.fence);
          break;
        default:
          break;
      }
    });
    return ops.back().acked() && ops.back().flag;
  }

 private:
  void connect() {
    client_ = std::make_unique<fenceq::Client>(
        sh_.endpoints[static_cast<std::size_t>(id_) % sh_.endpoints.size()],
        fenceq::ClientOptions{std::chrono::milliseconds(sh_.cfg.timeout_ms)});
  }

  int pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }
  double ttl() { return 0.2 + static_cast<double>(pick(2800)) / 1000.0; }

  std::string some_job() {
    std::int64_t hi = sh_.frontier.load();
    std::int64_t lo = std::max<std::int64_t>(0, hi - sh_.cfg.window);
    return job_name(lo + pick(static_cast<int>(hi - lo + 1)));  // may name a job not yet made
  }

  void stall() {
    int r = pick(100);
    if (r < 70) {
      std::this_thread::sleep_for(std::chrono::microseconds(pick(3000)));
    } else if (r < 95) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 + pick(15)));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(30 + pick(50)));
    }
  }

  void step() {
    int r = pick(100);
    if (r < 6) {
      enqueue(job_name(sh_.frontier.fetch_add(1)));
    } else if (r < 9) {
      // A repeated enqueue must change nothing (or, after a cut took the
      // job back, creates it again).
      enqueue(sh_.pool > 0 && pick(2) == 0 ? some_pool_job() : some_job());
    } else if (r < 70) {
      work();
    } else if (r < 84) {
      state(some_job());
    } else if (r < 95) {
      if (leases_.empty()) return;
      auto [job, fence] = leases_[static_cast<std::size_t>(pick(static_cast<int>(leases_.size())))];
      static constexpr Kind kinds[] = {Kind::renew, Kind::complete, Kind::release};
      write(kinds[pick(3)], job, me_, fence);  // an old fence, replayed
    } else {
      static constexpr Kind kinds[] = {Kind::renew, Kind::complete, Kind::release};
      write(kinds[pick(3)], some_job(), "intruder", 1 + pick(20));  // never claimed anything
    }
  }

  std::string some_pool_job() { return pool_job(pick(sh_.pool)); }

  // One job's life as a worker sees it: claim, renew a few times with stalls
  // in between, then complete, release or walk away. A pool job is never
  // completed, so it stays claimable for the whole run.
  void work() {
    const bool pooled = sh_.pool > 0 && pick(100) < (sh_.burst.load() ? 80 : 15);
    std::string job = pooled ? some_pool_job() : some_job();
    auto fence = claim(job, ttl());
    if (!fence) {
      if (pick(3) == 0) enqueue(job_name(sh_.frontier.fetch_add(1)));
      return;
    }
    for (int n = pick(4); n > 0 && !sh_.stop.load(); --n) {
      stall();
      if (!write(Kind::renew, job, me_, *fence)) break;
    }
    stall();
    int r = pick(100);
    if (pooled) {
      if (r < 50) write(Kind::release, job, me_, *fence);  // else: abandoned
    } else if (r < 75) {
      write(Kind::complete, job, me_, *fence);
    } else if (r < 90) {
      write(Kind::release, job, me_, *fence);
    }  // else: abandoned; the lease expires
  }

  Shared& sh_;
  int id_;
  std::mt19937_64 rng_;
  std::string me_;
  std::unique_ptr<fenceq::Client> client_;
  std::vector<std::pair<std::string, std::int64_t>> leases_;
};

bool parse(int argc, char** argv, Config& c) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value for " + a);
      return argv[++i];
    };
    if (a == "--clients") {
      c.clients = std::stoi(value());
    } else if (a == "--seconds") {
      c.seconds = std::stod(value());
    } else if (a == "--kills") {
      c.kills = std::stoi(value());
    } else if (a == "--min-ops") {
      c.min_ops = std::stoull(value());
    } else if (a == "--seed") {
      c.seed = std::stoull(value());
    } else if (a == "--timeout-ms") {
      c.timeout_ms = std::stoi(value());
    } else if (a == "--window") {
      c.window = std::stoi(value());
    } else if (a == "--sync") {
      c.sync = value();
    } else if (a == "--pg") {
      c.pg = true;
    } else if (a == "--sidecars") {
      c.sidecars = std::stoi(value());
    } else if (a == "--lossyfs") {
      c.lossyfs = value();
    } else if (a == "--restores") {
      c.restores = std::stoi(value());
    } else if (a == "--restore-unflagged") {
      c.restore_unflagged = true;
    } else {
      std::cerr << "usage: fenceq-history [--clients N] [--seconds S] [--kills K] [--min-ops N]\n"
                   "                      [--seed N] [--timeout-ms MS] [--window W] [--sync M]\n"
                   "                      [--pg --sidecars N | --lossyfs PATH] [--restores N]\n";
      return false;
    }
  }
  if (c.pg && !c.lossyfs.empty()) {
    std::cerr << "fenceq-history: --lossyfs is for the SQLite store, not with --pg\n";
    return false;
  }
  if (c.restores > 0 && !c.lossyfs.empty()) {
    std::cerr << "fenceq-history: --restores is not with --lossyfs\n";
    return false;
  }
  if (c.restore_unflagged && !c.pg) {
    std::cerr << "fenceq-history: --restore-unflagged is for --pg\n";
    return false;
  }
  if (c.sync != "full" && c.sync != "normal" && c.sync != "off") {
    std::cerr << "fenceq-history: --sync must be full, normal or off\n";
    return false;
  }
  return c.clients > 0 && c.clients <= 64 && c.seconds > 0 && c.seconds <= 86400 && c.kills >= 0 &&
         c.kills <= 100000 && c.window > 0 && c.restores >= 0 && c.restores <= 10000;
}

// The killer's schedule: kill k at a random moment within the k-th of
// kills + 1 slots of the run (with --lossyfs, the pool's burst a moment
// before it); restore r at the end of the r-th of restores + 1 slots, its
// backup up to 2 s before.
struct Event {
  enum What { burst, kill, backup, restore } what;
  double at;  // seconds into the run
  int k;      // kill k (1-based)
};
std::vector<Event> schedule(const Config& cfg, bool burst, std::mt19937_64& rng) {
  std::vector<Event> events;
  const double slot = cfg.seconds / (cfg.kills + 1);
  for (int k = 1; k <= cfg.kills; ++k) {
    double at = slot * (k - 0.5) + slot * (static_cast<double>(rng() % 1000) / 1000.0 - 0.5);
    if (burst) events.push_back({Event::burst, at - std::min(0.3, slot / 4), k});
    events.push_back({Event::kill, at, k});
  }
  const double rslot = cfg.seconds / (cfg.restores + 1);
  for (int r = 1; r <= cfg.restores; ++r) {
    events.push_back({Event::backup, rslot * r - std::min(2.0, rslot / 3), r});
    events.push_back({Event::restore, rslot * r, r});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.at < b.at; });
  return events;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  try {
    if (!parse(argc, argv, cfg)) return 2;
  } catch (const std::exception& e) {
    std::cerr << "fenceq-history: " << e.what() << "\n";
    return 2;
  }
  if (cfg.seed == 0) cfg.seed = std::random_device{}();
  ::signal(SIGPIPE, SIG_IGN);

  // --lossyfs: the mount comes first, so that it outlives the daemon using it
  // (members and locals go in reverse order). Only the database is on it: the
  // socket and the daemon's log stay in the daemon's TempDir.
  std::unique_ptr<fenceq::test::LossyMount> mount;
  if (!cfg.lossyfs.empty()) {
    try {
      mount = std::make_unique<fenceq::test::LossyMount>(cfg.lossyfs);
    } catch (const std::exception& e) {
      std::cerr << "fenceq-history: " << e.what() << "\n";
      return 1;
    }
  }
  // Acknowledged commits may be lost at a cut: the checker's lossy mode.
  const bool lossy = mount && cfg.sync != "full";

  // One daemon on a SQLite file, or --pg: sidecars sharing one schema.
  std::unique_ptr<fenceq::test::PgSchema> schema;
  if (cfg.pg) schema = std::make_unique<fenceq::test::PgSchema>();
  const int n_daemons = cfg.pg ? cfg.sidecars : 1;
  std::vector<std::unique_ptr<fenceq::test::TempDir>> dirs;
  std::vector<std::unique_ptr<fenceq::test::Daemon>> daemons;
  std::vector<std::string> endpoints;
  for (int i = 0; i < n_daemons; ++i) {
    dirs.push_back(std::make_unique<fenceq::test::TempDir>());
    daemons.push_back(std::make_unique<fenceq::test::Daemon>(
        *dirs.back(), std::vector<std::string>{"--clock", "client", "--sync", cfg.sync}, true,
        schema ? schema->uri() : mount ? mount->at("fenceq.db") : ""));
    endpoints.push_back(daemons.back()->endpoint());
  }
  fenceq::test::Daemon& daemon = *daemons.front();
  Shared sh(cfg, endpoints);
  const auto t0 = SteadyClock::now();
  const auto deadline = t0 + std::chrono::duration_cast<SteadyClock::duration>(
                                 std::chrono::duration<double>(cfg.seconds));

  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i <= cfg.clients + 1; ++i) {  // the last two: setup and final reads
    workers.push_back(std::make_unique<Worker>(sh, i, cfg.seed * 1000 + static_cast<unsigned>(i)));
  }
  Worker& setup = *workers[static_cast<std::size_t>(cfg.clients)];
  for (int i = 0; i < cfg.window; ++i) setup.enqueue(job_name(sh.frontier.fetch_add(1)));
  if (mount) {
    sh.pool = cfg.window;
    for (int i = 0; i < sh.pool; ++i) setup.enqueue(pool_job(i));
  }

  // Every thread's loop ends by time; the op budget bounds memory on long runs.
  const std::uint64_t max_ops_per_worker = 20'000'000 / static_cast<std::uint64_t>(cfg.clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < cfg.clients; ++i) {
    threads.emplace_back([&, i] { workers[static_cast<std::size_t>(i)]->run(max_ops_per_worker); });
  }
  std::thread advancer([&] {
    std::mt19937_64 rng(cfg.seed ^ 0xc10c);
    while (!sh.stop.load()) {
      std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 8000));
      sh.clock.advance(0.05 + static_cast<double>(rng() % 750) / 1000.0);
    }
  });
  int restarts = 0, pg_restarts = 0;
  std::string restart_failure;
  // The crashes: kill -9 and, on lossyfs, a power cut while the daemon is
  // down. Only one thread at a time crashes (the killer, then main).
  std::vector<std::uint64_t> cuts;  // where in the sequence, for the checker
  int integrity_checks = 0, databases_lost = 0;
  std::vector<std::string> integrity_failures;
  auto crash = [&](fenceq::test::Daemon& d) {
    d.kill9();
    if (!mount) return;
    const std::string line = mount->cut();
    // Every request sent so far may have been applied before the cut; every
    // one answered from now on, after it.
    cuts.push_back(sh.seq.fetch_add(1));
    // What the next start will open, checked on a copy so the mount stays
    // exactly as the cut left it. A database whose very name was never made
    // durable (nothing fsynced its directory) is gone: the daemon starts a
    // new one, and the checker sees every job lost.
    const std::string db = mount->at("fenceq.db");
    if (!std::filesystem::exists(db)) {
      ++databases_lost;
      return;
    }
    ++integrity_checks;
    std::string r = fenceq::test::sqlite_integrity_of_copy(db);
    if (r != "ok") integrity_failures.push_back(line + ": integrity_check: " + r);
  };
  // --restores: where each backup started and each restore fell.
  std::unique_ptr<fenceq::history::Restorer> restorer;
  if (cfg.restores > 0) {
    restorer =
        std::make_unique<fenceq::history::Restorer>(daemons, schema.get(), !cfg.restore_unflagged);
  }
  std::vector<fenceq::history::Restore> restores;
  std::uint64_t backup_at = 0;
  std::thread killer([&] {
    std::mt19937_64 rng(cfg.seed ^ 0x6b696c6c);
    for (const Event& e : schedule(cfg, sh.pool > 0, rng)) {
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<SteadyClock::duration>(
                                             std::chrono::duration<double>(e.at)));
      if (sh.stop.load()) break;
      try {
        if (e.what == Event::burst) {
          // Most claims go to the pool for a moment before the cut, and
          // until the daemon is back.
          sh.burst = true;
        } else if (e.what == Event::backup) {
          // Every request answered before this is in the copy.
          backup_at = sh.seq.fetch_add(1);
          restorer->backup();
        } else if (e.what == Event::restore) {
          restorer->restore([&] { restores.push_back({backup_at, sh.seq.fetch_add(1)}); });
        } else if (cfg.pg && e.k % 2 == 0) {
          // PostgreSQL itself goes down and comes back (pg_ctl restart -m
          // fast: sessions cut, in-flight transactions rolled back).
          fenceq::test::pg_cluster("restart");
          ++pg_restarts;
          ++restarts;
        } else {
          auto& victim = *daemons[static_cast<std::size_t>(rng() % daemons.size())];
          crash(victim);
          std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 50));
          victim.restart();
          sh.burst = false;
          ++restarts;
        }
      } catch (const std::exception& ex) {
        restart_failure = ex.what();
        break;
      }
    }
  });
  std::this_thread::sleep_until(deadline);
  sh.stop = true;
  for (auto& t : threads) t.join();
  killer.join();
  advancer.join();

  // Final reads, then kill -9 (and a power cut) and read again: the last
  // acknowledged writes must survive (unless lossy), and nothing may change
  // while nobody writes.
  Worker& reader = *workers.back();
  const std::int64_t jobs = sh.frontier.load();
  auto read_all = [&] {
    reader.wait_served(std::chrono::seconds(60));
    for (std::int64_t j = 0; j < jobs; ++j) reader.state(job_name(j));
    for (int p = 0; p < sh.pool; ++p) reader.state(pool_job(p));
  };
  int stop_status = -1;
  std::string final_integrity;
  try {
    for (auto& d : daemons) {
      if (!d->running()) d->restart();
    }
    read_all();
    crash(daemon);
    if (cfg.pg) fenceq::test::pg_cluster("restart");
    daemon.restart();
    ++restarts;
    read_all();
    stop_status = 0;
    for (auto& d : daemons) stop_status = std::max(stop_status, d->stop(SIGTERM));
    // The file itself, through the mount, with the daemon stopped.
    if (mount) final_integrity = fenceq::test::sqlite_integrity(mount->at("fenceq.db"));
  } catch (const std::exception& e) {
    restart_failure = e.what();
  }

  std::vector<Op> all;
  for (auto& w : workers) {
    for (auto& op : w->ops) all.push_back(std::move(op));
  }
  fenceq::history::Summary sum;
  auto violations =
      fenceq::history::check(all, sum, fenceq::history::Options{cuts, lossy, restores});

  // The two final reads bracket nothing but a kill -9 (and a power cut that,
  // unless lossy, must lose nothing acknowledged): they must be equal.
  std::vector<const Op*> finals;
  for (const Op& op : all) {
    if (op.thread == cfg.clients + 1) finals.push_back(&op);
  }
  const std::size_t n = finals.size() / 2;
  for (std::size_t i = 0; i < n && finals.size() == 2 * n && !lossy; ++i) {
    const Op& a = *finals[i];
    const Op& b = *finals[n + i];
    bool same = a.acked() && b.acked() && a.row.has_value() == b.row.has_value();
    if (same && a.row) {
      const auto& x = *a.row;
      const auto& y = *b.row;
      same = x.owner == y.owner && x.until == y.until && x.fence == y.fence &&
             x.result == y.result && x.done == y.done;
    }
    if (!same) {
      violations.push_back(a.job + ": state changed across a kill -9 with no writer [" +
                           fenceq::history::describe(a) + "] vs [" + fenceq::history::describe(b) +
                           "]");
    }
  }
  if (sh.unexpected_errors.load() > 0) {
    violations.push_back(std::to_string(sh.unexpected_errors.load()) +
                         " requests got an error reply no valid request should get");
  }
  if (stop_status != 0) violations.push_back("fenceqd did not exit 0 on SIGTERM at the end");

  const double took = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  if (mount) {
    std::printf(
        "history: lossyfs sync=%s checker=%s power_cuts=%llu lost_at_cut=%llu "
        "raised_at_recovery=%llu databases_lost=%d integrity_checks=%d integrity_failures=%zu "
        "final_integrity=%s\n",
        cfg.sync.c_str(), lossy ? "lossy" : "strict",
        static_cast<unsigned long long>(sum.cuts),
        static_cast<unsigned long long>(sum.lost_at_cut),
        static_cast<unsigned long long>(sum.raised_at_recovery), databases_lost, integrity_checks,
        integrity_failures.size(), final_integrity.c_str());
  }
  if (cfg.restores > 0) {
    std::printf(
        "history: restores=%llu of %d store=%s%s lost_at_restore=%llu "
        "refused_across_restore=%llu raised_rows_read=%llu\n",
        static_cast<unsigned long long>(sum.restores), cfg.restores, cfg.pg ? "postgres" : "sqlite",
        cfg.restore_unflagged ? " (sidecars started WITHOUT --restored)" : "",
        static_cast<unsigned long long>(sum.lost_at_restore),
        static_cast<unsigned long long>(sum.refused_across_restore),
        static_cast<unsigned long long>(sum.raised_at_recovery));
  }
  std::printf(
      "history: operations=%llu acknowledged=%llu unknown=%llu refused=%llu jobs=%llu "
      "fences=%llu completes=%llu leases_expired=%llu stale_writes_refused=%llu states=%llu "
      "restarts=%d pg_restarts=%d sidecars=%d violations=%zu seed=%llu seconds=%.1f\n",
      static_cast<unsigned long long>(sum.operations),
      static_cast<unsigned long long>(sum.acknowledged),
      static_cast<unsigned long long>(sum.unknown), static_cast<unsigned long long>(sum.refused),
      static_cast<unsigned long long>(sum.jobs), static_cast<unsigned long long>(sum.fences),
      static_cast<unsigned long long>(sum.completes),
      static_cast<unsigned long long>(sum.leases_expired),
      static_cast<unsigned long long>(sum.stale_refused),
      static_cast<unsigned long long>(sum.states), restarts, pg_restarts, n_daemons,
      violations.size(),
      static_cast<unsigned long long>(cfg.seed), took);
  int rc = 0;
  if (!violations.empty()) {
    for (std::size_t i = 0; i < violations.size() && i < 50; ++i) {
      std::cout << "VIOLATION " << violations[i] << "\n";
    }
    std::string path = "/tmp/fenceq-history-" + std::to_string(cfg.seed) + ".txt";
    std::ofstream dump(path);
    // Every violation, then the history in invocation order with the power
    // cuts, backups and restores where they fell.
    for (const auto& v : violations) dump << "VIOLATION " << v << "\n";
    std::sort(all.begin(), all.end(),
              [](const Op& a, const Op& b) { return a.invoked < b.invoked; });
    std::vector<std::pair<std::uint64_t, std::string>> marks;
    for (auto c : cuts) marks.emplace_back(c, "POWER CUT");
    for (const auto& r : restores) {
      marks.emplace_back(r.backup, "BACKUP STARTED");
      marks.emplace_back(r.at, "RESTORED (daemons down)");
    }
    std::sort(marks.begin(), marks.end());
    auto mark = marks.begin();
    for (const Op& op : all) {
      for (; mark != marks.end() && mark->first < op.invoked; ++mark) {
        dump << mark->second << " @" << mark->first << "\n";
      }
      dump << fenceq::history::describe(op) << "\n";
    }
    for (; mark != marks.end(); ++mark) dump << mark->second << " @" << mark->first << "\n";
    std::cout << "violations and history written to " << path << " (rerun with --seed "
              << cfg.seed << ")\n";
    rc = 1;
  }
  for (const auto& f : integrity_failures) std::cout << "FAILED: " << f << "\n";
  if (!integrity_failures.empty()) rc = 1;
  if (mount && final_integrity != "ok") {
    std::cout << "FAILED: integrity_check at the end: " << final_integrity << "\n";
    rc = 1;
  }
  if (!restart_failure.empty()) {
    std::cout << "FAILED: a restart failed: " << restart_failure << "\n";
    rc = 1;
  }
  if (restorer) {
    for (const auto& f : restorer->failures()) std::cout << "FAILED: " << f << "\n";
    if (!restorer->failures().empty()) rc = 1;
    if (restorer->restores() < cfg.restores) {
      std::cout << "FAILED: " << restorer->restores() << " restores, " << cfg.restores
                << " wanted\n";
      rc = 1;
    }
  }
  if (restarts < cfg.kills + 1) {
    std::cout << "FAILED: " << restarts << " restarts, " << cfg.kills + 1 << " wanted\n";
    rc = 1;
  }
  if (sum.operations < cfg.min_ops) {
    std::cout << "FAILED: " << sum.operations << " operations, at least " << cfg.min_ops
              << " wanted\n";
    rc = 1;
  }
  return rc;
}
