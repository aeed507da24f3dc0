#include "execution/awaits.hpp"
#include "base/logging.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace fenceq::daemon {

using protocol::ErrorCode;

namespace {

// How often every awaited job is looked at, whatever this daemon's writes
// did: a reap marks jobs dead, another sidecar completes them.
constexpr std::chrono::milliseconds kAwaitSweep{1000};
// A sweep looks at the awaited jobs kSweepSlice at a time, kSweepGap apart,
// so that however many are parked it holds the serving thread for a few
// point reads at once, never for all of them (1,000 awaits: 16 slices).
constexpr std::size_t kSweepSlice = 64;
constexpr std::chrono::milliseconds kSweepGap{50};

// The job an await waits for, and for how long: await's, or enqueue_and_wait's.
const std::string& id_of(const protocol::Request& r) {
  if (r.op == protocol::Op::await_job) return r.as<protocol::req::AwaitJob>().id;
  return r.as<protocol::req::EnqueueAndWait>().id;
}
double wait_of(const protocol::Request& r) {
  if (r.op == protocol::Op::await_job) return r.as<protocol::req::AwaitJob>().wait;
  return r.as<protocol::req::EnqueueAndWait>().wait;
}

}  // namespace

std::optional<JobDetail> job_detail(Store& store, std::string_view id, double now) {
  // The state first: one lookup by key, and for a missing id the only one.
  auto st = store.state(id);
  if (!st) return std::nullopt;
  ListFilter f;
  f.id = id;
  f.limit = 1;
  auto rows = store.list(f, now);
  if (rows.empty()) return std::nullopt;
  JobDetail d;
  d.info = std::move(rows.front());
  d.result = std::move(st->result);
  d.payload = store.payload(id);
  auto links = store.links(id);
  d.after = std::move(links.after);
  d.blocked_children = std::move(links.blocked_children);
  d.headers = std::move(links.headers);
  d.steps = std::move(links.steps);
  d.signalled = links.signalled;
  d.signal = std::move(links.signal);
  d.suspend_timeout = links.suspend_timeout;
  d.suspend_fails = links.suspend_fails;
  return d;
}

bool Awaits::park(Token token, const protocol::Request& r) {
  if (awaits_.size() >= kMaxParked) return false;
  const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                 std::chrono::duration<double>(wait_of(r)));
  if (awaits_.empty()) next_sweep_ = SteadyClock::now() + kAwaitSweep;
  awaits_.emplace(token, Awaiting{r, deadline});
  awaits_by_id_.emplace(id_of(r), token);
  await_deadlines_.insert({deadline, token});
  return true;
}

void Awaits::unpark(Token token) {
  auto it = awaits_.find(token);
  if (it == awaits_.end()) return;
  auto [first, last] = awaits_by_id_.equal_range(id_of(it->second.request));
  for (auto i = first; i != last; ++i) {
    if (i->second == token) {
      awaits_by_id_.erase(i);
      break;
    }
  }
  await_deadlines_.erase({it->second.deadline, token});
  awaits_.erase(it);
}

void Awaits::note_finishing(const std::vector<Call>& calls,
                            const std::vector<CallResult>& results) {
  // Jobs these writes may have finished, for the awaits parked on them.
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const auto id = finishing_job(calls[k]);
    if (!id.empty() && k < results.size() && results[k].ok) finishing_.emplace_back(id);
  }
}

std::vector<std::string> Awaits::next_slice() {
  std::vector<std::string> look;
  auto it = awaits_by_id_.lower_bound(sweep_from_);
  for (; it != awaits_by_id_.end() && look.size() < kSweepSlice; ++it) {
    if (look.empty() || look.back() != it->first) look.push_back(it->first);
  }
  if (it == awaits_by_id_.end()) {
    sweep_from_.clear();  // the pass is over: the next starts kAwaitSweep after this one began
    next_sweep_ = sweep_began_ + kAwaitSweep;
  } else {
    sweep_from_ = it->first;
    next_sweep_ = SteadyClock::now() + kSweepGap;
  }
  return look;
}

void Awaits::serve(const std::vector<std::string>& ids, std::vector<Delivery>& out) {
  if (awaits_.empty()) return;
  std::vector<std::string> look;
  for (const auto& id : ids) {
    if (awaits_by_id_.contains(id)) look.push_back(id);
  }
  std::sort(look.begin(), look.end());
  look.erase(std::unique(look.begin(), look.end()), look.end());
  const double now = time_.parked_now();
  for (const auto& id : look) {
    std::optional<JobDetail> d;
    try {
      d = job_detail(store_, id, now);
    } catch (const std::exception& e) {
      // Read outside any transaction: the store is out of reach; the awaits
      // stay parked and the next sweep looks again.
      spdlog::debug("await: reading job {} failed: {}", client_text(id), e.what());
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
      unpark(t);
    }
  }
}

void Awaits::tick(std::vector<Delivery>& out) {
  if (awaits_.empty()) return;
  const auto now = SteadyClock::now();
  while (!await_deadlines_.empty() && await_deadlines_.begin()->first <= now) {
    const Token t = await_deadlines_.begin()->second;
    out.push_back({t, protocol::encode_ok(protocol::Result{}, awaits_.at(t).request.rid), {}});
    unpark(t);
  }
  if (!awaits_.empty() && now >= next_sweep_) {
    if (sweep_from_.empty()) sweep_began_ = now;
    serve(next_slice(), out);
  }
}

std::optional<Awaits::SteadyClock::time_point> Awaits::next_tick() const {
  if (awaits_.empty()) return std::nullopt;
  return std::min(await_deadlines_.begin()->first, next_sweep_);
}

void Awaits::drain(const protocol::Error& error, std::vector<Delivery>& out) {
  while (!awaits_.empty()) {
    const Token t = awaits_.begin()->first;
    out.push_back({t, protocol::encode_error(error, awaits_.begin()->second.request.rid), {}});
    unpark(t);
  }
}

}  // namespace fenceq::daemon
