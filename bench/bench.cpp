// fenceq-bench: a simple local load loop. N jobs are enqueued, then K client
// threads each take jobs by id (claim, 30 s lease) and complete them with the
// fence, one request in flight per client. Prints jobs/s and request latency.
//
//   fenceq-bench --endpoint ipc://var/fenceqd.sock --jobs 20000 --clients 8
//
// Point it at a running fenceqd (server clock). Use a fresh database: job ids
// are bench-<run>-<n>, with <run> from the clock so runs don't collide.
#include <fenceq/client.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::size_t k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fenceq-bench: claim+complete throughput against a running fenceqd"};
  std::string endpoint = fenceq::default_endpoint();
  int jobs = 20000, clients = 1;
  app.add_option("--endpoint", endpoint, "daemon endpoint");
  app.add_option("--jobs", jobs, "jobs to enqueue and process")->check(CLI::Range(1, 10000000));
  app.add_option("--clients", clients, "client threads")->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);

  const std::string run = std::to_string(
      std::chrono::system_clock::now().time_since_epoch().count() % 1000000000);
  auto id_of = [&](int n) { return "bench-" + run + "-" + std::to_string(n); };

  // Setup: enqueue with the same number of clients (not measured).
  {
    std::vector<std::thread> ts;
    for (int c = 0; c < clients; ++c) {
      ts.emplace_back([&, c] {
        fenceq::Client cl(endpoint);
        for (int n = c; n < jobs; n += clients) cl.enqueue(id_of(n));
      });
    }
    for (auto& t : ts) t.join();
  }

  std::vector<std::vector<double>> lat(static_cast<std::size_t>(clients));
  std::atomic<long> done{0}, lost{0};
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int c = 0; c < clients; ++c) {
    ts.emplace_back([&, c] {
      fenceq::Client cl(endpoint);
      const std::string owner = "bench-worker-" + std::to_string(c);
      auto& l = lat[static_cast<std::size_t>(c)];
      l.reserve(static_cast<std::size_t>(2 * jobs / clients + 2));
      for (int n = c; n < jobs; n += clients) {
        auto a = Clock::now();
        auto fence = cl.claim(id_of(n), owner, 30);
        auto b = Clock::now();
        l.push_back(std::chrono::duration<double, std::micro>(b - a).count());
        if (!fence) {
          ++lost;
          continue;
        }
        bool ok = cl.complete(id_of(n), owner, *fence, "ok");
        l.push_back(std::chrono::duration<double, std::micro>(Clock::now() - b).count());
        ok ? ++done : ++lost;
      }
    });
  }
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::printf(
      "{\"clients\": %d, \"jobs\": %d, \"completed\": %ld, \"refused\": %ld, \"seconds\": %.3f, "
      "\"jobs_per_s\": %.0f, \"p50_us\": %.0f, \"p99_us\": %.0f, \"p999_us\": %.0f}\n",
      clients, jobs, done.load(), lost.load(), secs, static_cast<double>(done.load()) / secs,
      percentile(all, 0.50), percentile(all, 0.99), percentile(all, 0.999));
  return lost.load() == 0 ? 0 : 1;
}
