// The store contract, once for every store (one suite, two stores): every
// clause of C1-C3 that the store alone decides, and the work queue's store
// semantics, by area, a file each in tests/store_contract/ (lease, queue,
// keys, groups, workflows, lifecycle, retention, schedules). Every Params
// alternative of Call (storage/store.hpp) has a case: Enqueue, Claim, Renew,
// Complete, Release and ClockMark in lease.hpp; ClaimNext, Fail, Check,
// Unclaim, Retry, Purge, Reap and QueueConfig in queue.hpp; Cancel and the
// declared Snooze in lifecycle.hpp; Retention in retention.hpp; ScheduleSet,
// ScheduleDelete and TakeTick in schedules.hpp; StepSave in steps.hpp; Suspend and Signal in
// suspends.hpp. Values differ from the
// spec's examples on purpose.
//
// Included by exactly one test file per store, after it defines `Backend`:
//   Backend();                          a fresh, empty database
//   std::unique_ptr<Store> open();      a store on it (again: the same data)
//   void sql(const std::string& q);     plain SQL on it, outside any store
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "execution/clock.hpp"
#include "storage/store.hpp"

namespace store_contract {

using fenceq::daemon::Store;
using fenceq::protocol::JobStatus;
using fenceq::daemon::ListFilter;
using fenceq::daemon::NewJob;
using fenceq::protocol::Payload;

struct Enq {
  std::string queue = "default";
  std::optional<Payload> payload;
  std::int64_t priority = 0;
  double delay = 0;
  std::int64_t max_attempts = 0;
};

// A job to enqueue that owns its strings; a NewJob (of views) while it lives.
struct OwnedJob {
  std::string id;
  Enq o;
  operator NewJob() const {  // NOLINT: converts where a NewJob is asked for
    return NewJob{id, o.queue, o.payload ? &*o.payload : nullptr, o.priority, o.delay,
                  o.max_attempts};
  }
};

inline OwnedJob enqueue_request(std::string id, const Enq& o = {}) { return {std::move(id), o}; }

// Runs one committed operation, as a batch of one.
template <typename F>
auto tx(Store& s, F f) {
  s.begin();
  try {
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      s.commit();
    } else {
      auto r = f();
      s.commit();
      return r;
    }
  } catch (...) {
    s.rollback();
    throw;
  }
}

// The daemon's settling steps until none is left (each is a few
// milliseconds of work, so one step can leave some on a busy machine: a
// test asserted after a single step failed once in a clean clone beside
// make test's deadlock run). Bounded: 10,000 steps.
inline void settle_all(Store& s, double now) {
  for (int i = 0; i < 10000; ++i) {
    if (!tx(s, [&] { return s.settle_step(now); }).left) return;
  }
}

inline bool enqueue(Store& s, std::string id, const Enq& o = {}, double now = 0.0) {
  return tx(s, [&] { return s.enqueue(enqueue_request(std::move(id), o), now); });
}

inline fenceq::JobInfo info(Store& s, const std::string& id, double now) {
  ListFilter r;
  r.limit = 1000;
  for (const auto& j : tx(s, [&] { return s.list(r, now); })) {
    if (j.id == id) return j;
  }
  FAIL("job " << id << " not listed");
  return {};
}

}  // namespace store_contract

namespace store_contract {

// A job with the fields NewJob holds beyond Enq's: key, group, parents.
struct Rich {
  explicit Rich(std::string i, std::string q = "default") : id(std::move(i)), queue(std::move(q)) {}
  std::string id, queue;
  std::optional<std::string> key, group;
  double unique_for = 0;
  bool replace = false;
  std::vector<std::string> parents;
  bool after_run = false;
  double max_runtime = 0;
  std::int64_t max_attempts = 0;
  NewJob job() const {
    NewJob j;
    j.id = id;
    j.queue = queue;
    j.max_attempts = max_attempts;
    if (key) j.key = *key;
    j.unique_for = unique_for;
    j.replace = replace;
    if (group) j.group = *group;
    j.parents = parents.empty() ? nullptr : &parents;
    j.after_run = after_run;
    j.max_runtime = max_runtime;
    return j;
  }
};
inline bool enqueue_rich(Store& s, const Rich& r, double now) {
  return tx(s, [&] { return s.enqueue(r.job(), now); });
}
inline JobStatus status_of(Store& s, const std::string& id, double now) {
  return info(s, id, now).status;
}

}  // namespace store_contract

using namespace store_contract;

#include "store_contract/lease.hpp"
#include "store_contract/queue.hpp"
#include "store_contract/keys.hpp"
#include "store_contract/groups.hpp"
#include "store_contract/workflows.hpp"
#include "store_contract/lifecycle.hpp"
#include "store_contract/retention.hpp"
#include "store_contract/schedules.hpp"
#include "store_contract/steps.hpp"
#include "store_contract/suspends.hpp"
