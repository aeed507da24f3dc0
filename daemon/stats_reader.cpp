#include "stats_reader.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <stdexcept>

namespace fenceq::daemon {

StatsReader::StatsReader(std::unique_ptr<Store> reader) : reader_(std::move(reader)) {
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) throw std::runtime_error("cannot create an eventfd for the stats reader");
  thread_ = std::thread([this] { loop(); });
}

StatsReader::~StatsReader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
  ::close(event_fd_);
}

std::uint64_t StatsReader::request(double now) {
  std::uint64_t n;
  {
    std::lock_guard lock(mutex_);
    n = ++requested_;
    now_ = now;
  }
  wake_.notify_one();
  return n;
}

StatsReader::Count StatsReader::latest() {
  std::uint64_t drained;
  while (::read(event_fd_, &drained, sizeof drained) > 0) {
  }
  std::lock_guard lock(mutex_);
  return done_;
}

void StatsReader::loop() {
  using Steady = std::chrono::steady_clock;
  auto next_start = Steady::now();
  for (;;) {
    std::uint64_t number;
    double now;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || requested_ > done_.number; });
      if (stop_) return;
      // The gap since the last count: requests meanwhile join this one.
      if (wake_.wait_until(lock, next_start, [&] { return stop_; })) return;
      number = requested_;
      now = now_;
    }
    const auto started = Steady::now();
    Count c;
    c.number = number;
    try {
      c.queues = reader_->queue_stats(now);
    } catch (const std::exception& e) {
      c.error = e.what();
      spdlog::warn("counting jobs failed: {}", e.what());
    }
    const auto took = Steady::now() - started;
    next_start = Steady::now() + std::max<Steady::duration>(took, kMinGap);
    {
      std::lock_guard lock(mutex_);
      done_ = std::move(c);
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof one);
  }
}

}  // namespace fenceq::daemon
