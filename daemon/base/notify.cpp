#include "base/notify.hpp"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace fenceq::daemon {
namespace {

// STATUS= is refreshed at most this often when there is no faster watchdog.
constexpr std::chrono::milliseconds kStatusPeriod{5000};
// systemd's smallest useful watchdog is far above this; it guards against a
// WATCHDOG_USEC of a few microseconds turning the loop into a busy wait.
constexpr std::chrono::milliseconds kMinTick{10};

}  // namespace

Notifier::Notifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket && *socket;
  if (!enabled_) return;  // nobody to tell: no ticks, no work at all
  std::uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID (if set) is this process.
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_ = true;
    watchdog_every_ = std::max(kMinTick, std::chrono::milliseconds(usec / 2000));
  }
  tick_ = watchdog_ ? std::min(watchdog_every_, kStatusPeriod) : kStatusPeriod;
  last_watchdog_ = std::chrono::steady_clock::now();
}

void Notifier::send(const std::string& state) {
  if (!enabled_) return;
  int rc = sd_notify(0, state.c_str());
  if (rc < 0) spdlog::debug("sd_notify failed: {}", rc);
}

void Notifier::ready(const std::string& status) {
  last_status_ = status;
  send("READY=1\nSTATUS=" + status);
}

void Notifier::status(const std::string& status) {
  if (status == last_status_) return;
  last_status_ = status;
  send("STATUS=" + status);
}

void Notifier::watchdog() {
  if (!watchdog_) return;
  // Ticks may come more often than the watchdog needs (for STATUS=): ping at
  // half of WATCHDOG_USEC, with half a tick of slack for a tick that is late.
  auto now = std::chrono::steady_clock::now();
  if (now - last_watchdog_ < watchdog_every_ - *tick_ / 2) return;
  last_watchdog_ = now;
  send("WATCHDOG=1");
}

void Notifier::stopping(const std::string& status) {
  last_status_ = status;
  send("STOPPING=1\nSTATUS=" + status);
}

StartExtender::StartExtender(std::string status, std::chrono::seconds allow)
    : status_(std::move(status)), allow_(allow) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket && *socket;
  last_ = std::chrono::steady_clock::now() - std::chrono::hours(1);
  progress();
}

void StartExtender::progress() {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::seconds(10)) return;
  last_ = now;
  const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(allow_).count();
  int rc =
      sd_notify(0, ("EXTEND_TIMEOUT_USEC=" + std::to_string(usec) + "\nSTATUS=" + status_).c_str());
  if (rc < 0) spdlog::debug("sd_notify failed: {}", rc);
}

}  // namespace fenceq::daemon
