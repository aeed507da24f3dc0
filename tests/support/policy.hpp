// Test support for queue settings (queue_config): workers racing on a
// limited queue, and the histories the limits are checked against. Shared by
// the one-daemon suite (test_policy.cpp, both stores) and the sidecars suite
// (three fenceqd on one PostgreSQL database); times of the client clock for
// periodic jobs (test_policy.cpp, test_abuse.cpp).
#pragma once

#include <catch2/catch.hpp>
#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <ctime>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon.hpp"
#include "vectors.hpp"

namespace fenceq::test {

// Unix seconds of a UTC time written as `date -u -d ... +%s` would read it.
inline double utc(int y, int mo, int d, int h, int mi) {
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  return static_cast<double>(::timegm(&tm));
}

// The jobs of `queue` by id once the daemon's clock reached `now` (client
// clock: the first request moves it there; the daemon runs the schedules
// that came due before it serves the second).
inline std::vector<std::string> ids_at(const Daemon& d, const std::string& queue, double now) {
  const nlohmann::json list{{"op", "list"}, {"queue", queue}, {"limit", 1000}, {"now", now}};
  REQUIRE(raw(d, list).value("ok", false));
  auto r = raw(d, list);
  REQUIRE(r.value("ok", false));
  std::vector<std::string> out;
  for (const auto& j : r["result"]) out.push_back(j["id"].get<std::string>());
  return out;
}


// One lease as its worker saw it, in seconds of the test's steady clock:
// from the claim's reply to the complete's request. The daemon's lease
// (claim committed .. complete committed) contains it, so leases that
// overlap here overlapped in the daemon too.
struct SeenLease {
  double claimed = 0, ended = 0;
  std::string id;
};

inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// `workers` threads, worker i on endpoints[i % size], each claiming from
// `queue` (a long-poll of up to 1 s), holding the job `hold`, completing it,
// until `jobs` jobs are done or `budget` passes. Errors (exceptions, refused
// completes) are counted in `errors`.
inline std::vector<SeenLease> race_workers(const std::vector<std::string>& endpoints,
                                           const std::string& queue, int workers, int jobs,
                                           std::chrono::milliseconds hold,
                                           std::chrono::seconds budget, std::atomic<int>& errors) {
  std::mutex mu;
  std::vector<SeenLease> seen;
  std::atomic<int> done{0};
  const auto until = std::chrono::steady_clock::now() + budget;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      try {
        Client c(endpoints[static_cast<std::size_t>(w) % endpoints.size()],
                 ClientOptions{std::chrono::seconds(10)});
        const std::string owner = "w" + std::to_string(w);
        while (done.load() < jobs && std::chrono::steady_clock::now() < until) {
          auto job = c.claim_next(queue, owner, 60, 1);
          if (!job) continue;
          SeenLease l;
          l.claimed = steady_seconds();
          l.id = job->id;
          std::this_thread::sleep_for(hold);
          l.ended = steady_seconds();
          if (!c.complete(job->id, owner, job->fence, std::string("ok"))) errors.fetch_add(1);
          done.fetch_add(1);
          std::lock_guard lock(mu);
          seen.push_back(std::move(l));
        }
      } catch (const std::exception&) {
        errors.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  return seen;
}

// The most leases that held at one instant.
inline int most_at_once(const std::vector<SeenLease>& leases) {
  std::vector<std::pair<double, int>> events;  // (time, +1 claim / -1 end); ends first on ties
  for (const auto& l : leases) {
    events.emplace_back(l.claimed, 1);
    events.emplace_back(l.ended, -1);
  }
  std::sort(events.begin(), events.end());
  int now = 0, most = 0;
  for (const auto& [t, d] : events) {
    now += d;
    most = std::max(most, now);
  }
  return most;
}

// The claim times of `ids` as the daemon took them: a lease of `ttl`
// seconds, never renewed, ends at claim time + ttl.
inline std::vector<double> claim_times(Client& c, const std::vector<std::string>& ids, double ttl) {
  std::vector<double> out;
  for (const auto& id : ids) {
    auto d = c.job(id);
    if (d) out.push_back(d->info.until - ttl);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The most claims in any window (t - per, t] of `times` (sorted).
inline int most_in_window(const std::vector<double>& times, double per) {
  int most = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    // 1e-6: claim times come back as (now + ttl) - ttl, within a few ulps of now.
    while (times[first] <= times[i] - per + 1e-6) ++first;
    most = std::max(most, static_cast<int>(i - first + 1));
  }
  return most;
}

}  // namespace fenceq::test
