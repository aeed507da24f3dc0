// Retention (issue 33): queue_config's keep_done, keep_dead and
// keep_cancelled. The daemon removes the finished jobs older than that
// itself, a bounded chunk at a time, in transactions of their own between
// batches (Executor::tick), so that a removal never holds a claim up for
// long. Each removed id's fence is kept, as purge keeps it (C1.2), and the
// removals count as each queue's `removed` (stats' totals, /metrics).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "clock.hpp"
#include "store.hpp"

namespace fenceq::daemon {

class RetentionRunner {
 public:
  using SteadyClock = std::chrono::steady_clock;
  // Jobs one statement removes at most; a pass stops after kPassBudget.
  static constexpr std::int64_t kChunk = 256;
  static constexpr std::chrono::microseconds kPassBudget{3000};
  // How often the queues are looked at when the last pass left nothing.
  static constexpr std::chrono::milliseconds kEvery{1000};
  // On a shared database another sidecar may set a retention: read again this often.
  static constexpr std::chrono::seconds kReread{10};

  RetentionRunner(Store& store, const RequestClock& time) : store_(store), time_(time) {}

  // Whether a pass is due (the retentions read when stale first).
  bool ready();
  // Inside a transaction: removes one chunk of each kept state of each
  // queue, until kPassBudget has passed. The next pass comes at once when
  // jobs to remove were left, else after kEvery.
  void pass();
  // The pass's transaction failed: the next one after kEvery.
  void retry_later() { next_ = SteadyClock::now() + kEvery; }
  // queue_config changed a retention: read again before the next pass.
  void changed() {
    loaded_ = false;
    next_ = SteadyClock::now();
  }
  // When ready() may next be true; nullopt when no queue has a retention.
  std::optional<SteadyClock::time_point> next_tick() const;

 private:
  Store& store_;
  const RequestClock& time_;
  std::vector<std::pair<std::string, Retention>> queues_;
  bool loaded_ = false;
  SteadyClock::time_point read_{}, next_{};
};

}  // namespace fenceq::daemon
