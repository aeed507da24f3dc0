#include "syncer.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace fenceq::daemon {

Syncer::Syncer(std::string wal_path) : wal_path_(std::move(wal_path)) {
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) throw std::runtime_error("eventfd failed");
  thread_ = std::thread([this] { loop(); });
}

Syncer::~Syncer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (wal_fd_ >= 0) ::close(wal_fd_);
  ::close(event_fd_);
}

void Syncer::request(std::uint64_t gen) {
  {
    std::lock_guard lock(mu_);
    if (gen <= requested_) return;
    requested_ = gen;
  }
  cv_.notify_one();
}

void Syncer::clear_event() {
  std::uint64_t v;
  [[maybe_unused]] auto n = ::read(event_fd_, &v, sizeof v);
}

void Syncer::wait_all() {
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return synced() >= requested_ || failed(); });
}

std::string Syncer::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

void Syncer::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || requested_ > synced(); });
    if (requested_ <= synced()) return;  // stopping, and nothing left to sync
    const std::uint64_t gen = requested_;
    lock.unlock();
    // Every commit up to `gen` has written its WAL frames: one fdatasync
    // covers them all (and any written since).
    std::string err;
    if (wal_fd_ < 0) wal_fd_ = ::open(wal_path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (wal_fd_ < 0) {
      err = "cannot open " + wal_path_ + ": " + std::strerror(errno);
    } else if (::fdatasync(wal_fd_) != 0) {
      err = "fdatasync " + wal_path_ + ": " + std::strerror(errno);
    }
    lock.lock();
    if (!err.empty()) {
      // A failed fsync cannot be retried safely (the kernel may have dropped
      // the dirty pages): nothing after it is known durable.
      error_ = err;
      failed_.store(true, std::memory_order_release);
    } else {
      synced_.store(gen, std::memory_order_release);
    }
    done_cv_.notify_all();
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof one);
    if (failed()) return;
  }
}

}  // namespace fenceq::daemon
