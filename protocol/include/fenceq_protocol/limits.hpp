// The protocol's limits (protocol/PROTOCOL.md, "Limits"): one constant each,
// read by the codec (which refuses a request beyond them with
// invalid_argument) and by whatever else must agree with it, such as the
// daemon's stores (kMaxSchedules) without taking in the whole codec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fenceq::protocol {

// Longest `id` and `owner`, in bytes (protocol-v1, invalid_argument above it).
inline constexpr std::size_t kMaxKeyBytes = 1024;
// A job's unique key (enqueue's `key`, list's filter), in bytes, and the
// longest `unique_for` window, in seconds.
inline constexpr std::size_t kMaxUniqueKeyBytes = 1024;
inline constexpr double kMaxUniqueFor = 1e9;
// A job's group (enqueue's `group`, list's filter), in bytes.
inline constexpr std::size_t kMaxGroupBytes = 256;
// Longest queue name, job payload, and error text given to `fail`.
inline constexpr std::size_t kMaxQueueBytes = 256;
inline constexpr std::size_t kMaxPayloadBytes = 256 * 1024;
inline constexpr std::size_t kMaxErrorBytes = 64 * 1024;
// Longest progress text a renew carries (docs/contract.md, "Progress").
inline constexpr std::size_t kMaxProgressBytes = 4 * 1024;
// Longest long-poll wait of claim_next, in seconds; most jobs one `list` returns.
inline constexpr double kMaxWaitSeconds = 3600;
inline constexpr std::int64_t kMaxListLimit = 1000;
// Most jobs one bulk action (retry_many, cancel_many, purge with a filter)
// acts on, and how many when it names no `limit` (C3.16).
inline constexpr std::int64_t kMaxBulkLimit = 10000;
inline constexpr std::int64_t kDefaultBulkLimit = 1000;
// Most bytes of a job's headers, keys and values in all (C3.18).
inline constexpr std::size_t kMaxHeadersBytes = 4096;
// A job's steps (C3.22): a step's name, and how many steps one job may
// save and their values' bytes in all (a claim gives them all back, beside
// the payload; each value is a payload, at most kMaxPayloadBytes).
inline constexpr std::size_t kMaxStepBytes = 256;
inline constexpr std::size_t kMaxSteps = 64;
inline constexpr std::size_t kMaxStepsBytes = kMaxPayloadBytes;
// suspend and signal (C3.23): the longest a job waits for its signal (30
// days), and the longest token a signal may carry (the daemon's are 32 hex
// digits: 128 random bits).
inline constexpr double kMaxSuspendSeconds = 30.0 * 86400;
inline constexpr std::size_t kMaxTokenBytes = 256;
// enqueue's deadline (C3.24): Unix seconds, above 0, at most this.
inline constexpr double kMaxDeadline = 1e11;
// Longest retention a queue keeps finished jobs for (queue_config's keep_*).
inline constexpr double kMaxKeepSeconds = 1e10;
// Most jobs one batch op carries (enqueue_many, complete_many, renew_many,
// claim_next's `max`).
inline constexpr std::int64_t kMaxBatchItems = 1000;
// Most jobs one job waits for (enqueue's `after`).
inline constexpr std::size_t kMaxAfter = 1000;
// Most still-blocked children `job` names (C3.13): a parent may have
// any number of children.
inline constexpr std::size_t kMaxBlockedChildren = 1000;
// Most ids one `results` asks about, and its byte budget: results
// are read, in the order asked, while those before them total less than
// this; the later ones come back omitted (their state, no result), so a
// reply holds at most this plus one result.
inline constexpr std::size_t kMaxResultIds = 1000;
inline constexpr std::size_t kMaxResultsBytes = 1024 * 1024;
inline constexpr std::string_view kDefaultQueue = "default";
// queue_config's bounds: rate claims are remembered one row each for `per`
// seconds, so both are bounded.
inline constexpr std::int64_t kMaxRate = 100000;
inline constexpr double kMaxRatePer = 86400;
inline constexpr std::int64_t kMaxLeasedLimit = 1000000000;
// The groups' own settings (group_config, C3.25) a queue's stats lists.
inline constexpr std::size_t kMaxStatsOverrides = 100;
// Periodic jobs: the longest name and cron expression, and how many at most.
inline constexpr std::size_t kMaxScheduleName = 200;
inline constexpr std::size_t kMaxCronBytes = 256;
inline constexpr std::size_t kMaxTzBytes = 64;
inline constexpr std::size_t kMaxSchedules = 1000;

// Whether `id` has the form of a periodic job's tick, NAME@YYYY-MM-DDTHH:MMZ
// (any digits): those ids are the schedules' alone, and enqueue refuses them
// (invalid_argument), so that no client can take a tick's id before its
// schedule does and silence it.
constexpr bool is_tick_id(std::string_view id) {
  constexpr std::string_view kForm = "@0000-00-00T00:00Z";
  if (id.size() <= kForm.size()) return false;
  const std::string_view tail = id.substr(id.size() - kForm.size());
  for (std::size_t i = 0; i < kForm.size(); ++i) {
    const bool digit = tail[i] >= '0' && tail[i] <= '9';
    if (kForm[i] == '0' ? !digit : tail[i] != kForm[i]) return false;
  }
  return true;
}
static_assert(is_tick_id("nightly@2026-03-27T01:30Z") && !is_tick_id("@2026-03-27T01:30Z") &&
              !is_tick_id("a@2026-03-27T01:30") && !is_tick_id("ann@example.com"));

}  // namespace fenceq::protocol
