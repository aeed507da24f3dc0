// The figures the dashboard's throughput chart is drawn from:
// what committed transactions did, summed over every queue, and the commits,
// since the daemon started. The serving thread adds to them once a
// transaction has committed (Counters::committed); the HTTP bridge's thread
// samples them every few seconds (http/answers.hpp), whether or not a
// dashboard is open, so that a first visit shows the recent past. Read
// without a count of the jobs (which reads every job): reading them costs
// nothing but the loads.
#pragma once

#include <atomic>
#include <cstdint>

namespace fenceq::daemon {

struct Throughput {
  // Each written by the serving thread alone; read by any.
  std::atomic<std::uint64_t> claimed{0};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> commits{0};
};

}  // namespace fenceq::daemon
