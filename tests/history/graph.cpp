// fenceq-graph: issue 32's jobs that wait for jobs under crashes, recorded
// and checked. One queue holds a graph of 2,000 jobs, seeded at random:
// chains of 15 to 25 links, diamonds (a top, two or three middles, a bottom
// waiting for the middles), a fan-in of 500 parents into one child, jobs
// waiting for one to three earlier jobs of any kind, and independent jobs.
// It is enqueued in enqueue_many requests of at most 1000 entries, parents
// always before their children (in one request or an earlier one), while
// the workers already run.
//
// Worker threads, each with its own fenceq::Client and owner name, claim_next
// with a lease of --ttl seconds (the daemon's own clock), hold the job for a
// moment and complete it with a result string no other request sends. A few
// jobs are heavy (held 0.1 to 0.5 s), and a few holds stall past the lease:
// that complete is stale and must be refused, and the job is claimed again,
// often while the staller still sleeps, so its refused complete may come
// before the new holder's. A request without a reply is abandoned with its
// socket (linger 0), so it is never delivered to the next daemon; a lost
// complete is said once more (fences make that safe). Every ~--kill-every
// seconds the daemon is killed -9 and restarted on the same database (--pg:
// a random sidecar of --sidecars, the workers failing over to the next).
//
// Every request is recorded with the steady-clock time it was sent and the
// time its reply (or its error, or its timeout) came back. From that history:
//   1. No job is claimed before each of its parents was completed: for every
//      claim of C answered at t, each parent P has a complete sent before t
//      that was accepted or lost (a lost one may have committed). A parent
//      whose only completes sent before t were refused means a stale complete
//      unblocked C (the unblocking belongs in the fenced complete's
//      transaction, C3.13).
//   2. Every job is done exactly once: no job has two accepted completes, no
//      job is claimed after its accepted complete was answered, a fence is
//      never handed out twice nor out of order, no complete is accepted after
//      a newer claim of its job was answered, and at the end (after one more
//      kill -9) `results` shows every job done with the result of its
//      accepted complete (or of a lost one), never a refused one's.
//   3. At least one stale complete was refused: otherwise the run did not test
//      staleness at all.
// Claim replies also name each job's parents (`after`): they must be the
// graph's. The checker's imprecision runs one way only: a lost request is
// taken as maybe applied, so it can miss a violation but never invent one.
// --self-check runs it on small hand-written histories instead, each with
// its verdict, and starts no daemon.
//
//   fenceq-graph [--workers N] [--seconds S (every job done by then)]
//                [--kill-every S] [--ttl S] [--seed N] [--timeout-ms MS]
//                [--pg --sidecars N] [--self-check]
//
// Prints one summary line and exits 0 with no violation, at least one stale
// complete refused while its job was not yet done (one that could have
// unblocked a child), every kill survived and every job done; 1 otherwise.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fenceq/client.hpp>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "daemon.hpp"

namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kQueue = "graph";
// An index as a container's size type.
constexpr std::size_t u(long long i) { return static_cast<std::size_t>(i); }
SteadyClock::duration seconds(double s) {
  return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(s));
}
constexpr int kJobs = 2000;
constexpr int kFanIn = 500;
constexpr double kWait = 0.25;  // claim_next's long-poll: idle workers wait in the daemon

struct Config {
  int workers = 8;
  double seconds = 60;    // the bound: every job done by then
  double kill_every = 2;  // seconds between kills, on average
  double ttl = 1;         // the lease of every claim
  std::uint64_t seed = 0;
  int timeout_ms = 1000;
  bool pg = false;
  int sidecars = 3;
  bool self_check = false;
};

// ---------------------------------------------------------------- the graph

// The jobs in enqueue order (a topological order: every parent comes before
// its children), ids g0000.. in that order, so the daemon's id order (that of
// a claim's `after`) is the numeric one.
struct Graph {
  std::vector<std::string> ids;
  std::vector<std::vector<int>> parents;  // by index into ids
  std::unordered_map<std::string, int> index;
  std::vector<int> batch_starts;  // each enqueue_many's first job; ≤ 1000 each
  int chains = 0, diamonds = 0;
  std::size_t edges = 0;
  int size() const { return static_cast<int>(ids.size()); }
};

