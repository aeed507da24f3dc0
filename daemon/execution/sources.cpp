// The executor's side channels (source.hpp), one class each: what each one
// watches (a descriptor, a due time, input queued out of the descriptor's
// sight) and the side transaction it runs. Executor::sources() lists them in
// the order the serving loop runs them; a new side channel is a class here
// and a line in make_sources().
#include "execution/executor.hpp"

namespace fenceq::daemon {

namespace {
using TimePoint = Source::SteadyClock::time_point;
}

// A shared database's wake-ups (another writer freed a job): read when its
// descriptor is readable, and after our own statements ran (a batch, a side
// transaction), since the client library then may have read some off the
// socket already; parked claims of the queues named are retried.
class Executor::Wakeups final : public Source {
 public:
  explicit Wakeups(Executor& e) : e_(e) {}
  const char* name() const override { return "wake-ups"; }
  int fd() const override { return e_.store_.shared() ? e_.store_.shared()->wakeup_fd() : -1; }
  bool polled() const override { return e_.store_.shared() != nullptr; }
  bool pending() const override { return e_.wakeups_unread_ && fd() >= 0; }
  void run(std::vector<Delivery>& out) override { e_.wake(out); }

 private:
  Executor& e_;
};

// The stats reader's answers (stats, metrics, list pages), made on its thread.
class Executor::StatsCounts final : public Source {
 public:
  explicit StatsCounts(Executor& e) : e_(e) {}
  const char* name() const override { return "stats reader"; }
  int fd() const override { return e_.counters_.stats_fd(); }
  void run(std::vector<Delivery>& out) override {
    for (auto& d : e_.counters_.counted()) out.push_back(std::move(d));
  }

 private:
  Executor& e_;
};

// --outbox: the rows its thread handed off.
class Executor::OutboxRows final : public Source {
 public:
  explicit OutboxRows(Executor& e) : e_(e) {}
  const char* name() const override { return "outbox"; }
  int fd() const override { return e_.outbox_ ? e_.outbox_->fd() : -1; }
  void run(std::vector<Delivery>& out) override { e_.drain_outbox(out); }

 private:
  Executor& e_;
};

// Awaits whose wait ended (nil), and the sweep for jobs finished elsewhere.
class Executor::AwaitEnds final : public Source {
 public:
  explicit AwaitEnds(Executor& e) : e_(e) {}
  const char* name() const override { return "awaits"; }
  std::optional<TimePoint> due() const override { return e_.awaits_.next_tick(); }
  void run(std::vector<Delivery>& out) override { e_.awaits_.tick(out); }

 private:
  Executor& e_;
};

// Periodic jobs whose tick came.
class Executor::ScheduleTicks final : public Source {
 public:
  explicit ScheduleTicks(Executor& e) : e_(e) {}
  const char* name() const override { return "schedules"; }
  std::optional<TimePoint> due() const override { return e_.schedules_.next_tick(); }
  void run(std::vector<Delivery>& out) override {
    if (e_.schedules_.due()) e_.run_schedules(out);
  }

 private:
  Executor& e_;
};

// Retention's passes of their own, once idle.
class Executor::RetentionPasses final : public Source {
 public:
  explicit RetentionPasses(Executor& e) : e_(e) {}
  const char* name() const override { return "retention"; }
  std::optional<TimePoint> due() const override { return e_.retention_.next_tick(); }
  void run(std::vector<Delivery>& out) override {
    if (e_.retention_.ready()) e_.run_retention(out);
  }

 private:
  Executor& e_;
};

// The settling transactions left of their parents' children (C3.13).
class Executor::SettleSteps final : public Source {
 public:
  explicit SettleSteps(Executor& e) : e_(e) {}
  const char* name() const override { return "settle steps"; }
  std::optional<TimePoint> due() const override { return e_.settle_tick(); }
  void run(std::vector<Delivery>& out) override { e_.run_settle(out); }

 private:
  Executor& e_;
};

// The steps of a purge without a filter, one a turn (purge_all.cpp).
class Executor::PurgeSteps final : public Source {
 public:
  explicit PurgeSteps(Executor& e) : e_(e) {}
  const char* name() const override { return "purge steps"; }
  std::optional<TimePoint> due() const override {
    if (e_.purges_.empty()) return std::nullopt;
    return kAtOnce;
  }
  void run(std::vector<Delivery>& out) override { e_.run_purges(out); }

 private:
  Executor& e_;
};

// What the store leaves to a transaction of its own (Store::upkeep_due).
class Executor::StoreUpkeep final : public Source {
 public:
  explicit StoreUpkeep(Executor& e) : e_(e) {}
  const char* name() const override { return "store upkeep"; }
  std::optional<TimePoint> due() const override { return e_.store_.upkeep_due(); }
  void run(std::vector<Delivery>& out) override {
    e_.side_transaction("the store's upkeep", out, [](std::vector<Woken>&) { return true; });
  }

 private:
  Executor& e_;
};

// Waits that timed out and deadlines that passed (C3.23, C3.24) while no
// request came to reap them: every kReapEvery after the last reap, while the
// store may hold some (server clock: a client clock's time moves with
// requests alone).
class Executor::WaitEnds final : public Source {
 public:
  explicit WaitEnds(Executor& e) : e_(e) {}
  const char* name() const override { return "waits"; }
  std::optional<TimePoint> due() const override { return e_.waits_due(); }
  void run(std::vector<Delivery>& out) override { e_.end_waits(out); }

 private:
  Executor& e_;
};

// Parked claims whose wait ended (nil), and the retries of those that may
// find a job: a write or a settle step marked their queue, or (server clock)
// a lease or delay of it ends by time alone. Last, so that the queues the
// sources before it marked are retried in the same turn.
class Executor::ParkedRetries final : public Source {
 public:
  explicit ParkedRetries(Executor& e) : e_(e) {}
  const char* name() const override { return "parked claims"; }
  std::optional<TimePoint> due() const override { return e_.claims_.next_tick(); }
  void run(std::vector<Delivery>& out) override {
    e_.claims_.expire(SteadyClock::now(), out);
    if (e_.claims_.dirty() || (e_.retries_by_time() && e_.claims_.due())) e_.retry_parked(out);
  }

 private:
  Executor& e_;
};

void Executor::make_sources() {
  owned_sources_.push_back(std::make_unique<Wakeups>(*this));
  owned_sources_.push_back(std::make_unique<StatsCounts>(*this));
  owned_sources_.push_back(std::make_unique<OutboxRows>(*this));
  owned_sources_.push_back(std::make_unique<AwaitEnds>(*this));
  owned_sources_.push_back(std::make_unique<ScheduleTicks>(*this));
  owned_sources_.push_back(std::make_unique<RetentionPasses>(*this));
  owned_sources_.push_back(std::make_unique<SettleSteps>(*this));
  owned_sources_.push_back(std::make_unique<PurgeSteps>(*this));
  owned_sources_.push_back(std::make_unique<StoreUpkeep>(*this));
  owned_sources_.push_back(std::make_unique<WaitEnds>(*this));
  owned_sources_.push_back(std::make_unique<ParkedRetries>(*this));
  for (const auto& s : owned_sources_) sources_.push_back(s.get());
}

}  // namespace fenceq::daemon
