#include "base/options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <variant>

#include "base/logging.hpp"

namespace fenceq::daemon {

namespace {

// --http-listen and the dashboard's options.
void define_http_options(CLI::App& app, Options& out) {
  app.add_option("--http-listen,--metrics-listen", out.metrics_listen,
                 "serve HTTP at HOST:PORT (loopback only; default: off): /metrics "
                 "(Prometheus) and /healthz for anyone, and with --http-auth-file the "
                 "dashboard at / (--metrics-listen is its old name)");
  app.add_option("--http-auth-file", out.http_auth_file,
                 "the dashboard's users, `user:password` lines, in a file readable by "
                 "fenceqd's user alone (0600) or its group too (0640); without it there is "
                 "no dashboard")
      ->type_name("FILE");
  app.add_option("--http-allowed-hosts", out.http_allowed_hosts,
                 "host names the dashboard may be reached by besides the listen address and "
                 "localhost (a reverse proxy's name); a request naming another host in its "
                 "Host header is refused (421), against DNS rebinding")
      ->delimiter(',')
      ->type_name("HOST,...");
  app.add_flag("--http-read-only", out.http_read_only,
               "the dashboard shows, never acts: every action is refused (405)");
}

// Who may connect: the IPC sockets' mode, TCP with CURVE.
void define_access_options(CLI::App& app, Options& out) {
  app.add_option_function<std::string>(
         "--ipc-mode",
         [&out](const std::string& s) { out.ipc_mode = std::stoul(s, nullptr, 8); },
         "permission bits of each ipc:// socket file, in octal (e.g. 0660: the daemon's group "
         "may connect); default: 0600, the daemon's user alone, whatever the umask")
      ->check(CLI::Validator(
          [](std::string& s) {
            bool octal = !s.empty() && s.size() <= 4 &&
                         s.find_first_not_of("01234567") == std::string::npos &&
                         std::stoul(s, nullptr, 8) <= 0777;
            return octal ? std::string() : "must be octal permission bits such as 0660";
          },
          ""))
      ->type_name("MODE");
  app.add_flag("--allow-tcp", out.allow_tcp,
               "serve tcp:// endpoints (refused otherwise), with CURVE authentication only");
  app.add_option("--curve-secret-key", out.curve_secret_key,
                 "the daemon's CURVE secret key file (mode 0600), for tcp:// endpoints")
      ->type_name("FILE");
  app.add_option("--curve-allowed-clients", out.curve_allowed_clients,
                 "file of the CURVE public keys of the clients allowed on tcp:// endpoints")
      ->type_name("FILE");
  app.add_option("--curve-keygen", out.curve_keygen,
                 "write a new CURVE key pair to FILE (never overwritten), print its public key "
                 "and exit")
      ->type_name("FILE");
}

// Every option of fenceqd, bound to `out`. Called for the command line and
// again for each line of a config file, so both accept exactly the same keys.
void define_options(CLI::App& app, Options& out) {
  app.set_version_flag("--version", "fenceqd " + std::string(protocol::kVersion) +
                                        " (protocol " +
                                        std::to_string(protocol::kProtocolVersion) + ")");
  app.option_defaults()->always_capture_default();

  app.add_option("--db", out.db,
                 "SQLite database file (created if missing), or a postgresql:// URI: a "
                 "PostgreSQL database shared by the fenceqd sidecars of many hosts");
  app.add_option("--store", out.store_option, "sqlite or postgres; default: from --db")
      ->check(CLI::IsMember({"sqlite", "postgres"}));
  app.add_option("--pg-dsn", out.pg_dsn,
                 "PostgreSQL connection string (URI or key=value), with --store postgres");
  app.add_option("--listen", out.listen,
                 "ZeroMQ endpoint to serve (repeatable): ipc://PATH, or tcp://HOST:PORT when asked for")
      ->take_all();
  app.add_option("--events", out.events,
                 "publish every committed job change on this ZeroMQ endpoint (repeatable; an "
                 "XPUB socket for SUB subscribers: ipc://PATH, or tcp://HOST:PORT with "
                 "--allow-tcp and CURVE)");
  app.add_option("--outbox", out.outbox,
                 "drain the table fenceq_outbox of the application's own database (a "
                 "postgresql:// URI or a SQLite file) into jobs, each committed row exactly "
                 "once (SQLite store only)");
  app.add_option("--outbox-poll", out.outbox_poll,
                 "seconds between looks at the outbox (default 0.05 for SQLite; on "
                 "PostgreSQL a NOTIFY wakes the drain, and it looks every 1 s anyway)")
      ->check(CLI::Range(0.001, 60.0));
  app.add_option("--outbox-schema", out.outbox_schema,
                 "print fenceq_outbox's schema for an application's migrations (postgresql "
                 "or sqlite) and exit")
      ->check(CLI::IsMember({"postgresql", "sqlite"}));
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
  app.add_flag("--restored", out.restored,
               "the database is a restored copy (one no mark or state file shows: a copy at "
               "a new path, a PostgreSQL restore): every fence is raised to a new epoch and "
               "every lease ends, at this start (give it once, on the command line)");
  app.add_option("--migrate-to", out.migrate_to,
                 "copy the SQLite store --db (fenceqd stopped) into this PostgreSQL database "
                 "(a postgresql:// URI, its fenceq schema empty) in one transaction, fences "
                 "in a new epoch, then exit (fenceq migrate)")
      ->type_name("URI");
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
  define_http_options(app, out);
  define_access_options(app, out);
}

struct ConfigLine {
  int number = 0;
  std::string key, value;
};

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// Reads `key = value` lines ('#' or ';' starts a comment line; a value may be
// in double quotes) and checks each against the options, so that any mistake
// is reported with its line before the daemon starts. Returns the lines, or
// an exit status after printing "fenceqd: FILE:LINE: reason".
std::variant<std::vector<ConfigLine>, int> read_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << journal_prefix(3) << "fenceqd: cannot read config file " << path << ": " << std::strerror(errno)
              << "\n";
    return 2;
  }
  auto fail = [&path](int line, const std::string& why) {
    std::cerr << journal_prefix(3) << "fenceqd: " << path << ":" << line << ": " << why << "\n";
    return 2;
  };
  std::vector<ConfigLine> lines;
  std::map<std::string, int> seen;
  std::string text;
  for (int n = 1; std::getline(in, text); ++n) {
    text = trim(text);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    auto eq = text.find('=');
    if (eq == std::string::npos) return fail(n, "expected `key = value`, got `" + text + "`");
    ConfigLine l{n, trim(text.substr(0, eq)), trim(text.substr(eq + 1))};
    std::replace(l.key.begin(), l.key.end(), '_', '-');
    if (l.value.size() >= 2 && l.value.front() == '"' && l.value.back() == '"') {
      l.value = l.value.substr(1, l.value.size() - 2);
    }
    // Each line is parsed on its own, as `--key=value`, by a fresh parser.
    Options scratch;
    CLI::App check;
    define_options(check, scratch);
    const CLI::Option* opt = l.key.empty() ? nullptr : check.get_option_no_throw("--" + l.key);
    if (!opt || l.key == "help" || l.key == "version") {
      return fail(n, "unknown key `" + l.key + "` (the keys are fenceqd's long options)");
    }
    // Once, for the start on a restored copy (C1.5): in a file read at every
    // start it would raise the fences and end the leases each time.
    if (l.key == "restored" || l.key == "migrate-to") {
      return fail(n, "`" + l.key +
                         "` is for the command line only: it applies to one run, after "
                         "a restore or for a move (docs/operating.md, \"Backup, restore and moving "
                         "to PostgreSQL\")");
    }
    if (seen.count(l.key) && opt->get_items_expected_max() <= 1) {
      return fail(n, "`" + l.key + "` is already set on line " + std::to_string(seen[l.key]));
    }
    seen.emplace(l.key, n);
    try {
      std::vector<std::string> args{"--" + l.key + "=" + l.value};
      check.parse(args);
    } catch (const CLI::RequiresError&) {
      // Options that need each other are checked together, after the file.
    } catch (const CLI::ExcludesError&) {
    } catch (const CLI::RequiredError&) {
    } catch (const CLI::ParseError& e) {
      return fail(n, e.what());
    }
    lines.push_back(std::move(l));
  }
  return lines;
}

}  // namespace