// Orders the jobs (`par`: each job's parents, all made before it) by Kahn's
// algorithm taking a random available job each step, so that the pieces
// interleave and a chain's links spread over the batches. Names them in that
// order and cuts the order into batches of 250 to 1000.
Graph name_and_batch(const std::vector<std::vector<int>>& par, std::mt19937_64& rng) {
  const int n = static_cast<int>(par.size());
  std::vector<std::vector<int>> children(u(n));
  std::vector<int> waiting(u(n), 0);
  std::vector<int> ready;
  for (int j = 0; j < n; ++j) {
    for (int p : par[u(j)]) children[u(p)].push_back(j);
    waiting[u(j)] = static_cast<int>(par[u(j)].size());
    if (waiting[u(j)] == 0) ready.push_back(j);
  }
  std::vector<int> position(u(n), -1);
  for (int next = 0; !ready.empty(); ++next) {
    std::swap(ready[rng() % ready.size()], ready.back());
    const int j = ready.back();
    ready.pop_back();
    position[u(j)] = next;
    for (int c : children[u(j)]) {
      if (--waiting[u(c)] == 0) ready.push_back(c);
    }
  }
  Graph g;
  g.ids.resize(u(n));
  g.parents.resize(u(n));
  for (int j = 0; j < n; ++j) {
    const auto at = u(position[u(j)]);
    char id[16];
    std::snprintf(id, sizeof id, "g%04d", static_cast<int>(at));
    g.ids[at] = id;
    for (int p : par[u(j)]) g.parents[at].push_back(position[u(p)]);
    g.edges += par[u(j)].size();
  }
  for (int i = 0; i < n; ++i) g.index[g.ids[u(i)]] = i;
  for (int at = 0; at < n; at += 250 + static_cast<int>(rng() % 751)) g.batch_starts.push_back(at);
  return g;
}

Graph make_graph(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x67726170);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  std::vector<std::vector<int>> par;
  auto add = [&](std::vector<int> p) {
    par.push_back(std::move(p));
    return static_cast<int>(par.size()) - 1;
  };
  int chains = 0, diamonds = 0;
  for (; chains < 12; ++chains) {
    int prev = add({});
    for (int k = 1, len = 15 + pick(11); k < len; ++k) prev = add({prev});
  }
  for (; diamonds < 100; ++diamonds) {
    const int top = add({});
    std::vector<int> middles;
    for (int m = 2 + pick(2); m > 0; --m) middles.push_back(add({top}));
    add(middles);
  }
  // `k` distinct jobs made so far.
  auto earlier = [&](std::size_t k) {
    std::vector<int> p;
    while (p.size() < k) {
      const int q = pick(static_cast<int>(par.size()));
      if (std::find(p.begin(), p.end(), q) == p.end()) p.push_back(q);
    }
    return p;
  };
  // Jobs waiting for 1 to 3 earlier jobs of any kind: edges across pieces.
  for (int i = 0; i < 250; ++i) add(earlier(u(1 + pick(3))));
  // The fan-in: 60 parents from the pieces above, the rest jobs of its own.
  std::vector<int> fan = earlier(60);
  while (fan.size() < u(kFanIn)) fan.push_back(add({}));
  add(fan);
  while (par.size() < u(kJobs)) add({});  // independent jobs
  Graph g = name_and_batch(par, rng);
  g.chains = chains;
  g.diamonds = diamonds;
  return g;
}

// -------------------------------------------------------------- the history

enum class Kind { enqueue, claim, complete };
// ok: a reply came. lost: none came (a timeout, the socket failed, the daemon
// killed): it may or may not have been applied. failed: an error reply or
// nothing sent (unreachable): nothing of it was applied.
enum class Outcome { ok, lost, failed };

struct Rec {
  Kind kind = Kind::claim;
  Outcome outcome = Outcome::ok;
  int worker = -1, endpoint = 0;
  int job = -1;  // claim: the job got (-1: none); complete: its job; enqueue: the batch
  std::int64_t fence = 0;
  bool accepted = false;           // complete: answered true
  std::string result;              // complete: the result sent
  std::vector<std::string> after;  // claim: the parents its reply named
  std::string stray;               // claim: an id the graph does not have
  double sent = 0, received = 0;   // seconds since the start, steady clock
  std::string error;               // lost, failed: what the client threw
};

std::string describe(const Graph& g, const Rec& r) {
  static const char* kinds[] = {"enqueue_many", "claim_next", "complete"};
  static const char* outcomes[] = {"ok", "lost", "failed"};
  char line[160];
  std::snprintf(line, sizeof line, "[%.4f .. %.4f] w%d@%d %s %s ", r.sent, r.received, r.worker,
                r.endpoint, kinds[static_cast<int>(r.kind)], outcomes[static_cast<int>(r.outcome)]);
  std::string s = line;
  if (r.kind == Kind::enqueue) return s + "batch " + std::to_string(r.job) + " " + r.error;
  s += r.job >= 0 ? g.ids[u(r.job)] : r.stray.empty() ? "-" : r.stray;
  s += " fence " + std::to_string(r.fence);
  if (r.kind == Kind::complete) s += (r.accepted ? " -> true " : " -> false ") + r.result;
  return s + (r.error.empty() ? "" : " " + r.error);
}

// -------------------------------------------------------------- the checker

struct Tally {
  unsigned long long claims = 0, claims_empty = 0, claims_lost = 0, claims_failed = 0;
  unsigned long long accepted = 0, refused = 0, lost = 0, failed = 0;
  unsigned long long refused_before_done = 0;  // refused, sent before the job's accepted complete
  double tightest = 0;  // least time from a last parent's complete sent to a child's claim reply
};

