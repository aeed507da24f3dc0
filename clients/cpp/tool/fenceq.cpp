// fenceq: the command-line client. Exit status: 0 success (true, a fence, a
// job), 1 refusal (false, nil), 2 error (error reply, timeout, bad usage), so
// that it composes in shell scripts:
//
//   fence=$(fenceq claim job-7 "$HOSTNAME" 30) || exit
//
// Each subcommand is one row of kSubcommands (name, description, options, and
// what runs it); main() builds the command line from the table and runs the
// row that was parsed.
#include <fenceq/client.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fenceq_protocol/codec.hpp"
#include "work.hpp"

namespace {

constexpr int kTrue = 0;
constexpr int kRefused = 1;
constexpr int kError = 2;

using json = nlohmann::ordered_json;

int print_bool(bool b) {
  std::cout << (b ? "true" : "false") << "\n";
  return b ? kTrue : kRefused;
}

json opt_json(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

// Usage errors found after parsing: one line, exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The largest number of seconds the tool takes for a delay, a retry, a lease
// or a wait of `fenceq work` (about 31 years): the daemon's own bound for
// delay and retry_in. Larger values are typing mistakes, and 1e300 or inf
// overflow every conversion that follows.
constexpr double kMaxSeconds = 1e9;
// A reply timeout longer than a day is a mistake; in milliseconds it must also
// fit the int that poll() takes.
constexpr double kMaxTimeout = 86400;
// --kill-after: the grace between SIGTERM and SIGKILL.
constexpr double kMaxKillAfter = 86400;
// A CURVE key file is a few hundred bytes.
constexpr std::size_t kMaxKeyFileBytes = 64 * 1024;

// 1e9 as 1000000000, as a user types it.
std::string number_text(double v) {
  std::ostringstream out;
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    out << static_cast<long long>(v);
  } else {
    out << v;
  }
  return out.str();
}

// A number of seconds on the command line: finite and within [lo, hi] (above
// lo when `lo_open`). CLI11 alone takes "nan", "inf" and "1e300" as doubles;
// the message names the option (CLI11 prefixes it).
CLI::Validator seconds_in(double lo, double hi, bool lo_open = false) {
  const bool bounded = hi < std::numeric_limits<double>::max();
  const std::string range =
      bounded ? std::string(lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + "]"
              : "";
  const std::string what =
      bounded ? "a number of seconds in " + range : "a finite number of seconds";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        const double v = std::strtod(begin, &end);
        const bool number = end != begin && *end == '\0';
        if (number && std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi) return {};
        return "must be " + what + ", not '" +
               fenceq::tool::escape_for_log(text.substr(0, 64)) + "'";
      },
      bounded ? "SECONDS in " + range : "SECONDS", "seconds");
}

// A file descriptor closed on scope exit (never a standard one: stdin is
// read in place, not owned).
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd > 2) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Reads `path` (- for stdin when `dash_is_stdin`) up to its end, but never
// more than `limit` + 1 bytes: enough to tell that it is too large without
// holding all of it (a --payload-file of /dev/zero, or a pipe that never
// closes, never ends). Throws UsageError naming `option` and the limit when
// it is larger.
std::string read_bounded(const std::string& path, std::size_t limit, const std::string& option,
                         bool dash_is_stdin) {
  const bool stdin_ = dash_is_stdin && path == "-";
  const std::string name = stdin_ ? "stdin" : path;
  Fd f(stdin_ ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) throw UsageError(option + ": cannot read " + name + ": " + std::strerror(errno));
  std::string bytes(limit + 1, '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(f.fd, bytes.data() + got, bytes.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw UsageError(option + ": cannot read " + name + ": " + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  if (got > limit) {
    throw UsageError(option + ": " + name + " is larger than the limit of " +
                     std::to_string(limit) + " bytes");
  }
  bytes.resize(got);
  return bytes;
}

