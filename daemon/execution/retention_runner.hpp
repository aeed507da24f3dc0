// Retention (C3.17): queue_config's keep_done, keep_dead and
// keep_cancelled. The daemon removes the finished jobs older than that
// itself, in bounded chunks, each id's fence kept as purge keeps it (C1.2);
// the removals count as each queue's `removed` (stats' totals, /metrics).
//
// Where the chunks run: a small one rides along in each batch's own
// transaction while jobs past their retention are left (no commit, no
// fsync of its own: a batch's requests wait for its ~8 deletes (kRideChunk), not for a
// transaction of the retention's); and once the daemon has been idle for
// kIdle, larger ones run in transactions of their own (the executor's
// retention source, sources.cpp) until none is left. Every kEvery each queue's states are looked at again.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "execution/clock.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon {

class RetentionRunner {
 public:
  using SteadyClock = std::chrono::steady_clock;
  // Jobs a chunk removes at most: riding in a batch, and in a pass of its own.
  static constexpr std::int64_t kRideChunk = 8;
  static constexpr std::int64_t kPassChunk = 256;
  // And bytes of payloads and results (docs/architecture.md, "Bounded work
  // on the serving thread"): freeing them is what a chunk of large jobs
  // spends (32 results of 900 KiB, ~7,200 pages, held the serving thread
  // 60-600 ms); a single larger job is a chunk by itself.
  static constexpr std::int64_t kChunkBytes = std::int64_t{1} << 20;
  // A pass of its own stops after this long; it waits for kIdle without a batch.
  static constexpr std::chrono::microseconds kPassBudget{3000};
  static constexpr std::chrono::milliseconds kIdle{20};
  // How often every queue's kept states are looked at again.
  static constexpr std::chrono::milliseconds kEvery{1000};
  // On a shared database another sidecar may set a retention: read again this often.
  static constexpr std::chrono::seconds kReread{10};

  RetentionRunner(Store& store, const RequestClock& time) : store_(store), time_(time) {}

  // At the start of a batch's transaction: the chunk to ride along in it, if
  // any (reads the retentions when stale). ridden() takes its result.
  std::optional<PurgeParams> rider();
  void ridden(const CallResult& r);
  bool riding() const { return riding_.has_value(); }
  // Whether a pass of its own is due: jobs to remove may be left and no
  // batch ran for kIdle.
  bool ready();
  // Inside a transaction of its own: chunks of kPassChunk, until kPassBudget.
  void pass();
  // A pass's transaction failed: the next one after kEvery.
  void failed() { last_batch_ = SteadyClock::now() + kEvery; }
  // queue_config changed a retention: read again before the next chunk.
  void changed() { loaded_ = false; }
  // When ready() may next be true; nullopt when no queue has a retention.
  std::optional<SteadyClock::time_point> next_tick() const;

 private:
  // One kept state of one queue, and whether jobs past it may be left.
  struct Kept {
    std::string queue;
    double keep = 0;
    int state = 0;  // kFinished* bit
    bool left = true;
  };
  void load();
  // Every kEvery: every state may have jobs to remove again.
  void look_again();
  PurgeParams chunk(const Kept& k, std::int64_t limit) const;

  Store& store_;
  const RequestClock& time_;
  std::vector<Kept> kept_;
  std::size_t turn_ = 0;  // the next one to ride
  std::optional<std::size_t> riding_;
  bool loaded_ = false;
  SteadyClock::time_point read_{}, look_{}, last_batch_{};
};

}  // namespace fenceq::daemon
