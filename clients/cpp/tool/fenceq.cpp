// fenceq: the command-line client. Exit status: 0 success (true, a fence, a
// job), 1 refusal (false, nil), 2 error (error reply, timeout, bad usage), so
// that it composes in shell scripts:
//
//   fence=$(fenceq claim job-7 "$HOSTNAME" 30) || exit
#include <fenceq/client.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>

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
  app.add_option("-t,--timeout", timeout, "seconds to wait for a reply")->check(CLI::PositiveNumber);
  app.add_option("--now", now, "the request's time, for a daemon in client clock mode");
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

  std::string id, owner, error;
  std::optional<std::string> result;
  double ttl = 0, wait = 0, older_than = 0;
  std::int64_t fence = 0;
  std::optional<double> retry_in;
  fenceq::EnqueueOptions eo;
  std::optional<std::string> payload, payload_file, queue, state_filter;
  fenceq::ListOptions lo;
  fenceq::tool::WorkOptions wo;

  auto* ping = app.add_subcommand("ping", "check the daemon; prints its version and clock");
  auto* enqueue = app.add_subcommand("enqueue", "create a job (false if it exists)");
  enqueue->add_option("id", id)->required();
  enqueue->add_option("-q,--queue", eo.queue, "queue (default: default)");
  enqueue->add_option("-p,--payload", payload, "payload text");
  enqueue->add_option("--payload-file", payload_file, "payload bytes from a file (- for stdin)");
  enqueue->add_option("--priority", eo.priority, "higher is claimed first (default 0)");
  enqueue->add_option("--delay", eo.delay, "seconds before it can be claimed");
  enqueue->add_option("--max-attempts", eo.max_attempts, "claims before it is dead (0: no limit)");
  auto* state = app.add_subcommand("state", "print a job as JSON (null and exit 1 if missing)");
  state->add_option("id", id)->required();
  auto* claim = app.add_subcommand("claim", "take the lease; prints the new fence");
  claim->add_option("id", id)->required();
  claim->add_option("owner", owner)->required();
  claim->add_option("ttl", ttl, "lease length in seconds")->required();
  auto* next = app.add_subcommand("claim-next", "claim the next job of a queue; prints it as JSON");
  next->add_option("queue", eo.queue)->required();
  next->add_option("owner", owner)->required();
  next->add_option("ttl", ttl)->required();
  next->add_option("-w,--wait", wait, "seconds to wait for a job (long-poll)");
  auto* renew = app.add_subcommand("renew", "extend the current lease");
  renew->add_option("id", id)->required();
  renew->add_option("owner", owner)->required();
  renew->add_option("fence", fence)->required();
  renew->add_option("ttl", ttl)->required();
  auto* complete = app.add_subcommand("complete", "store the result under the current lease");
  complete->add_option("id", id)->required();
  complete->add_option("owner", owner)->required();
  complete->add_option("fence", fence)->required();
  complete->add_option("result", result, "the result text (omitted: null)");
  auto* release = app.add_subcommand("release", "give the lease back, keeping the fence");
  release->add_option("id", id)->required();
  release->add_option("owner", owner)->required();
  release->add_option("fence", fence)->required();
  auto* fail = app.add_subcommand("fail", "report a failure under the current lease");
  fail->add_option("id", id)->required();
  fail->add_option("owner", owner)->required();
  fail->add_option("fence", fence)->required();
  fail->add_option("error", error)->required();
  fail->add_option("--retry-in", retry_in, "seconds before it can be claimed again");
  auto* check = app.add_subcommand("check", "is this lease current? (exit 0 yes, 1 no)");
  check->add_option("id", id)->required();
  check->add_option("owner", owner)->required();
  check->add_option("fence", fence)->required();
  auto* retry = app.add_subcommand("retry", "revive a dead job");
  retry->add_option("id", id)->required();
  auto* stats = app.add_subcommand("stats", "counts per queue and state, as JSON");
  auto* list = app.add_subcommand("list", "jobs as JSON lines, in id order");
  list->add_option("-q,--queue", queue);
  list->add_option("-s,--state", state_filter, "ready, delayed, leased, done or dead");
  list->add_option("-n,--limit", lo.limit, "at most this many (1..1000)");
  list->add_option("--after", lo.after, "ids after this one (the next page)");
  auto* purge = app.add_subcommand("purge", "remove done and dead jobs finished long enough ago");
  purge->add_option("older_than", older_than, "seconds")->required();
  purge->add_option("-q,--queue", queue);
  auto* metrics = app.add_subcommand("metrics", "the daemon's figures, Prometheus text format");
  auto* work = app.add_subcommand(
      "work", "run COMMAND for each job of a queue: payload on stdin, stdout the result");
  work->add_option("-q,--queue", wo.queue, "queue (default: default)");
  work->add_option("--ttl", wo.ttl, "lease seconds, renewed while COMMAND runs (default 30)");
  work->add_option("--owner", wo.owner, "owner name (default: HOST:PID)");
  work->add_option("-w,--wait", wo.wait, "seconds to wait for a job (default 30)");
  work->add_option("--max-jobs", wo.max_jobs, "stop after this many jobs");
  work->add_flag("--exit-when-empty", wo.exit_when_empty, "stop when a wait finds no job");
  work->add_option("--retry-in", wo.retry_in, "on failure, seconds before a retry");
  work->add_option("command", wo.command, "the command and its arguments (after --)")
      ->required();

  try {
    app.parse(argc, argv);
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
    options.timeout = std::chrono::milliseconds(static_cast<long long>(timeout * 1000));
    if (curve_key) options.curve = fenceq::curve_keys(*curve_key, *curve_server_key);
    fenceq::Client c(endpoint, std::move(options));
    if (ping->parsed()) {
      auto info = c.ping();
      std::cout << json{{"protocol", info.protocol}, {"version", info.version},
                        {"clock", info.clock}}.dump()
                << "\n";
      return kTrue;
    }
    if (enqueue->parsed()) {
      if (payload) eo.payload = fenceq::Payload{*payload, false};
      if (payload_file) {
        std::ifstream f;
        std::istream* in = &std::cin;
        if (*payload_file != "-") {
          f.open(*payload_file, std::ios::binary);
          if (!f) throw std::runtime_error("cannot read " + *payload_file);
          in = &f;
        }
        std::string bytes((std::istreambuf_iterator<char>(*in)), std::istreambuf_iterator<char>());
        // Text when it is UTF-8 (a worker gets a str back), else binary.
        eo.payload = fenceq::Payload{bytes, !fenceq::protocol::valid_utf8(bytes)};
      }
      eo.now = now;
      return print_bool(c.enqueue(id, eo));
    }
    if (state->parsed()) {
      auto s = c.state(id);
      if (!s) {
        std::cout << "null\n";
        return kRefused;
      }
      std::cout << json{{"id", s->id},         {"owner", opt_json(s->owner)},
                        {"until", s->until},   {"fence", s->fence},
                        {"result", opt_json(s->result)}, {"done", s->done}}.dump()
                << "\n";
      return kTrue;
    }
    if (claim->parsed()) {
      auto f = c.claim(id, owner, ttl, now);
      if (!f) {
        std::cout << "null\n";
        return kRefused;
      }
      std::cout << *f << "\n";
      return kTrue;
    }
    if (next->parsed()) {
      auto job = c.claim_next(eo.queue, owner, ttl, wait, now);
      if (!job) {
        std::cout << "null\n";
        return kRefused;
      }
      std::cout << json{{"id", job->id}, {"fence", job->fence},
                        {"payload", payload_json(job->payload)}, {"attempts", job->attempts}}
                       .dump()
                << "\n";
      return kTrue;
    }
    if (renew->parsed()) return print_bool(c.renew(id, owner, fence, ttl, now));
    if (complete->parsed()) {
      std::optional<std::string_view> r;
      if (result) r = *result;
      return print_bool(c.complete(id, owner, fence, r, now));
    }
    if (release->parsed()) return print_bool(c.release(id, owner, fence));
    if (fail->parsed()) return print_bool(c.fail(id, owner, fence, error, retry_in, now));
    if (check->parsed()) return print_bool(c.check(id, owner, fence, now));
    if (retry->parsed()) return print_bool(c.retry(id));
    if (stats->parsed()) {
      auto st = c.stats();
      json queues = json::object();
      for (const auto& q : st.queues) {
        queues[q.queue] = json{{"ready", q.ready},   {"delayed", q.delayed},
                               {"leased", q.leased}, {"done", q.done},
                               {"dead", q.dead},     {"oldest_ready_age", q.oldest_ready_age}};
      }
      std::cout << json{{"queues", queues},
                        {"requests", st.requests},
                        {"commits", st.commits},
                        {"batches", st.batches},
                        {"failed_commits", st.failed_commits},
                        {"mean_batch", st.mean_batch},
                        {"waiting_claims", st.waiting_claims},
                        {"uptime", st.uptime}}
                       .dump()
                << "\n";
      return kTrue;
    }
    if (list->parsed()) {
      lo.queue = queue;
      if (state_filter) {
        lo.status = fenceq::protocol::status_from_name(*state_filter);
        if (!lo.status) {
          std::cerr << "fenceq: --state must be ready, delayed, leased, done or dead\n";
          return kError;
        }
      }
      for (const auto& j : c.list(lo)) {
        std::cout << json{{"id", j.id},
                          {"queue", j.queue},
                          {"state", fenceq::protocol::status_name(j.status)},
                          {"priority", j.priority},
                          {"attempts", j.attempts},
                          {"max_attempts", j.max_attempts},
                          {"fence", j.fence},
                          {"owner", opt_json(j.owner)},
                          {"until", j.until},
                          {"not_before", j.not_before},
                          {"error", opt_json(j.error)}}
                         .dump()
                  << "\n";
      }
      return kTrue;
    }
    if (purge->parsed()) {
      std::cout << c.purge(older_than, queue) << "\n";
      return kTrue;
    }
    if (metrics->parsed()) {
      std::cout << c.metrics();
      return kTrue;
    }
    if (work->parsed()) return fenceq::tool::run_worker(c, wo);
  } catch (const fenceq::Error& e) {
    std::cerr << "fenceq: " << e.what() << "\n";
    return kError;
  } catch (const std::exception& e) {
    std::cerr << "fenceq: " << e.what() << "\n";
    return kError;
  }
  return kError;
}
