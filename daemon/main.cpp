// fenceqd: the single writer of one fenceq job store.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <numeric>

#include "clock.hpp"
#include "db_lock.hpp"
#include "executor.hpp"
#include "options.hpp"
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
  return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (auto rc = parse_options(argc, argv, opt)) return *rc;

  auto logger = spdlog::stderr_color_mt("fenceqd");
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(opt.log_level));

  int sfd = block_stop_signals();
  if (sfd < 0) {
    std::cerr << "fenceqd: cannot set up signal handling\n";
    return 1;
  }
  try {
    make_default_dirs(opt);
    DbLock lock(opt.db);  // before any bind: a second daemon must not touch our sockets
    Store store(opt.db, opt.sync);
    Clock clock(opt.clock,
                opt.clock == protocol::ClockMode::server ? store.clock_high_water() : 0.0);
    Executor executor(store, clock);
    zmq::context_t ctx(1);
    Server server(ctx, opt, executor);

    std::string endpoints = std::accumulate(
        std::next(opt.listen.begin()), opt.listen.end(), opt.listen.front(),
        [](std::string a, const std::string& b) { return a + " " + b; });
    spdlog::info("fenceqd {} started: db={} listen={} clock={} sync={} max_batch={} pid={}",
                 protocol::kVersion, opt.db, endpoints, protocol::clock_name(opt.clock),
                 sync_name(opt.sync), opt.max_batch, ::getpid());

    auto reason = server.run(sfd);

    const auto& st = executor.stats();
    spdlog::info(
        "fenceqd stopped ({}): {} requests in {} batches, {} commits ({} failed), {} refused at "
        "stop",
        reason == Server::StopReason::idle ? "idle" : "signal", st.requests, server.batches(),
        st.commits, st.failed_commits, server.refused_at_stop());
  } catch (const std::exception& e) {
    std::cerr << "fenceqd: " << e.what() << "\n";
    return 1;
  }
  ::close(sfd);
  return 0;
}
