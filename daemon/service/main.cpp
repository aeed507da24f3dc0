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

#include "transport/access.hpp"
#include "execution/clock.hpp"
#include "execution/executor.hpp"
#include "transport/fd_guard.hpp"
#include "http/http_server.hpp"
#include "base/logging.hpp"
#include "base/memory_policy.hpp"
#include "base/notify.hpp"
#include "base/options.hpp"
#include "outbox/outbox.hpp"
#include "transport/server.hpp"
#include "service/migrate_to_pg.hpp"
#include "service/open_store.hpp"

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
  if (uses_default && std::filesystem::create_directories("var")) sync_dir_of("var");
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
  explicit UmaskScope(unsigned mode) : old_(::umask(static_cast<mode_t>(~mode & 0777))) {}
  ~UmaskScope() { ::umask(old_); }
  UmaskScope(const UmaskScope&) = delete;
  UmaskScope& operator=(const UmaskScope&) = delete;

 private:
  mode_t old_;
};

void chmod_ipc_sockets(const Options& o) {
  std::vector<std::string> all = o.listen;
  all.insert(all.end(), o.events.begin(), o.events.end());
  for (const auto& e : all) {
    // Abstract (@name) and wildcard (*) endpoints have no file to chmod.
    if (e.rfind("ipc://", 0) != 0 || e.size() <= 6 || e[6] == '@' || e.substr(6) == "*") continue;
    if (::chmod(e.c_str() + 6, static_cast<mode_t>(o.ipc_mode)) != 0) {
      throw std::runtime_error("cannot set the mode of " + e.substr(6) + ": " +
                               std::strerror(errno));
    }
  }
}

// STATUS= for systemd: jobs by state, requests served. The jobs are counted
// by the stats reader off the serving thread, at most every kRecount; the
// line shows the last count that finished. The request figures are always
// current.
class StatusLine {
 public:
  explicit StatusLine(Executor& executor) : executor_(executor) {}

  std::string operator()() {
    using namespace std::chrono;
    if (steady_clock::now() >= next_count_) {
      executor_.counters().request_count();
      next_count_ = steady_clock::now() + kRecount;
    }
    const auto& st = executor_.counters().stats();
    std::string jobs = "jobs not counted yet";
    if (const auto& queues = executor_.counters().last_counts()) {
      std::int64_t total = 0, ready = 0, leased = 0, dead = 0;
      for (const auto& q : *queues) {
        ready += q.ready;
        leased += q.leased;
        dead += q.dead;
        total += q.ready + q.delayed + q.leased + q.done + q.dead;
      }
      jobs = fmt::format("{} jobs ({} ready, {} leased, {} dead)", total, ready, leased, dead);
    }
    return fmt::format(
        "{}, {} requests in {} batches{}", jobs, st.requests, st.batches,
        st.failed_commits ? fmt::format(", {} failed commits", st.failed_commits) : std::string());
  }

 private:
  static constexpr std::chrono::seconds kRecount{1};
  Executor& executor_;
  std::chrono::steady_clock::time_point next_count_{};
};

// --outbox: the application's outbox, drained on a thread of its own into
// transactions of `executor` (outbox.hpp); nullptr without one.
std::unique_ptr<Outbox> open_outbox(const Options& opt, Store& store, Executor& executor) {
  if (opt.outbox.empty()) return nullptr;
  const double poll = opt.outbox_poll > 0 ? opt.outbox_poll : is_postgres_uri(opt.outbox) ? 1.0 : 0.05;
  OutboxLedger* ledger = store.outbox_ledger();
  if (!ledger) {
    throw StoreError("--outbox needs the SQLite store: on PostgreSQL, call fenceq_enqueue() in "
                     "the application's transaction instead");
  }
  auto outbox = std::make_unique<Outbox>(make_outbox_source(opt.outbox),
                                         std::chrono::milliseconds(static_cast<long>(poll * 1000)),
                                         ledger->recorded());
  executor.drain_from(outbox.get());
  return outbox;
}