// Each job's records, by index into the history.
struct ByJob {
  std::vector<std::vector<std::size_t>> claims, completes;
  ByJob(const Graph& g, const std::vector<Rec>& h) : claims(u(g.size())), completes(u(g.size())) {
    for (std::size_t i = 0; i < h.size(); ++i) {
      if (h[i].job < 0 || (h[i].kind == Kind::claim && h[i].outcome != Outcome::ok)) continue;
      if (h[i].kind == Kind::claim) claims[u(h[i].job)].push_back(i);
      if (h[i].kind == Kind::complete) completes[u(h[i].job)].push_back(i);
    }
  }
};

constexpr double kNever = 1e300;

// Check 1: each claim of a child came after a complete of each parent that
// was accepted or lost had been sent. `may_done[P]`: the earliest such send.
void check_parents(const Graph& g, const std::vector<Rec>& h, const ByJob& by,
                   std::vector<std::string>& v, Tally& t) {
  std::vector<double> may_done(u(g.size()), kNever);
  for (const Rec& r : h) {
    if (r.kind == Kind::complete && (r.accepted || r.outcome == Outcome::lost)) {
      may_done[u(r.job)] = std::min(may_done[u(r.job)], r.sent);
    }
  }
  double tightest = kNever;
  for (int c = 0; c < g.size(); ++c) {
    const auto& parents = g.parents[u(c)];
    std::vector<std::string> want;  // what the claim's reply names: the parents, in id order
    for (int p : parents) want.push_back(g.ids[u(p)]);
    std::sort(want.begin(), want.end());
    for (std::size_t ci : by.claims[u(c)]) {
      const Rec& claim = h[ci];
      double last = -kNever;
      for (int p : parents) {
        last = std::max(last, may_done[u(p)]);
        if (may_done[u(p)] < claim.received) continue;
        int stale = 0;
        for (std::size_t pi : by.completes[u(p)]) {
          stale += h[pi].outcome == Outcome::ok && !h[pi].accepted && h[pi].sent < claim.received;
        }
        char line[200];
        std::snprintf(line, sizeof line,
                      "%s claimed (fence %lld, answered at %.4f s) before its parent %s was "
                      "completed: its first accepted or lost complete was sent at %.4f s",
                      g.ids[u(c)].c_str(), static_cast<long long>(claim.fence), claim.received,
                      g.ids[u(p)].c_str(), may_done[u(p)] == kNever ? -1.0 : may_done[u(p)]);
        const std::string why = "; only refused complete(s) came before: a stale one unblocked it";
        v.push_back(line + (stale > 0 ? why : std::string()));
      }
      if (!parents.empty() && last < claim.received) {
        tightest = std::min(tightest, claim.received - last);
      }
      if (claim.after != want) {
        v.push_back(g.ids[u(c)] + ": claim_next's `after` named " +
                    std::to_string(claim.after.size()) + " parents, the graph has " +
                    std::to_string(want.size()) + " (or in another order)");
      }
    }
  }
  t.tightest = tightest == kNever ? 0 : tightest;
}

// Check 2 on one job's claims and completes: one accepted complete at most,
// no claim after it was answered, fences unique and in real-time order, no
// complete accepted once a newer claim was answered. Counts the refusals.
void check_job(const Graph& g, const std::vector<Rec>& h, const ByJob& by, int j,
               std::vector<std::string>& v, Tally& t) {
  const std::string& id = g.ids[u(j)];
  const auto& claims = by.claims[u(j)];
  const Rec* done = nullptr;
  for (std::size_t ci : by.completes[u(j)]) {
    const Rec& c = h[ci];
    if (!c.accepted) continue;
    if (done)
      v.push_back(id + " has two accepted completes, fences " + std::to_string(done->fence) +
                  " and " + std::to_string(c.fence));
    if (!done || c.sent < done->sent) done = &c;
    for (std::size_t ki : claims) {
      if (h[ki].fence > c.fence && h[ki].received < c.sent) {
        v.push_back(id + ": complete with fence " + std::to_string(c.fence) +
                    " accepted although fence " + std::to_string(h[ki].fence) +
                    " had been handed out before it was sent");
      }
    }
  }
  for (std::size_t ci : by.completes[u(j)]) {
    const Rec& c = h[ci];
    if (c.outcome != Outcome::ok || c.accepted) continue;
    ++t.refused;
    if (!done || c.sent < done->sent) ++t.refused_before_done;
  }
  for (std::size_t a = 0; a < claims.size(); ++a) {
    const Rec& x = h[claims[a]];
    if (done && x.sent > done->received) {
      v.push_back(id + " claimed again (fence " + std::to_string(x.fence) +
                  ") after its complete was acknowledged");
    }
    for (std::size_t b = 0; b < claims.size(); ++b) {
      const Rec& y = h[claims[b]];
      if (a < b && x.fence == y.fence) {
        v.push_back(id + ": fence " + std::to_string(x.fence) + " handed out twice");
      } else if (x.received < y.sent && x.fence >= y.fence) {
        v.push_back(id + ": fence " + std::to_string(y.fence) + " handed out after fence " +
                    std::to_string(x.fence));
      }
    }
  }
}

