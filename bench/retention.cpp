// fenceq-retention: what a retention (issue 33) costs a worker's round trips.
//
// N jobs are enqueued and completed in queue "old". Then one worker
// (claim_next + complete + enqueue of queue "work", one request in flight)
// runs in windows of --window-ms, alternately without a retention and with
// one (queue_config keep_done 1 s on "old", then kKeepForever to remove it),
// until every done job of "old" is gone: both sets of round trips see the
// same machine, minute by minute. A watcher reads the stats every 200 ms in
// both phases alike (a count is work for the daemon too).
//
//   fenceq-retention --endpoint ipc:///tmp/x/s --jobs 100000
//
// Prints one JSON line: the seconds the retention was on until the jobs
// were gone, the worker's p50, p99 and slowest round trip (ms) without and
// during, the ratio of the pooled p99s and the median of the per-window
// ratios (each window with the retention against the window before it).
// Issue 33's budget: the worker's p99 during at most twice the one without.
// tests/test_bulk.cpp asserts only that the worker is never starved.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "fenceq/client.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::duration<double, std::milli>;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

std::string job_id(const std::string& prefix, int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06d", i);
  return prefix + buf;
}

// `n` jobs of `queue`, enqueued 1,000 a request.
void enqueue(fenceq::Client& c, const std::string& queue, const std::string& prefix, int n) {
  std::vector<fenceq::JobSpec> specs;
  for (int i = 0; i < n; ++i) {
    fenceq::JobSpec s;
    s.id = job_id(prefix, i);
    s.queue = queue;
    specs.push_back(std::move(s));
    if (specs.size() == 1000 || i + 1 == n) {
      c.enqueue_many(specs);
      specs.clear();
    }
  }
}

// Every job of `queue` claimed and completed, 1,000 a request.
void complete_all(fenceq::Client& c, const std::string& queue) {
  for (;;) {
    auto got = c.claim_next_many(queue, "w", 60, 1000);
    if (got.empty()) return;
    std::vector<fenceq::LeaseItem> items;
    for (const auto& g : got) items.push_back({g.id, "w", g.fence, std::nullopt});
    c.complete_many(items);
  }
}

std::int64_t done_of(fenceq::Client& c, const std::string& queue) {
  for (const auto& q : c.stats().queues) {
    if (q.queue == queue) return q.done;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fenceq-retention: a worker's round trips while a retention removes done jobs"};
  std::string endpoint;
  int jobs = 100000, window_ms = 250;
  double deadline_s = 60;
  app.add_option("--endpoint", endpoint)->required();
  app.add_option("--jobs", jobs, "done jobs the retention removes")->check(CLI::Range(1, 10000000));
  app.add_option("--window-ms", window_ms)->check(CLI::Range(10, 10000));
  app.add_option("--deadline", deadline_s, "seconds at most")->check(CLI::Range(1.0, 3600.0));
  CLI11_PARSE(app, argc, argv);

  fenceq::Client c(endpoint);
  enqueue(c, "old", "o", jobs);
  complete_all(c, "old");
  enqueue(c, "work", "w", 200);

  fenceq::Client watch(endpoint);
  std::atomic<bool> retaining{false}, gone{false}, stop{false};
  std::thread watcher([&] {
    while (!stop) {
      const auto done = done_of(watch, "old");
      if (retaining && done == 0) gone = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });

  std::vector<double> base, during, window_p99[2];
  double took = 0;
  int n = 0;
  const auto deadline = Clock::now() + std::chrono::duration<double>(deadline_s);
  auto timed = [&](std::vector<double>& out, auto&& request) {
    const auto t = Clock::now();
    auto r = request();
    out.push_back(Millis(Clock::now() - t).count());
    return r;
  };
  for (bool on = false; !gone && Clock::now() < deadline; on = !on) {
    fenceq::QueueSettings keep;
    keep.keep_done = on ? 1 : fenceq::kKeepForever;
    if (!c.queue_config("old", keep)) {
      std::fprintf(stderr, "fenceq-retention: queue_config was refused\n");
      stop = true;
      watcher.join();
      return 1;
    }
    retaining = retaining || on;
    const auto from = Clock::now();
    const auto end = from + std::chrono::milliseconds(window_ms);
    std::vector<double> rtts;
    while (!gone && Clock::now() < end) {
      auto j = timed(rtts, [&] { return c.claim_next("work", "worker", 60); });
      if (!j) break;
      timed(rtts, [&] { return c.complete(j->id, "worker", j->fence, std::nullopt); });
      fenceq::EnqueueOptions o;
      o.queue = "work";
      timed(rtts, [&] { return c.enqueue(job_id("n", n++), o); });
    }
    (on ? during : base).insert((on ? during : base).end(), rtts.begin(), rtts.end());
    if (rtts.size() >= 100) window_p99[on].push_back(percentile(rtts, 0.99));
    if (on) took += std::chrono::duration<double>(Clock::now() - from).count();
  }
  stop = true;
  watcher.join();
  const auto left = done_of(c, "old");

  std::vector<double> ratios;
  for (std::size_t i = 0; i < window_p99[1].size() && i < window_p99[0].size(); ++i) {
    ratios.push_back(window_p99[1][i] / window_p99[0][i]);
  }
  const double pooled = percentile(during, 0.99) / std::max(1e-9, percentile(base, 0.99));
  std::printf(
      "{\"jobs\": %d, \"left\": %lld, \"removed_s\": %.3f, \"base_n\": %zu, \"during_n\": %zu, "
      "\"base_p50_ms\": %.4f, \"base_p99_ms\": %.4f, \"base_max_ms\": %.3f, "
      "\"during_p50_ms\": %.4f, \"during_p99_ms\": %.4f, \"during_max_ms\": %.3f, "
      "\"pooled_p99_ratio\": %.3f, \"window_ratios\": %zu, \"window_ratio_median\": %.3f}\n",
      jobs, static_cast<long long>(left), took, base.size(), during.size(),
      percentile(base, 0.5), percentile(base, 0.99), percentile(base, 1.0),
      percentile(during, 0.5), percentile(during, 0.99), percentile(during, 1.0), pooled,
      ratios.size(), percentile(ratios, 0.5));
  return left == 0 ? 0 : 1;
}