// curve_keys() reads its key file line by line with no bound (a key file of
// /dev/zero would use up memory first). The tool reads it first, bounded, and
// hands the library a file it can read whole: the same path when it is a
// regular file, else (a pipe such as <(...), which cannot be read twice) a
// memory file holding the bytes read, its name in errors replaced by `path`.
fenceq::CurveKeys bounded_curve_keys(const std::string& path, const std::string& server_key) {
  // As curve_keys() would, `-` names a file, not stdin.
  const std::string bytes = read_bounded(path, kMaxKeyFileBytes, "--curve-key", false);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    return fenceq::curve_keys(path, server_key);
  }
  Fd mem(::memfd_create("fenceq-curve-key", MFD_CLOEXEC));
  if (mem.fd < 0) throw UsageError("--curve-key: cannot hold " + path + " in memory");
  for (std::size_t put = 0; put < bytes.size();) {
    ssize_t n = ::write(mem.fd, bytes.data() + put, bytes.size() - put);
    if (n <= 0) throw UsageError("--curve-key: cannot hold " + path + " in memory");
    put += static_cast<std::size_t>(n);
  }
  const std::string alias = "/proc/self/fd/" + std::to_string(mem.fd);
  try {
    return fenceq::curve_keys(alias, server_key);
  } catch (const fenceq::Error& e) {
    std::string message = std::string(e.what()).substr(e.code().size() + 2);
    for (auto at = message.find(alias); at != std::string::npos; at = message.find(alias, at)) {
      message.replace(at, alias.size(), path);
      at += path.size();
    }
    throw fenceq::Error(e.code(), message);
  }
}