// Check 2 at the end: `results` after the last kill shows each job done with
// the result of its accepted complete, or with no accepted one, of a lost one.
void check_final(const Graph& g, const std::vector<Rec>& h, const ByJob& by,
                 const std::vector<std::optional<fenceq::JobOutcome>>& final,
                 std::vector<std::string>& v) {
  if (final.size() != u(g.size())) {
    v.push_back("the final `results` could not be read");
    return;
  }
  int not_done = 0;
  for (int j = 0; j < g.size(); ++j) {
    const std::string& id = g.ids[u(j)];
    const auto& f = final[u(j)];
    if (!f || f->status != fenceq::JobStatus::done) {
      if (++not_done <= 10) v.push_back(id + " is not done at the end");
      continue;
    }
    const Rec* accepted = nullptr;
    bool from_lost = false;
    for (std::size_t ci : by.completes[u(j)]) {
      if (h[ci].accepted) accepted = &h[ci];
      if (h[ci].outcome == Outcome::lost && f->result == h[ci].result) from_lost = true;
    }
    if (accepted ? f->result != accepted->result : !from_lost) {
      v.push_back(id + " is done with result " + f->result.value_or("(nil)") + ", which " +
                  (accepted ? "is not that of its accepted complete, " + accepted->result
                            : std::string("no accepted or lost complete sent")));
    }
  }
  if (not_done > 10) v.push_back(std::to_string(not_done) + " jobs in all are not done at the end");
}

std::vector<std::string> check(const Graph& g, const std::vector<Rec>& h,
                               const std::vector<std::optional<fenceq::JobOutcome>>& final,
                               Tally& t) {
  std::vector<std::string> v;
  for (const Rec& r : h) {
    const bool ok = r.outcome == Outcome::ok, lost = r.outcome == Outcome::lost;
    if (r.kind == Kind::claim) {
      t.claims += ok && r.job >= 0;
      t.claims_empty += ok && r.job < 0 && r.stray.empty();
      t.claims_lost += lost;
      t.claims_failed += r.outcome == Outcome::failed;
      if (!r.stray.empty())
        v.push_back("claim_next answered " + r.stray + ", not a job of the graph");
    } else if (r.kind == Kind::complete) {
      t.accepted += r.accepted;
      t.lost += lost;
      t.failed += r.outcome == Outcome::failed;
    }
  }
  const ByJob by(g, h);
  check_parents(g, h, by, v, t);
  for (int j = 0; j < g.size(); ++j) check_job(g, h, by, j, v, t);
  check_final(g, h, by, final, v);
  return v;
}

// ------------------------------------------------------------ the workload

struct Shared {
  Shared(const Config& c, const Graph& gr, std::vector<std::string> e)
      : cfg(c), g(gr), endpoints(std::move(e)) {}
  const Config& cfg;
  const Graph& g;
  std::vector<std::string> endpoints;
  const SteadyClock::time_point t0 = SteadyClock::now();
  const SteadyClock::time_point deadline = t0 + seconds(cfg.seconds);  // --seconds
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> unexpected_errors{0};
  double since() const { return std::chrono::duration<double>(SteadyClock::now() - t0).count(); }
};

// A job's own work time: 5 % of the jobs are heavy (0.1 to 0.5 s, whoever
// holds them), the rest take up to 3 ms.
std::chrono::microseconds work_time(std::uint64_t seed, int job, std::mt19937_64& rng) {
  std::uint64_t x = (seed + static_cast<std::uint64_t>(job)) * 0x9e3779b97f4a7c15ULL;
  x ^= x >> 31;
  if (x % 100 < 5) return std::chrono::microseconds(100'000 + (x >> 8) % 400'000);
  return std::chrono::microseconds(rng() % 3000);
}

class Worker {
 public:
  Worker(Shared& sh, int id) : sh_(sh), id_(id), rng_(sh.cfg.seed * 1000 + u(id)) { connect(); }

  std::vector<Rec> log;

  void run() {
    while (!sh_.stop.load()) {
      if (auto got = claim()) work(got->first, got->second);
    }
  }

  // Enqueues the graph batch by batch, each until a reply says what became
  // of it (after a lost reply, the same batch again: what it created then
  // answers false). "" when done, else why not.
  std::string enqueue_all() {
    const auto& starts = sh_.g.batch_starts;
    for (std::size_t b = 0; b < starts.size(); ++b) {
      const int from = starts[b];
      const int to = b + 1 < starts.size() ? starts[b + 1] : sh_.g.size();
      std::vector<fenceq::JobSpec> specs;
      for (int j = from; j < to; ++j) {
        fenceq::JobSpec s;
        s.id = sh_.g.ids[u(j)];
        s.queue = kQueue;
        s.max_attempts = 0;  // stalls and kills must not make a job dead (and cancel its subtree)
        for (int p : sh_.g.parents[u(j)]) s.parents.push_back(sh_.g.ids[u(p)]);
        specs.push_back(std::move(s));
      }
      for (;;) {
        if (SteadyClock::now() > sh_.deadline) {
          return "the time ran out while enqueueing batch " + std::to_string(b);
        }
        Rec r;
        r.kind = Kind::enqueue;
        r.job = static_cast<int>(b);
        const Rec& done = record(std::move(r), [&](Rec&) { (void)client_->enqueue_many(specs); });
        if (done.outcome == Outcome::ok) break;
        if (done.error.rfind("invalid_argument", 0) == 0 ||
            done.error.rfind("bad_request", 0) == 0) {
          return "the daemon refused batch " + std::to_string(b) + ": " + done.error;
        }
        std::this_thread::sleep_for(50ms);
      }
    }
    return "";
  }

