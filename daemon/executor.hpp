// Applies a batch of decoded requests to the store in one transaction (group
// commit, C1.4) and produces one encoded reply per request, in order.
//
// Requests are applied one at a time in arrival order (C3.7). Requests that
// failed decoding are answered with their error and touch nothing (C3.8). If
// any statement or the COMMIT fails, the transaction is rolled back and every
// request of the batch that reached the store is answered `internal`: none of
// the batch is applied. The caller sends the replies only after run() returns,
// which is after the commit.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "clock.hpp"
#include "fenceq_protocol/codec.hpp"
#include "store.hpp"

namespace fenceq::daemon {

struct BatchStats {
  std::uint64_t requests = 0;
  std::uint64_t commits = 0;
  std::uint64_t failed_commits = 0;
};

class Executor {
 public:
  Executor(Store& store, Clock& clock) : store_(store), clock_(clock) {}

  // One reply per element of `batch`, same order. Never throws.
  std::vector<std::string> run(const std::vector<protocol::Decoded>& batch);

  const BatchStats& stats() const { return stats_; }

 private:
  // A result, or the refusal of a request that decoded but cannot be applied.
  using Outcome = std::variant<protocol::Result, protocol::Error>;
  Outcome apply(const protocol::Request& r);

  Store& store_;
  Clock& clock_;
  BatchStats stats_;
};

}  // namespace fenceq::daemon
