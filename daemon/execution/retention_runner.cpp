#include "retention_runner.hpp"

#include <spdlog/spdlog.h>

namespace fenceq::daemon {

bool RetentionRunner::ready() {
  const auto now = SteadyClock::now();
  if (!loaded_ || (store_.shared() && now >= read_ + kReread)) {
    read_ = now;
    try {
      queues_ = store_.retentions();
      loaded_ = true;
    } catch (const std::exception& e) {
      // Out of reach (a shared database down): not again before kReread.
      loaded_ = true;
      spdlog::warn("reading the queues' retention failed, trying again in {} s: {}",
                   kReread.count(), e.what());
      return false;
    }
  }
  return !queues_.empty() && now >= next_;
}

void RetentionRunner::pass() {
  const auto start = SteadyClock::now();
  const double now = time_.parked_now();
  bool left = false;
  std::vector<CallResult> out;
  for (const auto& [queue, r] : queues_) {
    for (const auto& [keep, state] : {std::pair{r.keep_done, kFinishedDone},
                                      {r.keep_dead, kFinishedDead},
                                      {r.keep_cancelled, kFinishedCancelled}}) {
      if (!keep) continue;
      if (SteadyClock::now() - start >= kPassBudget) {
        left = true;  // the rest in the next pass
        break;
      }
      PurgeParams p{queue, *keep, now, state, {}, std::nullopt, kChunk, true};
      store_.run({Call{p, 0}}, out, false);
      left = left || out.at(0).ok;
    }
  }
  next_ = left ? SteadyClock::now() : SteadyClock::now() + kEvery;
}

std::optional<RetentionRunner::SteadyClock::time_point> RetentionRunner::next_tick() const {
  if (!loaded_) return SteadyClock::now();
  if (queues_.empty()) {
    if (store_.shared()) return read_ + kReread;
    return std::nullopt;
  }
  return next_;
}

}  // namespace fenceq::daemon