 private:
  void connect() {
    client_ = std::make_unique<fenceq::Client>(
        sh_.endpoints[u(at_)],
        fenceq::ClientOptions{std::chrono::milliseconds(sh_.cfg.timeout_ms)});
  }

  // One recorded request; `fn` performs it and fills in the reply. After a
  // request without a good reply the client is dropped with whatever it
  // still queues (linger 0), and the worker moves on to the next sidecar.
  template <typename Fn>
  const Rec& record(Rec r, Fn fn) {
    r.worker = id_;
    r.endpoint = at_;
    r.sent = sh_.since();
    try {
      fn(r);
      r.outcome = Outcome::ok;
    } catch (const fenceq::Error& e) {
      r.error = e.what();
      const std::string& code = e.code();
      const bool lost = code == "timeout" || code == "transport" || code == "outcome_unknown";
      r.outcome = lost ? Outcome::lost : Outcome::failed;
      // Only a crash, a store failure or a missing socket may refuse these requests.
      if (!lost && code != "unavailable" && code != "internal" && code != "unreachable" &&
          r.kind != Kind::enqueue) {
        sh_.unexpected_errors.fetch_add(1);
        std::cerr << "fenceq-graph: unexpected error reply: " << e.what() << "\n";
      }
    }
    r.received = sh_.since();
    log.push_back(std::move(r));
    if (log.back().outcome != Outcome::ok) {
      at_ = (at_ + 1) % static_cast<int>(sh_.endpoints.size());
      connect();
      std::this_thread::sleep_for(20ms);
    }
    return log.back();
  }

  std::optional<std::pair<int, std::int64_t>> claim() {
    const Rec& done = record(Rec{}, [&](Rec& o) {  // a Rec is a claim unless told
      auto job = client_->claim_next(kQueue, me_, sh_.cfg.ttl, kWait);
      if (!job) return;
      o.fence = job->fence;
      o.after = std::move(job->after);
      const auto it = sh_.g.index.find(job->id);
      o.job = it == sh_.g.index.end() ? -1 : it->second;
      if (o.job < 0) o.stray = job->id;
    });
    if (done.outcome != Outcome::ok || done.job < 0) return std::nullopt;
    return std::make_pair(done.job, done.fence);
  }

  // Holds the job (its work time; now and then a stall past the lease: 15 %
  // of heavy jobs' holds, 1 % of the others'), then completes it, and after
  // a lost reply completes it once more.
  void work(int job, std::int64_t fence) {
    auto hold = work_time(sh_.cfg.seed, job, rng_);
    if (rng_() % 1000 < (hold >= 100ms ? 150u : 10u)) {
      std::this_thread::sleep_for(
          seconds(sh_.cfg.ttl + 0.02 + static_cast<double>(rng_() % 400) / 1000));
    } else {
      std::this_thread::sleep_for(hold);
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      Rec r;
      r.kind = Kind::complete;
      r.job = job;
      r.fence = fence;
      r.result = me_ + "-" + std::to_string(log.size());  // names this request alone
      const Rec& done = record(std::move(r), [&](Rec& o) {
        o.accepted = client_->complete(sh_.g.ids[u(job)], me_, fence, o.result);
      });
      if (done.outcome != Outcome::lost || sh_.stop.load()) break;
    }
  }

  Shared& sh_;
  int id_;
  std::mt19937_64 rng_;
  std::string me_ = "w" + std::to_string(id_);             // the owner name
  int at_ = id_ % static_cast<int>(sh_.endpoints.size());  // which endpoint
  std::unique_ptr<fenceq::Client> client_;
};

// `results` of every job (by index; nullopt for a job it did not name), in
// chunks of 1000, from any endpoint that answers (unrecorded: the watch and
// the final read). Empty when none answered.
std::vector<std::optional<fenceq::JobOutcome>> read_results(const Shared& sh, int& at) {
  std::vector<std::optional<fenceq::JobOutcome>> out(u(sh.g.size()));
  fenceq::Client c(sh.endpoints[u(at)], fenceq::ClientOptions{2000ms});
  try {
    for (auto from = sh.g.ids.begin(); from != sh.g.ids.end();) {
      const auto to = from + std::min<std::ptrdiff_t>(1000, sh.g.ids.end() - from);
      for (auto& [id, outcome] : c.results({from, to})) {
        if (auto it = sh.g.index.find(id); it != sh.g.index.end()) out[u(it->second)] = outcome;
      }
      from = to;
    }
  } catch (const fenceq::Error&) {
    at = (at + 1) % static_cast<int>(sh.endpoints.size());
    return {};
  }
  return out;
}

