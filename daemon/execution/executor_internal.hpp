// What the executor's files share (executor.cpp, executor_awaits.cpp,
// executor_schedules.cpp, executor_counters.cpp); not for other users.
#pragma once

#include <chrono>
#include <string>

#include "store.hpp"

namespace fenceq::daemon::executor_detail {

// Finished: done, dead or cancelled (what `await` waits for).
inline bool finished(JobStatus s) {
  return s == JobStatus::done || s == JobStatus::dead || s == JobStatus::cancelled;
}
// How often every awaited job is looked at, whatever this daemon's writes
// did: a reap marks jobs dead, another sidecar completes them.
inline constexpr std::chrono::milliseconds kAwaitSweep{1000};
// How often a shared database's schedules are read again (another sidecar
// may have set or deleted one), and how long after a failed read.
inline constexpr std::chrono::seconds kScheduleReread{10};

}  // namespace fenceq::daemon::executor_detail
