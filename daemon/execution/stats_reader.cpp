#include "execution/stats_reader.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace fenceq::daemon {

namespace {

// A `list` reply's errors together stay under this: a page of 1,000 jobs with
// 64 KiB errors each would otherwise make one 66 MiB reply (and a client
// asking again and again without reading, many). Each error may take
// kListErrorBudget / rows, at least kListErrorFloor: at the default page of
// 100 no error (64 KiB at most) is ever cut.
constexpr std::size_t kListErrorBudget = 8 * 1024 * 1024;
constexpr std::size_t kListErrorFloor = 1024;

// The longest prefix of `s` of at most `n` bytes that ends on a UTF-8
// character boundary (strings on the wire must stay valid UTF-8).
std::size_t utf8_prefix(const std::string& s, std::size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

StatsReader::StatsReader(std::unique_ptr<StoreReads> reader) : reader_(std::move(reader)) {
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

protocol::JobList bounded_page(protocol::JobList jobs) {
  if (jobs.empty()) return jobs;
  const std::size_t each = std::max(kListErrorFloor, kListErrorBudget / jobs.size());
  for (auto& j : jobs) {
    if (!j.error || j.error->size() <= each) continue;
    const std::size_t full = j.error->size();
    std::string note = " [... cut by fenceqd: " + std::to_string(full) +
                       " bytes in all; list fewer jobs per page to see more]";
    j.error->resize(utf8_prefix(*j.error, each > note.size() ? each - note.size() : 0));
    *j.error += note;
  }
  return jobs;
}

ListFilter list_filter(const protocol::req::List& r) {
  ListFilter f;
  if (r.queue) f.queue = *r.queue;
  f.status = r.status;
  f.limit = r.limit;
  if (r.cursor) f.after = *r.cursor;
  f.order = r.order;
  f.after_created = r.after_created;
  if (r.prefix) f.prefix = *r.prefix;
  if (r.key) f.key = *r.key;
  if (r.group) f.group = *r.group;
  return f;
}

std::uint64_t StatsReader::request_list(const protocol::req::List& list, double now,
                                        const std::optional<protocol::Rid>& rid) {
  std::uint64_t n;
  {
    std::lock_guard lock(mutex_);
    n = ++lists_asked_;
    lists_.push_back({n, list, now, rid});
  }
  wake_.notify_one();
  return n;
}

std::vector<StatsReader::Listed> StatsReader::take_lists() {
  std::lock_guard lock(mutex_);
  return std::exchange(listed_, {});
}

void StatsReader::read_lists(std::vector<ListAsked> asked) {
  for (auto& a : asked) {
    {
      // A stop does not wait for the pages still to read (fenceqd answers
      // their requests unavailable as it stops).
      std::lock_guard lock(mutex_);
      if (stop_) return;
    }
    Listed l;
    l.number = a.number;
    try {
      l.reply = protocol::encode_ok(
          protocol::Result{bounded_page(reader_->list(list_filter(a.request), a.now))},
          a.rid);
    } catch (const std::exception& e) {
      spdlog::warn("reading a page of jobs failed: {}", e.what());
      l.reply = protocol::encode_error(
          {protocol::ErrorCode::unavailable, std::string("reading the jobs failed: ") + e.what()},
          a.rid);
    }
    {
      std::lock_guard lock(mutex_);
      listed_.push_back(std::move(l));
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof one);
  }
}

void StatsReader::loop() {
  using Steady = std::chrono::steady_clock;
  auto next_start = Steady::now();
  for (;;) {
    std::uint64_t number;
    double now;
    std::vector<ListAsked> lists;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !lists_.empty() || requested_ > done_.number; });
      if (stop_) return;
      // Pages first: they do not wait for the gap between counts.
      if (lists_.empty()) {
        // The gap since the last count: requests meanwhile join this one.
        if (wake_.wait_until(lock, next_start, [&] { return stop_ || !lists_.empty(); })) {
          if (stop_) return;
        }
      }
      lists.swap(lists_);
      number = requested_;
      now = now_;
    }
    if (!lists.empty()) {
      // Not paced as counts are: an operator paging waits for no gap, and
      // this one thread reads one page at a time.
      read_lists(std::move(lists));
      continue;
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