bool all_done(const std::vector<std::optional<fenceq::JobOutcome>>& r) {
  return !r.empty() && std::all_of(r.begin(), r.end(), [](const auto& o) {
    return o && o->status == fenceq::JobStatus::done;
  });
}

// The daemons and what happened to them.
struct Crashes {
  std::vector<std::unique_ptr<fenceq::test::TempDir>> dirs;
  std::vector<std::unique_ptr<fenceq::test::Daemon>> daemons;
  int kills = 0, restarts = 0;
  std::string failure;  // the first restart that failed

  void crash(std::size_t i, std::mt19937_64& rng) {
    if (!failure.empty()) return;
    try {
      daemons[i]->kill9();
      ++kills;
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 50));
      daemons[i]->restart();
      ++restarts;
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
};

// The killer: every kill_every seconds (± 25 %) one daemon killed -9 and
// restarted, until the run stops.
void kill_loop(Shared& sh, Crashes& cr) {
  std::mt19937_64 rng(sh.cfg.seed ^ 0x6b696c6c);
  for (;;) {
    const double gap = sh.cfg.kill_every * (0.75 + static_cast<double>(rng() % 500) / 1000);
    const auto until = SteadyClock::now() + seconds(gap);
    while (!sh.stop.load() && SteadyClock::now() < until) std::this_thread::sleep_for(10ms);
    if (sh.stop.load() || !cr.failure.empty()) return;
    cr.crash(rng() % cr.daemons.size(), rng);
  }
}

// ------------------------------------------------------------- self-check

// The checker on small hand-written histories of a -> c <- b (a, b, c are
// g0000, g0001, g0002), each with the verdict it must reach: proof that the
// violations it looks for would be seen.
struct Case {
  const char* name;
  std::vector<Rec> h;
  std::vector<std::optional<fenceq::JobOutcome>> final;
  bool violation;
};

std::vector<Case> self_check_cases(const Graph& g) {
  const int a = 0, b = 1, c = 2;
  auto claim = [&](int job, std::int64_t fence, double sent) {
    Rec r;
    r.job = job;
    r.fence = fence;
    r.sent = sent;
    r.received = sent + 0.1;
    if (job == c) r.after = {g.ids[0], g.ids[1]};
    return r;
  };
  auto complete = [&](int job, std::int64_t fence, Outcome o, bool accepted, double sent,
                      std::string result) {
    Rec r = claim(job, fence, sent);
    r.kind = Kind::complete;
    r.outcome = o;
    r.accepted = accepted;
    r.result = std::move(result);
    return r;
  };
  using fenceq::JobOutcome, fenceq::JobStatus;
  auto done = [](std::string rc) {
    return std::vector<std::optional<JobOutcome>>{JobOutcome{JobStatus::done, "ra"},
                                                  JobOutcome{JobStatus::done, "rb"},
                                                  JobOutcome{JobStatus::done, std::move(rc)}};
  };
  // a and b claimed and completed; c's claim and complete follow in each case.
  const std::vector<Rec> ab{claim(a, 1, 0), claim(b, 1, 0),
                            complete(a, 1, Outcome::ok, true, 1, "ra")};
  auto with = [&](std::vector<Rec> more) {
    std::vector<Rec> h = ab;
    h.insert(h.end(), more.begin(), more.end());
    return h;
  };
  auto not_done = done("");
  not_done[2] = JobOutcome{JobStatus::ready, std::nullopt};
  const Rec b_done = complete(b, 1, Outcome::ok, true, 1.5, "rb");
  const Rec c_done = complete(c, 1, Outcome::ok, true, 3, "rc");
  return {
      {"a valid history", with({b_done, claim(c, 1, 2), c_done}), done("rc"), false},
      {"a lost complete may have committed",
       with({complete(b, 1, Outcome::lost, false, 1.5, "rb"), claim(c, 1, 1.6), c_done}),
       done("rc"), false},
      {"c claimed before b's complete was sent", with({claim(c, 1, 1.1), b_done, c_done}),
       done("rc"), true},
      {"a stale complete of b unblocked c",
       with({complete(b, 1, Outcome::ok, false, 1.5, "x"), claim(c, 1, 1.6), claim(b, 2, 1.6),
             complete(b, 2, Outcome::ok, true, 1.8, "rb"), c_done}),
       done("rc"), true},
      {"two accepted completes",
       with({complete(a, 1, Outcome::ok, true, 1.2, "ra2"), b_done, claim(c, 1, 2), c_done}),
       done("rc"), true},
      {"a refused complete's result stored",
       with({b_done, claim(c, 1, 2), c_done, complete(c, 1, Outcome::ok, false, 3.5, "late")}),
       done("late"), true},
      {"c not done at the end", with({b_done}), not_done, true},
      {"a's fence handed out again", with({claim(a, 1, 0.5), b_done, claim(c, 1, 2), c_done}),
       done("rc"), true},
      {"a claimed after its complete was acknowledged",
       with({claim(a, 2, 1.2), b_done, claim(c, 1, 2), c_done}), done("rc"), true},
      {"a complete accepted after a newer fence was handed out",
       with({claim(b, 2, 1), b_done, claim(c, 1, 2), c_done}), done("rc"), true},
  };
}

