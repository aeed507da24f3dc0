// fenceqd: the single writer of one fenceq job store.
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "access.hpp"
#include "clock.hpp"
#include "db_lock.hpp"
#include "executor.hpp"
#include "metrics_http.hpp"
#include "logging.hpp"
#include "notify.hpp"
#include "options.hpp"
#include "pg_store.hpp"
#include "sqlite_store.hpp"
#include "server.hpp"
#include "store.hpp"

namespace {

using namespace fenceq;
using namespace fenceq::daemon;

const char* sync_name(SyncMode s) {
  switch (s) {
    case SyncMode::full: return "full";
    case SyncMode::normal: return "normal";
    case SyncMode::off: return "off";
  }
  return "?";
}

// The defaults serve a local try-out from the repository root: create ./var
// for them, and only for them (a user's path with a missing folder is an error).
void make_default_dirs(const Options& o) {
  bool uses_default = o.db == kDefaultDb;
  for (const auto& e : o.listen) uses_default = uses_default || e == kDefaultEndpoint;
  if (uses_default) std::filesystem::create_directories("var");
}

// SIGTERM and SIGINT are blocked in every thread (ZeroMQ's included, which
// inherit the mask) and read from a signalfd by the serving loop.
int block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return -1;
  ::signal(SIGPIPE, SIG_IGN);
  // A file-size limit (ulimit -f, LimitFSIZE=) must fail the write, so the
  // batch is answered `internal` and rolled back, not kill the daemon.
  ::signal(SIGXFSZ, SIG_IGN);
  return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

// --ipc-mode: while the endpoints are bound the umask gives each ipc:// socket
// file exactly that mode from its first moment; a chmod afterwards makes sure.
class UmaskScope {
 public:
  explicit UmaskScope(std::optional<unsigned> mode) : set_(mode.has_value()) {
    if (set_) old_ = ::umask(static_cast<mode_t>(~*mode & 0777));
  }
  ~UmaskScope() {
    if (set_) ::umask(old_);
  }
  UmaskScope(const UmaskScope&) = delete;
  UmaskScope& operator=(const UmaskScope&) = delete;

 private:
  bool set_;
  mode_t old_ = 0;
};

void chmod_ipc_sockets(const Options& o) {
  if (!o.ipc_mode) return;
  for (const auto& e : o.listen) {
    // Abstract (@name) and wildcard (*) endpoints have no file to chmod.
    if (e.rfind("ipc://", 0) != 0 || e.size() <= 6 || e[6] == '@' || e.substr(6) == "*") continue;
    if (::chmod(e.c_str() + 6, static_cast<mode_t>(*o.ipc_mode)) != 0) {
      throw std::runtime_error("cannot set the mode of " + e.substr(6) + ": " +
                               std::strerror(errno));
    }
  }
}

// STATUS= for systemd: jobs by state, requests served. Counting the jobs
// scans the table on the serving thread, so SQLite itself stops the count
// after kCountBudget (a progress handler): a store too large for that shows
// "jobs uncounted" and is tried again after kRecountLarge. Counts are redone
// at most every kRecount; the request figures are always current.
class StatusLine {
 public:
  StatusLine(Store& store, const Executor& executor) : store_(store), executor_(executor) {}

  std::string operator()() {
    using namespace std::chrono;
    if (steady_clock::now() >= next_count_) count_jobs();
    const auto& st = executor_.stats();
    std::string jobs = counted_ ? fmt::format("{} jobs ({} ready, {} leased, {} dead)", jobs_.total,
                                              jobs_.ready, jobs_.leased, jobs_.dead)
                                : "jobs uncounted (large store: fenceq stats)";
    return fmt::format(
        "{}, {} requests in {} batches{}", jobs, st.requests, st.batches,
        st.failed_commits ? fmt::format(", {} failed commits", st.failed_commits) : std::string());
  }

 private:
  static constexpr std::chrono::milliseconds kCountBudget{20};
  static constexpr std::chrono::seconds kRecount{1}, kRecountLarge{600};

  void count_jobs() {
    using namespace std::chrono;
    double now = duration<double>(system_clock::now().time_since_epoch()).count();
    std::optional<std::vector<protocol::QueueStats>> queues;
    try {
      queues = store_.queue_stats_within(now, static_cast<int>(kCountBudget.count()));
    } catch (const std::exception& e) {
      spdlog::debug("STATUS could not count jobs: {}", e.what());
    }
    if (!queues) {
      counted_ = false;
      next_count_ = steady_clock::now() + kRecountLarge;
      return;
    }
    Jobs jobs;
    for (const auto& q : *queues) {
      jobs.ready += q.ready;
      jobs.leased += q.leased;
      jobs.dead += q.dead;
      jobs.total += q.ready + q.delayed + q.leased + q.done + q.dead;
    }
    jobs_ = jobs;
    counted_ = true;
    next_count_ = steady_clock::now() + kRecount;
  }

