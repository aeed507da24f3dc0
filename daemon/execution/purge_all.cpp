// purge without a filter (docs/contract.md, "Purge without a filter"): bounded
// on the serving thread, its reply unchanged (PROTOCOL.md: an int, every match
// removed). One statement deleted every match: ~40,000 jobs held the serving
// thread 250-625 ms (210-350 ms of CPU).
//
// The request removes chunks (RetentionRunner's bounds: 256 jobs or 1 MiB of
// payloads and results) for kPurgeFirst in its batch's transaction; when
// that removed every match it is answered at once, as before. Otherwise its
// reply waits (purges_) while run_purges removes the rest in steps of
// kPurgeStep in side transactions of their own, one per turn of the serving
// loop, and answers the count of all of them once none is left. Every chunk
// keeps each id's fence (C1.2) and settles a failed parent's children
// (C3.13) as purge_page does. The cutoff is the request's, fixed: a job that
// finishes later is not removed.
#include <algorithm>

#include "execution/executor.hpp"

namespace fenceq::daemon {

PurgeParams Executor::purge_chunk(const PendingPurge& p) {
  PurgeParams c{p.queue, 0.0, p.cutoff};
  c.limit = RetentionRunner::kPassChunk;
  c.max_bytes = RetentionRunner::kChunkBytes;
  c.after = p.after_queue;  // every queue: where the last chunk stopped
  return c;
}

bool Executor::purge_chunks(PendingPurge& p, std::chrono::microseconds budget) {
  const auto start = SteadyClock::now();
  std::vector<CallResult> results;
  for (;;) {
    auto c = purge_chunk(p);
    c.deadline = start + budget;
    store_.run({Call{c, 0}}, results, false);
    p.count += results.at(0).number.value_or(0);
    if (!p.queue) p.after_queue = results.at(0).id;
    if (!results.at(0).ok) return false;  // none is left
    if (SteadyClock::now() - start >= budget) return true;
  }
}

std::optional<Executor::Outcome> Executor::purge_first(const protocol::Request& r, double now,
                                                       Token token,
                                                       const std::optional<protocol::Rid>& rid) {
  const auto& q = r.as<protocol::req::Purge>();
  PendingPurge p{token, rid, q.queue, now - q.older_than, 0, {}};
  if (!purge_chunks(p, kPurgeFirst)) return protocol::Result{p.count};
  purges_.push_back(std::move(p));
  return std::nullopt;  // answered by run_purges
}

void Executor::run_purges(std::vector<Delivery>& out) {
  if (purges_.empty()) return;
  PendingPurge p = purges_.front();  // a copy: a step rolled back counts nothing
  bool left = true;
  const bool done = side_transaction("removing the jobs a purge matched", out,
                                     [&](std::vector<Woken>&) {
                                       left = purge_chunks(p, kPurgeStep);
                                       persist_clock();
                                       return true;
                                     });
  if (!done) {
    // Answered with the error, as a failed batch is; what earlier steps
    // removed stays removed (each id's fence kept).
    out.push_back({p.token, protocol::encode_error({protocol::ErrorCode::internal,
                                                    "purge failed part way: run it again"},
                                                   p.rid),
                   {}});
    purges_.pop_front();
    return;
  }
  if (left) {
    purges_.front().count = p.count;
    return;
  }
  out.push_back({p.token, protocol::encode_ok(protocol::Result{p.count}, p.rid), {}});
  purges_.pop_front();
}

void Executor::drop_purges(const std::vector<Token>& tokens) {
  std::erase_if(purges_, [&](const PendingPurge& p) {
    return std::find(tokens.begin(), tokens.end(), p.token) != tokens.end();
  });
}

void Executor::drain_purges(const protocol::Error& error, std::vector<Delivery>& out) {
  for (const auto& p : purges_) out.push_back({p.token, protocol::encode_error(error, p.rid), {}});
  purges_.clear();
}

}  // namespace fenceq::daemon