// --http-listen: /metrics, /healthz and the dashboard, asking `server`
// through an inproc socket; nullptr without it.
std::unique_ptr<HttpServer> start_http(const Options& opt, zmq::context_t& ctx, Server& server,
                                       Store& store, Executor& executor) {
  if (opt.metrics_listen.empty()) return nullptr;
  server.listen_internal(ctx, kHttpInproc);
  HttpOptions ho;
  ho.listen = opt.metrics_listen;
  ho.auth_file = opt.http_auth_file;
  ho.read_only = opt.http_read_only;
  ho.allowed_hosts = opt.http_allowed_hosts;
  ho.store = store.describe();
  ho.clock = std::string(protocol::clock_name(opt.clock));
  return std::make_unique<HttpServer>(ctx, ho, executor.counters().throughput());
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread or SQLite connection: see memory_policy.hpp.
  const bool memory_policy = apply_memory_policy();
  Options opt;
  if (auto rc = parse_options(argc, argv, opt)) return *rc;
  if (!opt.curve_keygen.empty()) return write_curve_keypair(opt.curve_keygen);
  if (!opt.migrate_to.empty()) return migrate_to_pg(opt.db, opt.migrate_to);
  if (!opt.outbox_schema.empty()) {
    std::cout << outbox_schema(opt.outbox_schema).value_or("");
    return 0;
  }

  init_logging(opt.log_level);  // journald-aware: see logging.hpp
  if (!memory_policy) spdlog::warn("the memory policy was not applied in full; see docs/operating.md");
  // Every connection takes a descriptor; see fd_guard.hpp.
  const long fd_limit = fd_guard::raise_limit();
  fd_guard::enable(fd_limit);

  int sfd = block_stop_signals();
  if (sfd < 0) {
    std::cerr << "fenceqd: cannot set up signal handling\n";
    return 1;
  }
  try {
    Access::check_endpoints(opt);  // before anything is created
    make_default_dirs(opt);
    // The store and the locks that make this daemon its only writer (C1.3),
    // before any bind, so that a second daemon never touches our sockets.
    auto opened = open_store(opt);
    Store& store = *opened.store;
    // The server clock starts at the stored high-water mark (C2.3): the
    // executor raises it from the store.
    Clock clock(opt.clock, 0.0);
    Executor executor(store, clock);
    // stats, /metrics and STATUS= count jobs on a connection and thread of
    // their own (stats_reader.hpp).
    std::unique_ptr<StatsReader> stats_reader;
    if (auto reader = store.open_reader()) {
      stats_reader = std::make_unique<StatsReader>(std::move(reader));
      executor.counters().count_with(stats_reader.get());
    }
    auto outbox = open_outbox(opt, store, executor);
    zmq::context_t ctx(1);
    Server server = [&] {
      UmaskScope umask(opt.ipc_mode);
      return Server(ctx, opt, executor);
    }();
    chmod_ipc_sockets(opt);
    auto http = start_http(opt, ctx, server, store, executor);  // stops before the server it asks

    std::string endpoints = std::accumulate(
        std::next(opt.listen.begin()), opt.listen.end(), opt.listen.front(),
        [](std::string a, const std::string& b) { return a + " " + b; });
    spdlog::info(
        "fenceqd {} started: db={} listen={} clock={} sync={} max_batch={} max_fds={} pid={}",
        protocol::kVersion, store.describe(), endpoints, protocol::clock_name(opt.clock),
        sync_name(opt.sync), opt.max_batch, fd_limit, ::getpid());

    // systemd (Type=notify): READY=1 now that the database is open and every
    // endpoint bound; STATUS= and WATCHDOG=1 from the serving loop; STOPPING=1.
    Notifier notify;
    StatusLine status(executor);
    if (auto every = notify.tick_interval()) {
      server.on_tick(*every, [&] {
        notify.watchdog();
        notify.status(status());
      });
    }
    if (notify.active()) {  // else nothing to compute: fenceqd runs exactly as without systemd
      executor.counters().count_now(std::chrono::milliseconds(2000));
      server.on_stopping([&] { notify.stopping("stopping after " + status()); });
      notify.ready(status());
    }

    if (outbox) outbox->start();
    auto reason = server.run(sfd);
    outbox.reset();  // its thread stops before the executor goes

    const auto& st = executor.counters().stats();
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
