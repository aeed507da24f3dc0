#include "executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include <poll.h>

#include "metrics.hpp"
#include "executor_internal.hpp"

namespace fenceq::daemon {

using protocol::Answer;
using protocol::ErrorCode;
using protocol::Op;

using executor_detail::finished;
using executor_detail::kAwaitSweep;
using executor_detail::kScheduleReread;

// --- await ---------------------------------------------------------------------

void Executor::park_await(Token token, const protocol::Request& r) {
  const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                 std::chrono::duration<double>(r.wait));
  if (awaits_.empty()) next_sweep_ = SteadyClock::now() + kAwaitSweep;
  awaits_.emplace(token, Awaiting{r, deadline});
  awaits_by_id_.emplace(r.id, token);
  await_deadlines_.insert({deadline, token});
}

void Executor::unpark_await(Token token) {
  auto it = awaits_.find(token);
  if (it == awaits_.end()) return;
  auto [first, last] = awaits_by_id_.equal_range(it->second.request.id);
  for (auto i = first; i != last; ++i) {
    if (i->second == token) {
      awaits_by_id_.erase(i);
      break;
    }
  }
  await_deadlines_.erase({it->second.deadline, token});
  awaits_.erase(it);
}

void Executor::serve_awaits(const std::vector<std::string>& ids, bool all,
                            std::vector<Delivery>& out) {
  if (awaits_.empty()) return;
  std::vector<std::string> look;
  if (all) {
    for (const auto& [id, token] : awaits_by_id_) {
      if (look.empty() || look.back() != id) look.push_back(id);
    }
  } else {
    for (const auto& id : ids) {
      if (awaits_by_id_.contains(id)) look.push_back(id);
    }
  }
  std::sort(look.begin(), look.end());
  look.erase(std::unique(look.begin(), look.end()), look.end());
  const double now = parked_now();
  for (const auto& id : look) {
    std::optional<JobDetail> d;
    try {
      d = detail(id, now);
    } catch (const std::exception& e) {
      // Read outside any transaction: the store is out of reach; the awaits
      // stay parked and the next sweep looks again.
      spdlog::debug("await: reading job {} failed: {}", id, e.what());
      return;
    }
    if (d && !finished(d->info.status)) continue;
    std::vector<Token> tokens;
    auto [first, last] = awaits_by_id_.equal_range(id);
    for (auto i = first; i != last; ++i) tokens.push_back(i->second);
    for (Token t : tokens) {
      const auto& a = awaits_.at(t);
      // Gone (purged since, by another sidecar): as when it was never there.
      out.push_back({t,
                     d ? protocol::encode_ok(protocol::Result{*d}, a.request.rid)
                       : protocol::encode_error({ErrorCode::invalid_argument,
                                                 "no job with id '" + id + "' to await"},
                                                a.request.rid),
                     {}});
      unpark_await(t);
    }
  }
}

void Executor::tick_awaits(std::vector<Delivery>& out) {
  if (awaits_.empty()) return;
  const auto now = SteadyClock::now();
  while (!await_deadlines_.empty() && await_deadlines_.begin()->first <= now) {
    const Token t = await_deadlines_.begin()->second;
    out.push_back({t, protocol::encode_ok(protocol::Result{}, awaits_.at(t).request.rid), {}});
    unpark_await(t);
  }
  if (!awaits_.empty() && now >= next_sweep_) {
    next_sweep_ = now + kAwaitSweep;
    serve_awaits({}, true, out);
  }
}

}  // namespace fenceq::daemon
