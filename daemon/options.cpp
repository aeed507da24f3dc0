#include "options.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <map>

namespace fenceq::daemon {

std::optional<int> parse_options(int argc, char** argv, Options& out) {
  CLI::App app{"fenceqd: lease-and-fencing-token job queue daemon (single writer of one SQLite file)",
               "fenceqd"};
  app.set_version_flag("--version", "fenceqd " + std::string(protocol::kVersion) +
                                        " (protocol " +
                                        std::to_string(protocol::kProtocolVersion) + ")");
  app.option_defaults()->always_capture_default();

  app.add_option("--db", out.db, "SQLite database file (created if missing)");
  app.add_option("--listen", out.listen,
                 "ZeroMQ endpoint to serve (repeatable): ipc://PATH, or tcp://HOST:PORT when asked for")
      ->take_all();
  std::map<std::string, protocol::ClockMode> clocks{{"server", protocol::ClockMode::server},
                                                    {"client", protocol::ClockMode::client}};
  app.add_option("--clock", out.clock,
                 "server: the daemon's own clock; client: each request carries `now` (tests, "
                 "simulations)")
      ->transform(CLI::CheckedTransformer(clocks, CLI::ignore_case))
      ->default_str("server");
  std::map<std::string, SyncMode> syncs{
      {"full", SyncMode::full}, {"normal", SyncMode::normal}, {"off", SyncMode::off}};
  app.add_option("--sync", out.sync,
                 "full: every commit fsynced before its replies; normal: WAL synced at "
                 "checkpoints (a power loss may drop recent commits); off: no fsync")
      ->transform(CLI::CheckedTransformer(syncs, CLI::ignore_case))
      ->default_str("full");
  app.add_option("--max-message", out.max_message,
                 "largest request payload frame in bytes; larger ones drop the connection")
      ->check(CLI::Range(std::size_t{64}, std::size_t{1} << 30));
  app.add_option("--max-batch", out.max_batch, "most requests committed in one transaction")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  app.add_option("--log-level", out.log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--idle-exit", out.idle_exit,
                 "exit by itself after this many seconds without a request (0: never)")
      ->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "fenceqd: " << e.what() << " (see fenceqd --help)\n";
    return 2;
  }
  if (out.listen.empty()) {
    std::cerr << "fenceqd: at least one --listen endpoint is needed\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace fenceq::daemon
