#include "execution/retention_runner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace fenceq::daemon {

void RetentionRunner::load() {
  const auto now = SteadyClock::now();
  read_ = now;
  loaded_ = true;  // on a failure too: not again before kReread
  std::vector<std::pair<std::string, Retention>> rows;
  try {
    rows = store_.retentions();
  } catch (const std::exception& e) {
    spdlog::warn("reading the queues' retention failed, trying again in {} s: {}",
                 kReread.count(), e.what());
    return;
  }
  kept_.clear();
  for (const auto& [queue, r] : rows) {
    for (const auto& [keep, state] : {std::pair{r.keep_done, kFinishedDone},
                                      {r.keep_dead, kFinishedDead},
                                      {r.keep_cancelled, kFinishedCancelled}}) {
      if (keep) kept_.push_back({queue, *keep, state, true});
    }
  }
  turn_ = 0;
  look_ = now + kEvery;
}

void RetentionRunner::look_again() {
  const auto now = SteadyClock::now();
  if (!loaded_ || (store_.shared() && now >= read_ + kReread)) load();
  if (now < look_) return;
  look_ = now + kEvery;
  for (auto& k : kept_) k.left = true;
}

PurgeParams RetentionRunner::chunk(const Kept& k, std::int64_t limit) const {
  PurgeParams p{k.queue, k.keep, time_.parked_now(), k.state, {}, std::nullopt, limit, true};
  p.max_bytes = kChunkBytes;
  return p;
}

std::optional<PurgeParams> RetentionRunner::rider() {
  last_batch_ = SteadyClock::now();
  riding_.reset();
  if (loaded_ && kept_.empty() && !store_.shared()) return std::nullopt;  // the common case
  look_again();
  for (std::size_t n = 0; n < kept_.size(); ++n) {
    const std::size_t i = (turn_ + n) % kept_.size();
    if (!kept_[i].left) continue;
    turn_ = (i + 1) % kept_.size();
    riding_ = i;
    return chunk(kept_[i], kRideChunk);
  }
  return std::nullopt;
}

void RetentionRunner::ridden(const CallResult& r) {
  if (riding_ && *riding_ < kept_.size()) kept_[*riding_].left = r.ok;
  riding_.reset();
}

bool RetentionRunner::ready() {
  if (SteadyClock::now() < last_batch_ + kIdle) return false;
  look_again();
  return std::any_of(kept_.begin(), kept_.end(), [](const Kept& k) { return k.left; });
}

void RetentionRunner::pass() {
  const auto start = SteadyClock::now();
  std::vector<CallResult> out;
  for (auto& k : kept_) {
    while (k.left && SteadyClock::now() - start < kPassBudget) {
      auto c = chunk(k, kPassChunk);
      c.deadline = start + kPassBudget;
      store_.run({Call{c, 0}}, out, false);
      k.left = out.at(0).ok;
    }
  }
}

std::optional<RetentionRunner::SteadyClock::time_point> RetentionRunner::next_tick() const {
  if (!loaded_) return SteadyClock::time_point::min();  // at once (Source::kAtOnce)
  const bool left = std::any_of(kept_.begin(), kept_.end(), [](const Kept& k) { return k.left; });
  if (left) return last_batch_ + kIdle;
  std::optional<SteadyClock::time_point> next;
  if (!kept_.empty()) next = look_;
  if (store_.shared()) next = next ? std::min(*next, read_ + kReread) : read_ + kReread;
  return next;
}

}  // namespace fenceq::daemon
