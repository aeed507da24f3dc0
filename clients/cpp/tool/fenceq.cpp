// fenceq: the command-line client. Exit status: 0 success (true, a fence, a
// job), 1 refusal (false, nil), 2 error (error reply, timeout, bad usage), so
// that it composes in shell scripts:
//
//   fence=$(fenceq claim job-7 "$HOSTNAME" 30) || exit
#include <fenceq/client.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>
#include <optional>
#include <string>

namespace {

constexpr int kTrue = 0;
constexpr int kRefused = 1;
constexpr int kError = 2;

int print_bool(bool b) {
  std::cout << (b ? "true" : "false") << "\n";
  return b ? kTrue : kRefused;
}

nlohmann::json opt_json(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
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

  std::string id, owner;
  std::optional<std::string> result;
  double ttl = 0;
  std::int64_t fence = 0;

  auto* ping = app.add_subcommand("ping", "check the daemon; prints its version and clock");
  auto* enqueue = app.add_subcommand("enqueue", "create a job (false if it exists)");
  enqueue->add_option("id", id)->required();
  auto* state = app.add_subcommand("state", "print a job as JSON (null and exit 1 if missing)");
  state->add_option("id", id)->required();
  auto* claim = app.add_subcommand("claim", "take the lease; prints the new fence");
  claim->add_option("id", id)->required();
  claim->add_option("owner", owner)->required();
  claim->add_option("ttl", ttl, "lease length in seconds")->required();
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kError;
  }

  try {
    fenceq::Client c(endpoint,
                     fenceq::ClientOptions{std::chrono::milliseconds(
                         static_cast<long long>(timeout * 1000))});
    if (ping->parsed()) {
      auto info = c.ping();
      std::cout << nlohmann::json{{"protocol", info.protocol},
                                  {"version", info.version},
                                  {"clock", info.clock}}
                       .dump()
                << "\n";
      return kTrue;
    }
    if (enqueue->parsed()) return print_bool(c.enqueue(id));
    if (state->parsed()) {
      auto s = c.state(id);
      if (!s) {
        std::cout << "null\n";
        return kRefused;
      }
      nlohmann::ordered_json j;
      j["id"] = s->id;
      j["owner"] = opt_json(s->owner);
      j["until"] = s->until;
      j["fence"] = s->fence;
      j["result"] = opt_json(s->result);
      j["done"] = s->done;
      std::cout << j.dump() << "\n";
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
    if (renew->parsed()) return print_bool(c.renew(id, owner, fence, ttl, now));
    if (complete->parsed()) {
      std::optional<std::string_view> r;
      if (result) r = *result;
      return print_bool(c.complete(id, owner, fence, r, now));
    }
    if (release->parsed()) return print_bool(c.release(id, owner, fence));
  } catch (const fenceq::Error& e) {
    std::cerr << "fenceq: " << e.what() << "\n";
    return kError;
  } catch (const std::exception& e) {
    std::cerr << "fenceq: " << e.what() << "\n";
    return kError;
  }
  return kError;
}