int self_check() {
  std::mt19937_64 rng(1);
  const Graph g = name_and_batch({{}, {}, {0, 1}}, rng);
  const auto cases = self_check_cases(g);
  int failed = 0;
  for (const Case& k : cases) {
    Tally t;
    const auto v = check(g, k.h, k.final, t);
    std::printf("self-check: %s: %zu violation(s)%s%s\n", k.name, v.size(),
                v.empty() ? "" : ", first: ", v.empty() ? "" : v.front().c_str());
    if (v.empty() == k.violation) {
      ++failed;
      std::printf("self-check: FAILED: %s expected\n", k.violation ? "a violation" : "none");
    }
  }
  std::printf("self-check: %zu cases, %d failed\n", cases.size(), failed);
  return failed == 0 ? 0 : 1;
}

// ------------------------------------------------------------------- main

bool parse(int argc, char** argv, Config& c) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value for " + a);
      return argv[++i];
    };
    // clang-format off
    if (a == "--workers") c.workers = std::stoi(value());
    else if (a == "--seconds") c.seconds = std::stod(value());
    else if (a == "--kill-every") c.kill_every = std::stod(value());
    else if (a == "--ttl") c.ttl = std::stod(value());
    else if (a == "--seed") c.seed = std::stoull(value());
    else if (a == "--timeout-ms") c.timeout_ms = std::stoi(value());
    else if (a == "--pg") c.pg = true;
    else if (a == "--sidecars") c.sidecars = std::stoi(value());
    else if (a == "--self-check") c.self_check = true;
    else return false;
    // clang-format on
  }
  return c.workers > 0 && c.workers <= 64 && c.seconds > 0 && c.kill_every > 0 && c.ttl > 0 &&
         c.timeout_ms > 0 && c.sidecars > 0 && c.sidecars <= 16;
}

// What the run came to, besides its history.
struct Run {
  std::string setup_failure;  // the graph could not be enqueued
  bool finished = false;      // every job done within --seconds
  double graph_seconds = 0;   // when the last job was seen done (or the run stopped)
  std::vector<std::optional<fenceq::JobOutcome>> final;  // results after the last kill
  int stop_status = -1;  // the worst of the daemons' exits on SIGTERM
};

// The workload: the workers and the killer start, the enqueuer (the last
// worker) enqueues the graph while they run, then the watch: `results`
// every half second says whether all jobs are done. Ends there, or at
// --seconds.
void run_workload(Shared& sh, Crashes& cr, std::vector<std::unique_ptr<Worker>>& workers,
                  Run& out) {
  std::vector<std::thread> threads;
  for (int i = 0; i < sh.cfg.workers; ++i) {
    threads.emplace_back([&, i] { workers[u(i)]->run(); });
  }
  std::thread killer([&] { kill_loop(sh, cr); });
  out.setup_failure = workers.back()->enqueue_all();
  int at = 0;
  while (out.setup_failure.empty() && SteadyClock::now() < sh.deadline) {
    std::this_thread::sleep_for(500ms);
    if (all_done(read_results(sh, at))) {
      out.finished = true;
      break;
    }
  }
  sh.stop = true;
  out.graph_seconds = sh.since();
  for (auto& t : threads) t.join();
  killer.join();

  // The end: one more kill -9 of a random daemon, every job's result read
  // back, then SIGTERM (exit 0 wanted).
  std::mt19937_64 rng(sh.cfg.seed ^ 0x656e64);
  for (auto& d : cr.daemons) {
    if (!d->running()) cr.failure = "a daemon was not running at the end";
  }
  cr.crash(rng() % cr.daemons.size(), rng);
  for (const auto until = SteadyClock::now() + 30s;
       out.final.empty() && SteadyClock::now() < until;) {
    out.final = read_results(sh, at);
    if (out.final.empty()) std::this_thread::sleep_for(100ms);
  }
  out.stop_status = 0;
  for (auto& d : cr.daemons) out.stop_status = std::max(out.stop_status, d->stop(SIGTERM));
}