  struct Jobs {
    std::int64_t total = 0, ready = 0, leased = 0, dead = 0;
  };
  Store& store_;
  const Executor& executor_;
  Jobs jobs_;
  bool counted_ = false;
  std::chrono::steady_clock::time_point next_count_{};
};

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (auto rc = parse_options(argc, argv, opt)) return *rc;

  init_logging(opt.log_level);  // journald-aware: see logging.hpp

  int sfd = block_stop_signals();
  if (sfd < 0) {
    std::cerr << "fenceqd: cannot set up signal handling\n";
    return 1;
  }
  try {
    Access::check_endpoints(opt);  // before anything is created
    make_default_dirs(opt);
    // A SQLite file has one writer: a second daemon is refused before any
    // bind, so it never touches our sockets. PostgreSQL is shared by design.
    // Sidecars sharing PostgreSQL lock their IPC socket paths instead.
    std::vector<std::unique_ptr<DbLock>> locks;
    if (!opt.postgres()) {
      locks.push_back(std::make_unique<DbLock>(opt.db));
    } else {
      for (const auto& e : opt.listen) {
        if (e.starts_with("ipc://") && e.size() > 6 && e[6] != '@') {
          locks.push_back(std::make_unique<DbLock>(e.substr(6), "socket"));
        }
      }
    }
    // --sync full: every COMMIT fsyncs SQLite's WAL before it returns, and a
    // reply leaves only after its COMMIT (C1.4); one fsync covers the whole
    // batch (server.cpp). PostgreSQL commits durably itself (its
    // synchronous_commit).
    std::unique_ptr<Store> store_ptr = opt.postgres()
                                           ? open_pg_store(opt.pg_dsn)
                                           : std::make_unique<SqliteStore>(opt.db, opt.sync);
    Store& store = *store_ptr;
    Clock clock(opt.clock,
                opt.clock == protocol::ClockMode::server && !opt.postgres()
                    ? store.clock_high_water()  // PostgreSQL: read at the first transaction
                    : 0.0);
    Executor executor(store, clock);
    zmq::context_t ctx(1);
    Server server = [&] {
      UmaskScope umask(opt.ipc_mode);
      return Server(ctx, opt, executor);
    }();
    chmod_ipc_sockets(opt);
    std::unique_ptr<MetricsHttp> metrics_http;  // stops before the server it asks
    if (!opt.metrics_listen.empty()) {
      server.listen_internal(ctx, kMetricsInproc);
      metrics_http = std::make_unique<MetricsHttp>(ctx, opt.metrics_listen);
    }

    std::string endpoints = std::accumulate(
        std::next(opt.listen.begin()), opt.listen.end(), opt.listen.front(),
        [](std::string a, const std::string& b) { return a + " " + b; });
    spdlog::info("fenceqd {} started: db={} listen={} clock={} sync={} max_batch={} pid={}",
                 protocol::kVersion, store.describe(), endpoints, protocol::clock_name(opt.clock),
                 sync_name(opt.sync), opt.max_batch, ::getpid());

    // systemd (Type=notify): READY=1 now that the database is open and every
    // endpoint bound; STATUS= and WATCHDOG=1 from the serving loop; STOPPING=1.
    Notifier notify;
    StatusLine status(store, executor);
    if (auto every = notify.tick_interval()) {
      server.on_tick(*every, [&] {
        notify.watchdog();
        notify.status(status());
      });
    }
    if (notify.active()) {  // else nothing to compute: fenceqd runs exactly as without systemd
      server.on_stopping([&] { notify.stopping("stopping after " + status()); });
      notify.ready(status());
    }

    auto reason = server.run(sfd);

    const auto& st = executor.stats();
    spdlog::info(
        "fenceqd stopped ({}): {} requests in {} batches, {} commits ({} failed), {} refused at "
        "stop",
        reason == Server::StopReason::idle    ? "idle"
        : reason == Server::StopReason::fatal ? "fatal"
                                              : "signal",
        st.requests, server.batches(),
        st.commits, st.failed_commits, server.refused_at_stop());
    if (reason == Server::StopReason::fatal) return 1;
  } catch (const std::exception& e) {
    std::cerr << journal_prefix(3) << "fenceqd: " << e.what() << "\n";
    return 1;
  }
  ::close(sfd);
  return 0;
}
