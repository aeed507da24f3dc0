// What the executor's parts that hold requests back share (parked claims,
// awaits, the counts deferred to the stats reader): how a request is named,
// and the reply it gets later, outside its batch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fenceq::daemon {

// The parked requests are identified by the caller's tokens.
using Token = std::uint64_t;

// A lease a reply hands out: (job, owner, fence).
struct Lease {
  std::string id, owner;
  std::int64_t fence = 0;
};

// The reply to a parked request. `claimed` are the leases it carries, so that
// the claims can be undone when the reply cannot reach its client (gone).
struct Delivery {
  Token token;
  std::string reply;
  std::vector<Lease> claimed;
};

// Most claim_next requests (and, apart, most awaits) parked at once; beyond
// it, a request that finds nothing is answered nil at once, as if its wait
// had ended.
inline constexpr std::size_t kMaxParked = 10000;

// Whether `t` names a request of this batch.
inline bool in_batch(const std::vector<Token>& tokens, Token t) {
  return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
}

}  // namespace fenceq::daemon