// Writes every violation and the history, in order of sending, for a rerun.
void dump(const Config& cfg, const Graph& g, std::vector<Rec> all,
          const std::vector<std::string>& v) {
  for (std::size_t i = 0; i < v.size() && i < 50; ++i) std::cout << "VIOLATION " << v[i] << "\n";
  const std::string path = "/tmp/fenceq-graph-" + std::to_string(cfg.seed) + ".txt";
  std::ofstream out(path);
  for (const auto& x : v) out << "VIOLATION " << x << "\n";
  for (int j = 0; j < g.size(); ++j) {
    out << "JOB " << g.ids[u(j)] << " after";
    for (int p : g.parents[u(j)]) out << " " << g.ids[u(p)];
    out << "\n";
  }
  std::sort(all.begin(), all.end(), [](const Rec& a, const Rec& b) { return a.sent < b.sent; });
  for (const Rec& r : all) out << describe(g, r) << "\n";
  std::cout << "violations and history written to " << path << " (rerun with --seed " << cfg.seed
            << ")\n";
}

// Checks the history, prints the summary line and every failure; the exit code.
int verdict(const Shared& sh, const Crashes& cr, const Run& run, const std::vector<Rec>& all) {
  const Graph& g = sh.g;
  Tally t;
  auto v = check(g, all, run.final, t);
  if (sh.unexpected_errors.load() > 0) {
    v.push_back(std::to_string(sh.unexpected_errors.load()) +
                " requests got an error reply no valid request should get");
  }
  if (run.stop_status != 0) v.push_back("a fenceqd did not exit 0 on SIGTERM at the end");
  std::printf(
      "graph: jobs=%d edges=%zu chains=%d diamonds=%d fan_in=%d batches=%zu workers=%d "
      "claims=%llu claims_empty=%llu claims_lost=%llu claims_failed=%llu "
      "completes_accepted=%llu completes_refused=%llu refused_before_done=%llu "
      "completes_lost=%llu completes_failed=%llu tightest_claim_ms=%.1f kills=%d restarts=%d "
      "sidecars=%zu all_done=%s graph_seconds=%.1f violations=%zu seed=%llu seconds=%.1f\n",
      g.size(), g.edges, g.chains, g.diamonds, kFanIn, g.batch_starts.size(), sh.cfg.workers,
      t.claims, t.claims_empty, t.claims_lost, t.claims_failed, t.accepted, t.refused,
      t.refused_before_done, t.lost, t.failed, t.tightest * 1000, cr.kills, cr.restarts,
      cr.daemons.size(), run.finished ? "yes" : "no", run.graph_seconds, v.size(),
      static_cast<unsigned long long>(sh.cfg.seed), sh.since());
  int rc = v.empty() ? 0 : 1;
  if (rc != 0) dump(sh.cfg, g, all, v);
  auto fail = [&](const std::string& why) {
    std::cout << "FAILED: " << why << "\n";
    rc = 1;
  };
  if (!run.setup_failure.empty()) fail(run.setup_failure);
  if (!run.finished) fail("not every job was done within " + std::to_string(sh.cfg.seconds) + " s");
  if (!cr.failure.empty() || cr.restarts != cr.kills || cr.kills < 2) {
    fail(std::to_string(cr.kills) + " kills, " + std::to_string(cr.restarts) + " restarts" +
         (cr.failure.empty() ? "" : ": " + cr.failure));
  }
  if (t.refused == 0) fail("no stale complete was refused: staleness went untested");
  if (t.refused > 0 && t.refused_before_done == 0) {
    fail("every refused complete came after its job was done: none could have unblocked a child");
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  try {
    if (!parse(argc, argv, cfg)) {
      std::cerr << "usage: fenceq-graph [--workers N] [--seconds S] [--kill-every S] [--ttl S] "
                   "[--seed N] [--timeout-ms MS] [--pg --sidecars N] [--self-check]\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "fenceq-graph: " << e.what() << "\n";
    return 2;
  }
  if (cfg.self_check) return self_check();
  if (cfg.seed == 0) cfg.seed = std::random_device{}();
  ::signal(SIGPIPE, SIG_IGN);
  const Graph g = make_graph(cfg.seed);

  // One daemon on a SQLite file, or --pg: sidecars sharing one schema. The
  // daemon's own clock: leases run out in real time.
  std::unique_ptr<fenceq::test::PgSchema> schema;
  Crashes cr;
  std::vector<std::string> endpoints;
  try {
    if (cfg.pg) schema = std::make_unique<fenceq::test::PgSchema>();
    for (int i = 0; i < (cfg.pg ? cfg.sidecars : 1); ++i) {
      cr.dirs.push_back(std::make_unique<fenceq::test::TempDir>());
      cr.daemons.push_back(std::make_unique<fenceq::test::Daemon>(
          *cr.dirs.back(), std::vector<std::string>{"--clock", "server"}, true,
          schema ? schema->uri() : ""));
      endpoints.push_back(cr.daemons.back()->endpoint());
    }
  } catch (const std::exception& e) {
    std::cerr << "fenceq-graph: " << e.what() << "\n";
    return 1;
  }
  Shared sh(cfg, g, endpoints);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i <= cfg.workers; ++i) workers.push_back(std::make_unique<Worker>(sh, i));
  Run run;
  run_workload(sh, cr, workers, run);
  std::vector<Rec> all;
  for (auto& w : workers) all.insert(all.end(), w->log.begin(), w->log.end());
  return verdict(sh, cr, run, all);
}
