// fenceqd's command line (protocol-v1 "Daemon command line" plus extensions).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fenceq_protocol/codec.hpp"
#include "base/sync_mode.hpp"

namespace fenceq::daemon {

enum class StoreKind { sqlite, postgres };

// True when `db` names a PostgreSQL database (a postgresql:// or postgres://
// URI) rather than a SQLite file.
bool is_postgres_uri(std::string_view db);

inline constexpr const char* kDefaultDb = "var/fenceq.db";
inline constexpr const char* kDefaultEndpoint = "ipc://var/fenceqd.sock";

struct Options {
  std::string db = kDefaultDb;
  // From --store (as given: store_option), else from --db (a postgresql://
  // URI or a file).
  StoreKind store = StoreKind::sqlite;
  std::string store_option;
  std::string pg_dsn;  // the PostgreSQL connection string (--pg-dsn, or a URI --db)
  std::vector<std::string> listen{kDefaultEndpoint};
  // --events (C3.19): endpoints that publish every committed job change.
  std::vector<std::string> events;
  // --outbox (C3.21): the application's database (a postgresql:// URI or
  // a SQLite file) whose fenceq_outbox rows become jobs; "" (the default): none.
  std::string outbox;
  double outbox_poll = 0;  // seconds between looks; 0: 0.05 on SQLite, 1 on PostgreSQL
  std::string outbox_schema;  // --outbox-schema KIND: print fenceq_outbox's schema and exit
  protocol::ClockMode clock = protocol::ClockMode::server;
  SyncMode sync = SyncMode::full;
  // --restored: the database is a restored copy (C1.5): every fence is raised
  // to a new epoch and every lease ends, at this start.
  bool restored = false;
  std::size_t max_message = protocol::kDefaultMaxMessage;
  std::size_t max_batch = 256;
  std::string log_level = "info";
  double idle_exit = 0;  // seconds without requests before exiting by itself; 0 = never
  // HOST:PORT of the Prometheus /metrics endpoint; "" (the default): off.
  // Only loopback hosts are accepted: the figures are for local scrapers.
  std::string metrics_listen;  // --http-listen (also --metrics-listen)
  std::optional<std::string> http_auth_file;
  bool http_read_only = false;
  std::vector<std::string> http_allowed_hosts;  // besides the listen address and localhost
  // Permission bits given to every ipc:// socket file right at bind (e.g.
  // 0660: the daemon's group may connect, others not), whatever the umask:
  // by default the daemon's user alone may connect.
  unsigned ipc_mode = 0600;
  // tcp:// endpoints (access.hpp): refused unless allow_tcp, and then served
  // with CURVE only: the server's secret key file, and the file listing the
  // public keys of the clients let in.
  bool allow_tcp = false;
  std::string curve_secret_key;
  std::string curve_allowed_clients;
  std::string curve_keygen;  // --curve-keygen FILE: write a new key pair there and exit
  // --migrate-to URI: copy the stopped SQLite store --db into this
  // PostgreSQL database and exit (service/migrate_to_pg.hpp).
  std::string migrate_to;
  std::string config;  // the --config file that was read, "" when none
};

// Parses the command line into `out`. With --config FILE, FILE's `key = value`
// lines (the long options' names) come first and the command line wins over
// them. Returns an exit status when the process should stop now (--help,
// --version: 0; a bad option or a bad config line: 2, one line on stderr naming
// FILE:LINE for the latter). With --curve-keygen or --outbox-schema nothing
// else is checked: the caller writes the key pair or prints the schema, then
// exits.
std::optional<int> parse_options(int argc, char** argv, Options& out);

}  // namespace fenceq::daemon
