// fenceq-ceiling: the SQLite store in-process, without the daemon, the
// transport or a client: the most any server built on these statements can
// do on this disk. It runs the store's own claim_next and complete (the
// statements fenceqd runs) on a file opened like fenceqd's (WAL, --sync
// full: synchronous=FULL), --group requests of --batch jobs a transaction,
// as K clients with one request in flight each could at best share one
// group commit.
//
//   fenceq-ceiling --db /tmp/c.db --jobs 200000 --batch 32 --group 8
//
// Prints one JSON line: jobs/s, transactions/s. With --renews R, each
// request also renews every job it holds R times (one renew a job, R
// transactions) before it completes them: renews/s too.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/memory_policy.hpp"
#include "storage/sqlite/sqlite_store.hpp"

int main(int argc, char** argv) {
  fenceq::daemon::apply_memory_policy();  // as fenceqd runs
  CLI::App app{"fenceq-ceiling: claim + complete on the SQLite store in-process"};
  std::string db;
  int jobs = 200000, batch = 32, group = 8;
  std::string sync = "full";
  int renews = 0;
  int groups = 0;
  app.add_option("--db", db, "a new SQLite file")->required();
  app.add_option("--jobs", jobs)->check(CLI::Range(1, 10000000));
  app.add_option("--batch", batch, "jobs a claim takes")->check(CLI::Range(1, 1000));
  app.add_option("--group", group, "requests a transaction")->check(CLI::Range(1, 1000));
  app.add_option("--sync", sync)->check(CLI::IsMember({"full", "normal"}));
  app.add_option("--renews", renews, "renews of each held job before its complete")
      ->check(CLI::Range(0, 1000));
  app.add_option("--groups", groups, "job n of group g<n % GROUPS> (claims take groups in turn)")
      ->check(CLI::Range(0, 10000000));
  CLI11_PARSE(app, argc, argv);
  std::filesystem::remove(db);
  using fenceq::daemon::SqliteStore;
  using fenceq::daemon::SyncMode;
  SqliteStore s(db, sync == "full" ? SyncMode::full : SyncMode::normal);
  // The jobs, not measured.
  for (int n = 0; n < jobs;) {
    s.begin();
    for (int k = 0; k < 1000 && n < jobs; ++k, ++n) {
      // Appended: `"j" + std::string&&` makes GCC 12 warn of a memcpy overlap
      // that cannot happen (-Wrestrict, GCC bug 105329).
      std::string id = "j";
      id += std::to_string(n);
      fenceq::daemon::NewJob j;
      j.id = id;
      j.queue = "q";
      std::string group = "g";  // appended, as id above
      group += std::to_string(n % std::max(groups, 1));
      if (groups > 0) j.group = group;
      s.enqueue(j, 1.0);
    }
    s.commit();
  }
  const auto t0 = std::chrono::steady_clock::now();
  long done = 0, transactions = 0, renewed = 0;
  double renew_secs = 0;
  std::vector<std::vector<fenceq::ClaimedJob>> held(static_cast<std::size_t>(group));
  const std::optional<std::string> result = "r";
  for (bool more = true; more;) {
    // --renews: R transactions of renews of what each request holds.
    const auto r0 = std::chrono::steady_clock::now();
    for (int r = 0; r < renews; ++r) {
      // Through Store::run, as the daemon's renews go.
      std::vector<std::string> owners;
      std::vector<fenceq::daemon::Call> calls;
      for (int g = 0; g < group; ++g) owners.emplace_back("w").append(std::to_string(g));
      for (int g = 0; g < group; ++g) {
        for (const auto& j : held[static_cast<std::size_t>(g)]) {
          fenceq::daemon::RenewParams p;
          p.id = j.id;
          p.owner = owners[static_cast<std::size_t>(g)];
          p.fence = j.fence;
          p.now = 2.0;
          p.ttl = 60.0;
          calls.push_back({p, calls.size()});
        }
      }
      std::vector<fenceq::daemon::CallResult> out;
      s.begin();
      s.run(calls, out, false);
      s.commit();
      for (const auto& o : out) renewed += o.ok ? 1 : 0;
      ++transactions;
    }
    renew_secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    // One transaction: each of --group requests completes what it held and
    // takes the next --batch jobs (complete_many with next).
    s.begin();
    more = false;
    for (int g = 0; g < group; ++g) {
      const std::string owner = "w" + std::to_string(g);
      for (const auto& j : held[static_cast<std::size_t>(g)]) {
        done += s.run_one(fenceq::daemon::CompleteParams{{j.id, owner, j.fence}, 2.0, &result}).ok ? 1 : 0;
      }
      held[static_cast<std::size_t>(g)] = s.claim_next("q", owner, 2.0, 60.0, batch);
      more = more || !held[static_cast<std::size_t>(g)].empty();
    }
    s.commit();
    ++transactions;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"target\": \"sqlite-inprocess\", \"groups\": %d, \"sync\": \"%s\", \"batch\": %d, \"group\": %d, "
              "\"jobs\": %ld, \"seconds\": %.3f, \"jobs_per_s\": %.0f, \"commits_per_s\": %.0f, "
              "\"renews\": %ld, \"renews_per_s\": %.0f}\n",
              groups, sync.c_str(), batch, group, done, secs, done / secs, transactions / secs, renewed,
              renew_secs > 0 ? renewed / renew_secs : 0.0);
  return done == jobs && renewed == static_cast<long>(renews) * jobs ? 0 : 1;
}