// A payload prints as text when it was sent as str, else as {"base64": ...}.
json payload_json(const std::optional<fenceq::Payload>& p) {
  if (!p) return nullptr;
  if (!p->binary) return p->bytes;
  static const char* kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  const auto& b = p->bytes;
  for (; i + 2 < b.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(b[i]) << 16) |
                 (static_cast<unsigned char>(b[i + 1]) << 8) | static_cast<unsigned char>(b[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (i < b.size()) {
    unsigned v = static_cast<unsigned char>(b[i]) << 16;
    if (i + 1 < b.size()) v |= static_cast<unsigned char>(b[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < b.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return json{{"base64", out}};
}

// A job's row of `list`, as one JSON line.
json job_info_json(const fenceq::JobInfo& j) {
  return json{{"id", j.id},
              {"queue", j.queue},
              {"state", fenceq::protocol::status_name(j.status)},
              {"priority", j.priority},
              {"attempts", j.attempts},
              {"max_attempts", j.max_attempts},
              {"fence", j.fence},
              {"owner", opt_json(j.owner)},
              {"until", j.until},
              {"not_before", j.not_before},
              {"error", opt_json(j.error)}};
}

json stats_json(const fenceq::Stats& st) {
  json queues = json::object();
  for (const auto& q : st.queues) {
    queues[q.queue] = json{{"ready", q.ready},   {"delayed", q.delayed},
                           {"leased", q.leased}, {"done", q.done},
                           {"dead", q.dead},     {"oldest_ready_age", q.oldest_ready_age}};
  }
  return json{{"queues", queues},
              {"requests", st.requests},
              {"commits", st.commits},
              {"batches", st.batches},
              {"failed_commits", st.failed_commits},
              {"mean_batch", st.mean_batch},
              {"waiting_claims", st.waiting_claims},
              {"uptime", st.uptime}};
}

// A refusal that has no value (a missing job, a lost claim): null, exit 1.
int print_null() {
  std::cout << "null\n";
  return kRefused;
}

// --- the subcommands ---------------------------------------------------------

// The values a subcommand's options fill. Every subcommand has an Args of its
// own and uses the fields its options name.
struct Args {
  std::string id, owner;
  std::int64_t fence = 0;
  double ttl = 0;
  std::optional<std::string> result;                 // complete
  std::string error;                                 // fail
  std::optional<double> retry_in;                    // fail
  std::optional<std::string> payload, payload_file;  // enqueue
  fenceq::EnqueueOptions enqueue;                    // enqueue
  std::string queue;                                 // claim-next
  double wait = 0;                                   // claim-next
  std::optional<std::string> queue_filter;           // list, purge
  std::optional<std::string> state;                  // list
  fenceq::ListOptions list;                          // list
  double older_than = 0;                             // purge
  fenceq::tool::WorkOptions work;                    // work
};

// What a subcommand runs with: a client of the daemon, and the global options
// it was made from.
struct Call {
  fenceq::Client& client;
  std::optional<double> now;  // --now
  const std::string& endpoint;
  const fenceq::ClientOptions& options;
};

// One subcommand: its name and description as `fenceq --help` lists them,
// `options`, which declares its options and positionals on `cmd` into `a`,
// and `run`, which runs it once they are parsed and returns the exit status.
// What `run` throws is printed as one line, and the exit status is kError.
struct Subcommand {
  const char* name;
  const char* description;
  void (*options)(CLI::App& cmd, Args& a);
  int (*run)(const Call& call, const Args& a);
};

void no_options(CLI::App&, Args&) {}

// id owner fence: the lease that a write names.
void lease_options(CLI::App& cmd, Args& a) {
  cmd.add_option("id", a.id)->required();
  cmd.add_option("owner", a.owner)->required();
  cmd.add_option("fence", a.fence)->required();
}

// Every subcommand, in the order `fenceq --help` lists them. Adding one is
// adding a row (and the Args fields it needs, if no other subcommand has them).
const Subcommand kSubcommands[] = {
    {"ping", "check the daemon; prints its version and clock", no_options,
     [](const Call& c, const Args&) {
       auto info = c.client.ping();
       std::cout << json{{"protocol", info.protocol}, {"version", info.version},
                         {"clock", info.clock}}.dump()
                 << "\n";
       return kTrue;
     }},
    {"enqueue", "create a job (false if it exists)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("id", a.id)->required();
       cmd.add_option("-q,--queue", a.enqueue.queue, "queue (default: default)");
       cmd.add_option("-p,--payload", a.payload, "payload text");
       cmd.add_option("--payload-file", a.payload_file,
                      "payload bytes from a file (- for stdin), at most " +
                          std::to_string(fenceq::protocol::kMaxPayloadBytes) + " bytes");
       cmd.add_option("--priority", a.enqueue.priority, "higher is claimed first (default 0)");
       cmd.add_option("--delay", a.enqueue.delay, "seconds before it can be claimed")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--max-attempts", a.enqueue.max_attempts,
                      "claims before it is dead (0: no limit)");
     },
     [](const Call& c, const Args& a) {
       fenceq::EnqueueOptions eo = a.enqueue;
       if (a.payload) eo.payload = fenceq::Payload{*a.payload, false};
       if (a.payload_file) {
         std::string bytes = read_bounded(*a.payload_file, fenceq::protocol::kMaxPayloadBytes,
                                          "--payload-file", true);
         // Text when it is UTF-8 (a worker gets a str back), else binary.
         eo.payload = fenceq::Payload{bytes, !fenceq::protocol::valid_utf8(bytes)};
       }
       eo.now = c.now;
       return print_bool(c.client.enqueue(a.id, eo));
     }},
    {"state", "print a job as JSON (null and exit 1 if missing)",
     [](CLI::App& cmd, Args& a) { cmd.add_option("id", a.id)->required(); },
     [](const Call& c, const Args& a) {
       auto s = c.client.state(a.id);
       if (!s) return print_null();
       std::cout << json{{"id", s->id},         {"owner", opt_json(s->owner)},
                         {"until", s->until},   {"fence", s->fence},
                         {"result", opt_json(s->result)}, {"done", s->done}}.dump()
                 << "\n";
       return kTrue;
     }},
    {"claim", "take the lease; prints the new fence",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("id", a.id)->required();
       cmd.add_option("owner", a.owner)->required();
       // A ttl of 0 gets through to the client's own refusal
       // (invalid_argument: ttl must be > 0).
       cmd.add_option("ttl", a.ttl, "lease length in seconds")
           ->required()
           ->check(seconds_in(0, kMaxSeconds));
     },
     [](const Call& c, const Args& a) {
       auto f = c.client.claim(a.id, a.owner, a.ttl, c.now);
       if (!f) return print_null();
       std::cout << *f << "\n";
       return kTrue;
     }},
    {"claim-next", "claim the next job of a queue; prints it as JSON",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("queue", a.queue)->required();
       cmd.add_option("owner", a.owner)->required();
       cmd.add_option("ttl", a.ttl)->required()->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("-w,--wait", a.wait, "seconds to wait for a job (long-poll)")
           ->check(seconds_in(0, fenceq::protocol::kMaxWaitSeconds));
     },
     [](const Call& c, const Args& a) {
       auto job = c.client.claim_next(a.queue, a.owner, a.ttl, a.wait, c.now);
       if (!job) return print_null();
       std::cout << json{{"id", job->id}, {"fence", job->fence},
                         {"payload", payload_json(job->payload)}, {"attempts", job->attempts}}
                        .dump()
                 << "\n";
       return kTrue;
     }},
    {"renew", "extend the current lease",
     [](CLI::App& cmd, Args& a) {
       lease_options(cmd, a);
       cmd.add_option("ttl", a.ttl)->required()->check(seconds_in(0, kMaxSeconds));
     },
     [](const Call& c, const Args& a) {
       return print_bool(c.client.renew(a.id, a.owner, a.fence, a.ttl, c.now));
     }},
    {"complete", "store the result under the current lease",
     [](CLI::App& cmd, Args& a) {
       lease_options(cmd, a);
       cmd.add_option("result", a.result, "the result text (omitted: null)");
     },
     [](const Call& c, const Args& a) {
       std::optional<std::string_view> r;
       if (a.result) r = *a.result;
       return print_bool(c.client.complete(a.id, a.owner, a.fence, r, c.now));
     }},
    {"release", "give the lease back, keeping the fence", lease_options,
     [](const Call& c, const Args& a) {
       return print_bool(c.client.release(a.id, a.owner, a.fence));
     }},
    {"fail", "report a failure under the current lease",
     [](CLI::App& cmd, Args& a) {
       lease_options(cmd, a);
       cmd.add_option("error", a.error)->required();
       cmd.add_option("--retry-in", a.retry_in, "seconds before it can be claimed again")
           ->check(seconds_in(0, kMaxSeconds));
     },
     [](const Call& c, const Args& a) {
       return print_bool(c.client.fail(a.id, a.owner, a.fence, a.error, a.retry_in, c.now));
     }},
    {"check", "is this lease current? (exit 0 yes, 1 no)", lease_options,
     [](const Call& c, const Args& a) {
       return print_bool(c.client.check(a.id, a.owner, a.fence, c.now));
     }},
    {"retry", "revive a dead job",
     [](CLI::App& cmd, Args& a) { cmd.add_option("id", a.id)->required(); },
     [](const Call& c, const Args& a) { return print_bool(c.client.retry(a.id)); }},
    {"stats", "counts per queue and state, as JSON", no_options,
     [](const Call& c, const Args&) {
       std::cout << stats_json(c.client.stats()).dump() << "\n";
       return kTrue;
     }},
    {"list", "jobs as JSON lines, in id order",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("-q,--queue", a.queue_filter);
       cmd.add_option("-s,--state", a.state, "ready, delayed, leased, done or dead");
       cmd.add_option("-n,--limit", a.list.limit, "at most this many (1..1000)");
       cmd.add_option("--after", a.list.after, "ids after this one (the next page)");
     },
     [](const Call& c, const Args& a) {
       fenceq::ListOptions lo = a.list;
       lo.queue = a.queue_filter;
       if (a.state) {
         lo.status = fenceq::protocol::status_from_name(*a.state);
         if (!lo.status) {
           std::cerr << "fenceq: --state must be ready, delayed, leased, done or dead\n";
           return kError;
         }
       }
       for (const auto& j : c.client.list(lo)) std::cout << job_info_json(j).dump() << "\n";
       return kTrue;
     }},
    {"purge", "remove done and dead jobs finished long enough ago",
     [](CLI::App& cmd, Args& a) {
       // The daemon's own bound for older_than.
       cmd.add_option("older_than", a.older_than, "seconds")
           ->required()
           ->check(seconds_in(0, 1e12));
       cmd.add_option("-q,--queue", a.queue_filter);
     },
     [](const Call& c, const Args& a) {
       std::cout << c.client.purge(a.older_than, a.queue_filter) << "\n";
       return kTrue;
     }},
    {"metrics", "the daemon's figures, Prometheus text format", no_options,
     [](const Call& c, const Args&) {
       std::cout << c.client.metrics();
       return kTrue;
     }},
    {"work", "run COMMAND for each job of a queue: payload on stdin, stdout the result",
     [](CLI::App& cmd, Args& a) {
       auto& wo = a.work;
       cmd.add_option("-q,--queue", wo.queue, "queue (default: default)");
       cmd.add_option("--ttl", wo.ttl, "lease seconds, renewed while COMMAND runs (default 30)")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--owner", wo.owner, "owner name (default: HOST:PID)");
       cmd.add_option("-w,--wait", wo.wait, "seconds to wait for a job (default 30)")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--max-jobs", wo.max_jobs, "stop after this many jobs")
           ->check(CLI::NonNegativeNumber);
       cmd.add_flag("--exit-when-empty", wo.exit_when_empty, "stop when a wait finds no job");
       cmd.add_option("--retry-in", wo.retry_in, "on failure, seconds before a retry")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--kill-after", wo.kill_after,
                      "when COMMAND must stop (SIGTERM or SIGINT to fenceq, lease lost): seconds "
                      "from SIGTERM to SIGKILL to its process group (default 10)")
           ->check(seconds_in(0, kMaxKillAfter));
       cmd.add_option("command", wo.command, "the command and its arguments (after --)")
           ->required();
     },
     [](const Call& c, const Args& a) {
       // A reader gone (a command that does not read its stdin, a closed
       // stdout or stderr pipe) is an EPIPE error, never the worker's death:
       // killed, it would leave its job leased and its command running. (The
       // other subcommands die of SIGPIPE as any filter does: `| head -1`.)
       ::signal(SIGPIPE, SIG_IGN);
       fenceq::tool::WorkOptions wo = a.work;
       wo.call_timeout = c.options.timeout;
       wo.connect = [endpoint = c.endpoint, options = c.options](std::chrono::milliseconds t) {
         fenceq::ClientOptions quick = options;
         quick.timeout = t;
         return fenceq::Client(endpoint, quick);
       };
       return fenceq::tool::run_worker(c.client, wo);
     }},
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fenceq: command-line client for fenceqd (exit 0: success, 1: refused, 2: error)",
               "fenceq"};
  app.require_subcommand(1);
  std::string endpoint = fenceq::default_endpoint();
  double timeout = 5.0;
  std::optional<double> now;
  app.add_option("-e,--endpoint", endpoint,
                 "daemon endpoint (default: $FENCEQ_ENDPOINT or ipc://var/fenceqd.sock)");
  app.add_option("-t,--timeout", timeout, "seconds to wait for a reply (default 5)")
      ->check(seconds_in(0, kMaxTimeout, true));
  app.add_option("--now", now, "the request's time, for a daemon in client clock mode")
      ->check(seconds_in(-std::numeric_limits<double>::max(), std::numeric_limits<double>::max()));
  std::optional<std::string> curve_key, curve_server_key;
  auto* key_opt = app.add_option("--curve-key", curve_key,
                                 "tcp:// with CURVE: this client's key file (fenceqd "
                                 "--curve-keygen FILE)")
                      ->envname("FENCEQ_CURVE_KEY");
  auto* server_opt = app.add_option("--curve-server-key", curve_server_key,
                                    "tcp:// with CURVE: the daemon's public key (40 Z85 characters)")
                         ->envname("FENCEQ_CURVE_SERVER_KEY");
  key_opt->needs(server_opt);
  server_opt->needs(key_opt);

  constexpr std::size_t n = std::size(kSubcommands);
  std::vector<Args> args(n);
  std::vector<CLI::App*> commands(n);
  for (std::size_t i = 0; i < n; ++i) {
    commands[i] = app.add_subcommand(kSubcommands[i].name, kSubcommands[i].description);
    kSubcommands[i].options(*commands[i], args[i]);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ValidationError& e) {
    // One line naming the option; CLI11's own exit adds a second.
    std::cerr << "fenceq: " << fenceq::tool::escape_for_log(e.what()) << "\n";
    return kError;
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kError;
  }

  if (endpoint.rfind("tcp://", 0) == 0 && !curve_key) {
    std::cerr << "fenceq: " << endpoint
              << ": fenceqd serves tcp:// only with CURVE: give --curve-key FILE and "
                 "--curve-server-key KEY (or FENCEQ_CURVE_KEY and FENCEQ_CURVE_SERVER_KEY)\n";
    return kError;
  }
  try {
    fenceq::ClientOptions options;
    // At least 1 ms: a positive timeout that rounds to 0 would never wait.
    options.timeout = std::chrono::milliseconds(std::max(1LL, std::llround(timeout * 1000)));
    if (curve_key) options.curve = bounded_curve_keys(*curve_key, *curve_server_key);
    fenceq::Client client(endpoint, options);
    for (std::size_t i = 0; i < n; ++i) {
      if (commands[i]->parsed()) {
        return kSubcommands[i].run(Call{client, now, endpoint, options}, args[i]);
      }
    }
  } catch (const std::exception& e) {
    // Error texts may quote an id or other input: one line, escaped.
    std::cerr << "fenceq: " << fenceq::tool::escape_for_log(e.what()) << "\n";
    return kError;
  }
  return kError;
}
