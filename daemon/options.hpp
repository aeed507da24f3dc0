// fenceqd's command line (protocol-v1 "Daemon command line" plus extensions).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "fenceq_protocol/codec.hpp"
#include "store.hpp"

namespace fenceq::daemon {

inline constexpr const char* kDefaultDb = "var/fenceq.db";
inline constexpr const char* kDefaultEndpoint = "ipc://var/fenceqd.sock";

struct Options {
  std::string db = kDefaultDb;
  std::vector<std::string> listen{kDefaultEndpoint};
  protocol::ClockMode clock = protocol::ClockMode::server;
  SyncMode sync = SyncMode::full;
  std::size_t max_message = protocol::kDefaultMaxMessage;
  std::size_t max_batch = 256;
  std::string log_level = "info";
  double idle_exit = 0;  // seconds without requests before exiting by itself; 0 = never
};

// Parses the command line into `out`. Returns an exit status when the process
// should stop now (--help, --version: 0; a bad option: 2, reason on stderr).
std::optional<int> parse_options(int argc, char** argv, Options& out);

}  // namespace fenceq::daemon
