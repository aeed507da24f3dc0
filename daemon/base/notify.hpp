// fenceqd's side of the systemd service protocol (sd_notify(3)): READY=1 once
// the database is open and every endpoint is bound, STATUS= with a live
// summary, WATCHDOG=1 from the serving loop, STOPPING=1 when draining starts.
//
// Without NOTIFY_SOCKET (not started by systemd with Type=notify) every call
// is a no-op and the daemon behaves exactly as it does otherwise.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace fenceq::daemon {

class Notifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID once.
  Notifier();

  // How often the serving loop must call watchdog() and status(): the shorter
  // of half of WATCHDOG_USEC (when systemd asks this process for a watchdog)
  // and the STATUS= refresh period of 5 s; nullopt without NOTIFY_SOCKET.
  std::optional<std::chrono::milliseconds> tick_interval() const { return tick_; }

  void ready(const std::string& status);
  void status(const std::string& status);
  // WATCHDOG=1 when a watchdog is configured and half of WATCHDOG_USEC has
  // passed since the last. Call only from the serving loop: a stuck loop must
  // stop the pings so that systemd restarts it.
  void watchdog();
  void stopping(const std::string& status);

  // NOTIFY_SOCKET is set: only then is there anything to compute for STATUS=.
  bool active() const { return enabled_; }

 private:
  void send(const std::string& state);

  bool enabled_ = false;  // NOTIFY_SOCKET is set
  bool watchdog_ = false;
  std::optional<std::chrono::milliseconds> tick_;
  std::chrono::milliseconds watchdog_every_{0};  // half of WATCHDOG_USEC
  std::chrono::steady_clock::time_point last_watchdog_;
  std::string last_status_;
};

// While a long piece of the start runs before READY=1 (a schema upgrade
// that rewrites every job, docs/operating.md "Upgrades"): tells systemd
// (EXTEND_TIMEOUT_USEC, with STATUS=) that the start goes on, so that its
// start timeout (90 s by default) does not stop the daemon, SIGKILL it and
// undo the work, and Restart= begin it again. Each call allows `allow` more
// from now; between calls, progress() sends again at most every 10 s, so a
// start that stops progressing still times out within `allow`. No-ops
// without NOTIFY_SOCKET.
class StartExtender {
 public:
  StartExtender(std::string status, std::chrono::seconds allow = std::chrono::seconds(60));
  void progress();

 private:
  bool enabled_ = false;
  std::string status_;
  std::chrono::seconds allow_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace fenceq::daemon
