// The store's typed calls that only tests make (the daemon's own are
// Store's: storage/store.hpp): each one Call, run alone through
// Store::run_one, and answering what its parameter struct says; a refused
// call throws StoreError (Kind::refused), nothing of it applied. In
// namespace fenceq::daemon, so that a call finds them by its Store argument:
// complete(store, "a", "w", fence, result, now).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "storage/store.hpp"

namespace fenceq::daemon {

inline std::optional<std::int64_t> claim(Store& s, std::string_view id, std::string_view owner,
                                         double now, double ttl) {
  return s.run_one(ClaimParams{id, owner, now, ttl}).number;
}

// One job of `queue`, or nullopt.
inline std::optional<ClaimedJob> claim_next(Store& s, std::string_view queue,
                                            std::string_view owner, double now, double ttl) {
  auto jobs = s.claim_next(queue, owner, now, ttl, 1);
  if (jobs.empty()) return std::nullopt;
  return std::move(jobs.front());
}

inline bool renew(Store& s, std::string_view id, std::string_view owner, std::int64_t fence,
                  double now, double ttl, std::optional<std::string_view> progress = std::nullopt) {
  return s.run_one(RenewParams{{id, owner, fence}, now, ttl, progress}).ok;
}

inline bool complete(Store& s, std::string_view id, std::string_view owner, std::int64_t fence,
                     const std::optional<std::string>& result, double now) {
  return s.run_one(CompleteParams{{id, owner, fence}, now, &result}).ok;
}

inline bool release(Store& s, std::string_view id, std::string_view owner, std::int64_t fence) {
  return s.run_one(ReleaseParams{{id, owner, fence}}).ok;
}

inline bool fail(Store& s, std::string_view id, std::string_view owner, std::int64_t fence,
                 std::string_view error, std::optional<double> retry_in, double now) {
  return s.run_one(FailParams{{id, owner, fence}, now, error, retry_in}).ok;
}

inline bool snooze(Store& s, std::string_view id, std::string_view owner, std::int64_t fence,
                   double delay, double now) {
  return s.run_one(SnoozeParams{{id, owner, fence}, now, delay}).ok;
}

inline bool step_save(Store& s, std::string_view id, std::string_view owner, std::int64_t fence,
                      std::string_view step, const std::optional<Payload>& value, double now) {
  return s.run_one(StepSaveParams{{id, owner, fence}, now, step, &value}).ok;
}

// C3.23: the token, or nullopt when the lease was not current.
inline std::optional<std::string> suspend(Store& s, std::string_view id, std::string_view owner,
                                          std::int64_t fence, double timeout, bool fail,
                                          std::string token, double now) {
  auto r = s.run_one(SuspendParams{{id, owner, fence}, now, timeout, fail, std::move(token)});
  if (!r.ok) return std::nullopt;
  return r.id;
}

inline bool signal(Store& s, std::string_view token, const std::optional<Payload>& value,
                   double now) {
  return s.run_one(SignalParams{token, now, &value}).ok;
}

inline bool check(Store& s, std::string_view id, std::string_view owner, std::int64_t fence,
                  double now) {
  return s.run_one(CheckParams{{id, owner, fence}, now}).ok;
}

inline bool retry(Store& s, std::string_view id, double now) {
  return s.run_one(RetryParams{id, now}).ok;
}

inline bool cancel(Store& s, std::string_view id, double now) {
  return s.run_one(CancelParams{id, now}).ok;
}

inline std::int64_t purge(Store& s, const std::optional<std::string>& queue, double older_than,
                          double now) {
  return s.run_one(PurgeParams{queue, older_than, now}).number.value_or(0);
}

}  // namespace fenceq::daemon