bool is_postgres_uri(std::string_view db) {
  return db.starts_with("postgresql://") || db.starts_with("postgres://");
}

std::optional<int> parse_options(int argc, char** argv, Options& out) {
  CLI::App app{"fenceqd: lease-and-fencing-token job queue daemon (single writer of one SQLite file)",
               "fenceqd"};
  define_options(app, out);
  app.add_option("--config", out.config,
                 "read options from this file first: `key = value` lines, keys as the long "
                 "options (db, listen, ipc-mode, ...); the command line wins")
      ->type_name("FILE");

  try {
    app.parse(argc, argv);
    if (!out.config.empty()) {
      auto read = read_config(out.config);
      if (auto* rc = std::get_if<int>(&read)) return *rc;
      // Parse again, the file's lines first: a key also given on the command
      // line is left out, so the command line wins (--listen included).
      std::vector<std::string> args;
      for (auto& l : std::get<std::vector<ConfigLine>>(read)) {
        if (app.get_option("--" + l.key)->count() == 0) args.push_back("--" + l.key + "=" + l.value);
      }
      args.insert(args.end(), argv + 1, argv + argc);
      std::reverse(args.begin(), args.end());  // CLI11 takes a vector back to front
      out = Options{};
      CLI::App again;
      define_options(again, out);
      again.add_option("--config", out.config);
      again.parse(args);
    }
  } catch (const CLI::CallForHelp& e) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << journal_prefix(3) << "fenceqd: " << e.what() << " (see fenceqd --help)\n";
    return 2;
  }
  // An action that ends the process (main.cpp does it): no other check.
  if (!out.curve_keygen.empty() || !out.outbox_schema.empty()) return std::nullopt;
  if (!out.migrate_to.empty()) {
    if (is_postgres_uri(out.db) || !out.pg_dsn.empty()) {
      std::cerr << "fenceqd: --migrate-to copies a SQLite store: --db names its file\n";
      return 2;
    }
    return std::nullopt;
  }
  if (out.listen.empty()) {
    std::cerr << "fenceqd: at least one --listen endpoint is needed\n";
    return 2;
  }
  if ((out.http_auth_file || out.http_read_only || !out.http_allowed_hosts.empty()) &&
      out.metrics_listen.empty()) {
    std::cerr << "fenceqd: --http-auth-file, --http-read-only and --http-allowed-hosts need "
                 "--http-listen HOST:PORT\n";
    return 2;
  }
  const std::string& store = out.store_option;
  out.store = store == "postgres" || (store.empty() && is_postgres_uri(out.db))
                  ? StoreKind::postgres
                  : StoreKind::sqlite;
  if (out.store == StoreKind::postgres) {
    if (out.pg_dsn.empty() && is_postgres_uri(out.db)) out.pg_dsn = out.db;
    if (out.pg_dsn.empty()) {
      std::cerr << "fenceqd: --store postgres needs --pg-dsn (or a postgresql:// --db)\n";
      return 2;
    }
  } else if (!out.pg_dsn.empty() || is_postgres_uri(out.db)) {
    std::cerr << "fenceqd: --store sqlite takes a file for --db, not a PostgreSQL DSN\n";
    return 2;
  }
  if (!out.outbox.empty() && out.store == StoreKind::postgres) {
    std::cerr << "fenceqd: --outbox is for the SQLite store; on PostgreSQL, call "
                 "fenceq_enqueue() inside the application's transaction (docs/operating.md)\n";
    return 2;
  }
  if (!out.outbox.empty() && out.sync != SyncMode::full) {
    // A drained row is deleted from the application's database once its
    // job's commit returned: with a lossy sync a power cut could undo that
    // commit after the row was gone.
    std::cerr << "fenceqd: --outbox needs --sync full (a power cut must not undo a job whose "
                 "outbox row was already deleted)\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace fenceq::daemon
