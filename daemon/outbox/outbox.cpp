#include "outbox/outbox.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fenceq_protocol/codec.hpp"
#include "fenceq_protocol/limits.hpp"
#include "base/options.hpp"

namespace fenceq::daemon {
namespace {

namespace lim = fenceq::protocol;

// After a failure of the application's database: the next try.
constexpr std::chrono::seconds kRetryAfter{1};

void signal_fd(int fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
}

void drain_fd(int fd) {
  std::uint64_t v = 0;
  [[maybe_unused]] auto n = ::read(fd, &v, sizeof v);
}

}  // namespace

std::optional<std::string> outbox_row_error(const OutboxRow& r) {
  const auto n = [](auto v) { return std::to_string(v); };
  // What the protocol would refuse in a request (C4: text is UTF-8; a str,
  // not bin): such a job would make replies no client can decode (C3.21).
  if (!r.blobs.empty()) return r.blobs + " must be TEXT, not a BLOB";
  if (!protocol::valid_utf8(r.id)) return "id is not UTF-8";
  if (!protocol::valid_utf8(r.queue)) return "queue is not UTF-8";
  if (r.group && !protocol::valid_utf8(*r.group)) return "grp is not UTF-8";
  if (r.payload && !r.payload->binary && !protocol::valid_utf8(r.payload->bytes)) {
    return "payload is TEXT that is not UTF-8 (a BLOB is a binary payload)";
  }
  if (r.id.empty() || r.id.size() > lim::kMaxKeyBytes) {
    return "id must be 1 to " + n(lim::kMaxKeyBytes) + " bytes";
  }
  if (lim::is_tick_id(r.id)) return "id: NAME@YYYY-MM-DDTHH:MMZ is a periodic job's id";
  if (r.queue.empty() || r.queue.size() > lim::kMaxQueueBytes) {
    return "queue must be 1 to " + n(lim::kMaxQueueBytes) + " bytes";
  }
  if (r.payload && r.payload->bytes.size() > lim::kMaxPayloadBytes) {
    return "payload is longer than " + n(lim::kMaxPayloadBytes) + " bytes";
  }
  if (r.priority < INT32_MIN || r.priority > INT32_MAX) {
    return "priority must be an integer from -2^31 to 2^31-1";
  }
  if (!(r.delay >= 0 && r.delay <= 1e9)) return "delay must be from 0 to 1e9 seconds";
  if (r.max_attempts < 0 || r.max_attempts > 1000000) {
    return "max_attempts must be from 0 (no limit) to 1000000";
  }
  if (r.group && (r.group->empty() || r.group->size() > lim::kMaxGroupBytes)) {
    return "grp must be 1 to " + n(lim::kMaxGroupBytes) + " bytes";
  }
  if (!(r.max_runtime >= 0 && r.max_runtime <= 1e9)) {
    return "max_runtime must be > 0 and at most 1e9 seconds";
  }
  return std::nullopt;
}

Outbox::Outbox(std::unique_ptr<OutboxSource> source, std::chrono::milliseconds poll,
               std::vector<std::int64_t> drained)
    : source_(std::move(source)), poll_(poll), forget_(std::move(drained)) {
  ready_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ready_fd_ < 0 || stop_fd_ < 0) throw std::runtime_error("--outbox: eventfd failed");
  // Not reconciled yet: the seqs recorded before this start may have rows
  // still in the outbox (the last run stopped before deleting them).
  reconciled_ = forget_.empty();
}

Outbox::~Outbox() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  signal_fd(stop_fd_);
  if (thread_.joinable()) thread_.join();
  source_->close();
  ::close(ready_fd_);
  ::close(stop_fd_);
}

void Outbox::start() { thread_ = std::thread([this] { run(); }); }

std::optional<Outbox::Handoff> Outbox::take() {
  drain_fd(ready_fd_);
  std::lock_guard lock(mu_);
  if (!waiting_ || taken_) return std::nullopt;
  taken_ = true;
  return std::move(*waiting_);  // the drain thread kept the seqs it needs
}

void Outbox::done(bool committed) {
  {
    std::lock_guard lock(mu_);
    result_ = committed;
  }
  cv_.notify_all();
}

std::optional<bool> Outbox::hand_off(Handoff h) {
  std::unique_lock lock(mu_);
  waiting_ = std::move(h);
  taken_ = false;
  result_.reset();
  signal_fd(ready_fd_);
  cv_.wait(lock, [&] { return stopping_ || result_.has_value(); });
  waiting_.reset();
  if (stopping_) return std::nullopt;
  return result_;
}

void Outbox::reconcile() {
  // The recorded seqs whose rows are gone: forgotten in the next hand-off;
  // the others are found recorded when read, and deleted then.
  auto still = source_->present(forget_);
  std::sort(still.begin(), still.end());
  std::erase_if(forget_, [&](std::int64_t s) { return std::binary_search(still.begin(), still.end(), s); });
  reconciled_ = true;
}

void Outbox::refresh_backlog() {
  const auto [rows, age] = source_->backlog();
  counts_.pending.store(rows, std::memory_order_relaxed);
  counts_.lag.store(age, std::memory_order_relaxed);
}

bool Outbox::round() {
  if (!reconciled_) reconcile();
  auto rows = source_->read(kPage, kPageBytes);
  if (rows.empty() && forget_.empty()) {
    refresh_backlog();
    return false;
  }
  std::vector<std::int64_t> seqs;
  seqs.reserve(rows.size());
  for (const auto& r : rows) seqs.push_back(r.seq);
  auto committed = hand_off(Handoff{std::move(rows), forget_});
  if (!committed) return false;  // stopping
  if (!*committed) {
    // Nothing recorded, nothing forgotten: the same round again later.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return true;
  }
  forget_.clear();
  if (!seqs.empty()) {
    source_->remove(seqs);  // a failure: read again, found recorded, deleted then
    forget_ = std::move(seqs);
  }
  refresh_backlog();
  return true;
}

void Outbox::run() {
  bool open = false, look = true;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    try {
      if (!open) {
        source_->open();
        open = true;
        spdlog::info("--outbox: draining fenceq_outbox of {}", source_->describe());
      }
      // A round that did something: at once again (rows may be left).
      if (look && round()) continue;
      look = source_->wait(poll_, stop_fd_);
    } catch (const std::exception& e) {
      spdlog::error("--outbox {}: {}; trying again in {} s", source_->describe(), e.what(),
                    kRetryAfter.count());
      source_->close();
      open = false;
      look = true;
      for (int i = 0; i < 10; ++i) {
        {
          std::lock_guard lock(mu_);
          if (stopping_) return;
        }
        std::this_thread::sleep_for(kRetryAfter / 10);
      }
    }
  }
}

std::unique_ptr<OutboxSource> make_pg_outbox(const std::string& uri);
std::unique_ptr<OutboxSource> make_sqlite_outbox(const std::string& path);

std::unique_ptr<OutboxSource> make_outbox_source(const std::string& uri) {
  if (uri.empty()) throw std::invalid_argument("--outbox: empty");
  if (is_postgres_uri(uri)) return make_pg_outbox(uri);
  return make_sqlite_outbox(uri);
}

}  // namespace fenceq::daemon
