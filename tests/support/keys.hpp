// Test support for unique keys (issue 31, C3.10): enqueuers racing on a few
// keys while workers drain the queue, and the history uniqueness is checked
// against. Shared by the one-daemon suite (test_keys.cpp, both stores) and the
// sidecars suite (three fenceqd on one PostgreSQL database).
#pragma once

#include <catch2/catch.hpp>
#include <fenceq/client.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "policy.hpp"

namespace fenceq::test {

// One job created under a key, in seconds of the test's steady clock: from
// the reply that created it (it was unfinished from then on, at the latest)
// to the request that completed it (it was unfinished until then, at the
// earliest). The daemon's interval (insert committed .. complete committed)
// contains it, so two such intervals of one key that overlap here overlapped
// in the daemon: two unfinished jobs of one key at once.
struct KeyedJob {
  std::string id, key;
  double created = 0, completing = 0;
};

struct KeyedHistory {
  std::vector<KeyedJob> created;  // completing == 0: never completed in the run
  // Answers that created nothing: (key, the id answered as the key's holder).
  std::vector<std::pair<std::string, std::string>> skipped;
  int errors = 0;
};

// `enqueuers` threads each enqueue `each` jobs (ids unique to the run) of
// `queue` under one of `keys` keys (k0..), round robin from a start of their
// own, while `workers` threads claim and complete them; enqueuer and worker i
// on endpoints[i % size]. Bounded by `budget`.
inline KeyedHistory race_keys(const std::vector<std::string>& endpoints, const std::string& queue,
                              int enqueuers, int keys, int each, int workers,
                              std::chrono::seconds budget) {
  KeyedHistory h;
  std::mutex mu;
  std::map<std::string, std::size_t> by_id;  // created id -> h.created index
  std::vector<std::pair<std::string, double>> completing;  // (id, when its complete was sent)
  std::atomic<int> errors{0};
  std::atomic<int> enqueuers_left{enqueuers};
  const auto until = std::chrono::steady_clock::now() + budget;
  std::vector<std::thread> threads;
  for (int e = 0; e < enqueuers; ++e) {
    threads.emplace_back([&, e] {
      try {
        Client c(endpoints[static_cast<std::size_t>(e) % endpoints.size()],
                 ClientOptions{std::chrono::seconds(10)});
        for (int i = 0; i < each && std::chrono::steady_clock::now() < until; ++i) {
          EnqueueOptions o;
          o.queue = queue;
          o.key = "k" + std::to_string((e * 7 + i) % keys);
          const std::string id = "e" + std::to_string(e) + "-" + std::to_string(i);
          const auto r = c.enqueue_unique(id, o);
          const double t = steady_seconds();
          std::lock_guard lock(mu);
          if (r.created) {
            if (r.id != id) errors.fetch_add(1);
            by_id[id] = h.created.size();
            h.created.push_back({id, *o.key, t, 0});
          } else {
            h.skipped.emplace_back(*o.key, r.id);
          }
        }
      } catch (const std::exception&) {
        errors.fetch_add(1);
      }
      enqueuers_left.fetch_sub(1);
    });
  }
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      try {
        Client c(endpoints[static_cast<std::size_t>(w) % endpoints.size()],
                 ClientOptions{std::chrono::seconds(10)});
        const std::string owner = "w" + std::to_string(w);
        while (std::chrono::steady_clock::now() < until) {
          auto job = c.claim_next(queue, owner, 60, 0.2);
          if (!job) {
            if (enqueuers_left.load() == 0) break;  // drained, nothing more coming
            continue;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          const double t = steady_seconds();
          if (!c.complete(job->id, owner, job->fence, std::string("ok"))) errors.fetch_add(1);
          // Noted apart: the enqueuer of this job may not have noted its
          // reply yet (it is claimed as soon as it is committed).
          std::lock_guard lock(mu);
          completing.emplace_back(job->id, t);
        }
      } catch (const std::exception&) {
        errors.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& [id, t] : completing) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      errors.fetch_add(1);  // claimed a job no enqueue was told it created
    } else {
      h.created[it->second].completing = t;
    }
  }
  h.errors = errors.load();
  return h;
}

// The pairs of jobs of one key that were unfinished at one moment (their
// intervals overlap; a job never completed is unfinished to the end), as
// "a & b" lines; empty when uniqueness held throughout. A job whose
// enqueuer read its reply only after a worker had sent its complete (the
// enqueuer's thread descheduled in between) has no moment it was surely
// unfinished: its interval is empty and proves nothing. Compared with the
// latest end of every earlier job of the key, not only the one before.
inline std::vector<std::string> key_overlaps(const KeyedHistory& h) {
  std::map<std::string, std::vector<const KeyedJob*>> by_key;
  for (const auto& j : h.created) by_key[j.key].push_back(&j);
  std::vector<std::string> out;
  constexpr double kOpen = 1e300;
  for (auto& [key, jobs] : by_key) {
    std::sort(jobs.begin(), jobs.end(),
              [](const KeyedJob* a, const KeyedJob* b) { return a->created < b->created; });
    double latest_end = -kOpen;
    const KeyedJob* latest = nullptr;
    for (const auto* j : jobs) {
      const double end = j->completing > 0 ? j->completing : kOpen;
      if (end <= j->created) continue;  // empty: see above
      if (latest && j->created < latest_end) out.push_back(key + ": " + latest->id + " & " + j->id);
      if (end > latest_end) {
        latest_end = end;
        latest = j;
      }
    }
  }
  return out;
}

}  // namespace fenceq::test
