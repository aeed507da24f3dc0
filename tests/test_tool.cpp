// The fenceq command-line tool against a real daemon: output and exit status
// (0 success, 1 refusal, 2 error).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <iomanip>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "daemon.hpp"
#include "fenceq_protocol/codec.hpp"

using fenceq::test::Daemon;
using fenceq::test::TempDir;
using fenceq::test::tool;
using namespace std::chrono_literals;

namespace {

// Whether this host's service socket is there, as fenceq::resolve_endpoint
// judges it (FENCEQ_ENDPOINT aside): the tool would then take it over the
// development default, and tests create no files under /run.
bool service_socket_there() {
  const char* env = std::getenv("FENCEQ_ENDPOINT");
  const std::optional<std::string> saved = env ? std::optional<std::string>(env) : std::nullopt;
  ::unsetenv("FENCEQ_ENDPOINT");
  const bool there = fenceq::resolve_endpoint().source == fenceq::EndpointSource::service;
  if (saved) ::setenv("FENCEQ_ENDPOINT", saved->c_str(), 1);
  return there;
}

}  // namespace

TEST_CASE("tool: exit 0 for success, 1 for refusal, 2 for errors, through the whole story") {
  TempDir dir;
  Daemon d(dir);
  auto r = tool(d, {"ping"});
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["clock"] == "client");

  CHECK(tool(d, {"enqueue", "t-1"}).status == 0);
  r = tool(d, {"enqueue", "t-1"});
  CHECK(r.status == 1);
  CHECK(r.out == "false\n");

  r = tool(d, {"--now", "50", "claim", "t-1", "alice", "10"});
  CHECK(r.status == 0);
  CHECK(r.out == "1\n");
  r = tool(d, {"--now", "55", "claim", "t-1", "bob", "10"});
  CHECK(r.status == 1);
  CHECK(r.out == "null\n");
  CHECK(tool(d, {"--now", "56", "renew", "t-1", "alice", "1", "10"}).status == 0);  // until 66
  CHECK(tool(d, {"--now", "66", "claim", "t-1", "bob", "10"}).out == "2\n");
  CHECK(tool(d, {"--now", "67", "complete", "t-1", "alice", "1", "stale"}).status == 1);
  CHECK(tool(d, {"--now", "67", "complete", "t-1", "bob", "2", "fresh"}).status == 0);
  CHECK(tool(d, {"release", "t-1", "bob", "2"}).status == 1);  // done

  r = tool(d, {"state", "t-1"});
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["owner"] == "bob");
  CHECK(j["result"] == "fresh");
  CHECK(j["fence"] == 2);
  CHECK(j["done"] == true);
  CHECK(j["until"] == 76.0);
  r = tool(d, {"state", "missing"});
  CHECK(r.status == 1);
  CHECK(r.out == "null\n");

  // Errors: an error reply, bad usage, a daemon nobody runs.
  r = tool(d, {"--now", "1", "claim", "t-2", "x", "0"});
  CHECK(r.status == 2);
  CHECK(r.out.find("invalid_argument") != std::string::npos);
  CHECK(tool(d, {"claim", "t-2", "x", "5"}).status == 2);  // client clock needs --now
  CHECK(tool(d, {"renew", "t-1"}).status == 2);
  CHECK(tool(d, {"frobnicate"}).status == 2);
  auto nobody = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint",
                                   "ipc://" + dir.file("nobody.sock"), "--timeout", "0.2",
                                   "ping"});
  CHECK(nobody.status == 2);
  CHECK(nobody.out.find("unreachable") != std::string::npos);
}

TEST_CASE("tool: FENCEQ_ENDPOINT is the default endpoint") {
  TempDir dir;
  Daemon d(dir);
  auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "enqueue", "env-job"},
                             {"FENCEQ_ENDPOINT=" + d.endpoint()});
  CHECK(r.status == 0);
  CHECK(r.out == "true\n");
  // Nothing there: the error says the variable chose it, and the tool's ways.
  r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "ping"},
                        {"FENCEQ_ENDPOINT=ipc://" + dir.file("gone.sock")});
  CHECK(r.status == 2);
  CHECK(r.out.find("nothing serves ipc://" + dir.file("gone.sock") + " (from FENCEQ_ENDPOINT)") !=
        std::string::npos);
  CHECK(r.out.find("to use another endpoint, give --endpoint or set FENCEQ_ENDPOINT") !=
        std::string::npos);
}

TEST_CASE("tool: --endpoint beats FENCEQ_ENDPOINT") {
  TempDir dir_env, dir_given;
  Daemon by_env(dir_env), given(dir_given);
  const std::vector<std::string> env{"FENCEQ_ENDPOINT=" + by_env.endpoint()};
  auto r = fenceq::test::run(
      {fenceq::test::fenceq_tool_path(), "--endpoint", given.endpoint(), "enqueue", "given-job"},
      env);
  CHECK(r.status == 0);
  CHECK(tool(given, {"state", "given-job"}).status == 0);
  CHECK(tool(by_env, {"state", "given-job"}).status == 1);
  // An --endpoint nothing serves fails, though FENCEQ_ENDPOINT's daemon runs.
  r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint",
                         "ipc://" + dir_given.file("none.sock"), "ping"},
                        env);
  CHECK(r.status == 2);
  CHECK(r.out.find("nothing serves ipc://" + dir_given.file("none.sock") +
                   " (given explicitly)") != std::string::npos);
  CHECK(r.out.find("to use another endpoint, give --endpoint (FENCEQ_ENDPOINT is read only when "
                   "none is given)") != std::string::npos);
}

TEST_CASE("tool: with neither --endpoint nor FENCEQ_ENDPOINT the development default is used") {
  if (service_socket_there()) {
    WARN("the fenceqd service's socket exists on this host: step 4 cannot be reached");
    return;
  }
  TempDir dir, repo;
  Daemon d(dir);
  const auto in_repo = [&](const std::string& args) {
    return fenceq::test::run({"/bin/sh", "-c",
                              "cd " + repo.path().string() + " && exec " +
                                  fenceq::test::fenceq_tool_path() + " " + args + " 2>&1"},
                             {"FENCEQ_ENDPOINT"});
  };
  auto r = in_repo("ping");
  CHECK(r.status == 2);
  CHECK(r.out.find("nothing serves ipc://var/fenceqd.sock (the development default): there is no "
                   "socket at " + repo.path().string() + "/var/fenceqd.sock") != std::string::npos);
  CHECK(r.out.find("to use another endpoint, give --endpoint or set FENCEQ_ENDPOINT") !=
        std::string::npos);
  // A folder laid out as `make run` leaves the repository: var/fenceqd.sock.
  std::filesystem::create_directory(repo.path() / "var");
  std::filesystem::create_symlink(dir.file("fenceqd.sock"), repo.path() / "var" / "fenceqd.sock");
  r = in_repo("enqueue dev-job");
  CHECK(r.status == 0);
  CHECK(tool(d, {"state", "dev-job"}).status == 0);
}

TEST_CASE("tool: an ipc:// endpoint with no socket fails at once, naming the file") {
  TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint",
                              "ipc://" + dir.file("none.sock"), "ping"});
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));  // not the 5 s timeout
  CHECK(r.status == 2);
  CHECK(r.out.find("unreachable") != std::string::npos);
  CHECK(r.out.find("there is no socket at " + dir.file("none.sock")) != std::string::npos);
  CHECK(r.out.find("make run") != std::string::npos);
  // The default endpoint is relative: the message names it whole, from the
  // folder the tool ran in.
  r = fenceq::test::run({"/bin/sh", "-c",
                         "cd " + dir.path().string() + " && FENCEQ_ENDPOINT= " +
                             fenceq::test::fenceq_tool_path() + " ping 2>&1"});
  CHECK(r.status == 2);
  CHECK(r.out.find("there is no socket at " + dir.path().string() + "/var/fenceqd.sock") !=
        std::string::npos);
  // A plain file where the socket should be.
  std::ofstream(dir.file("plain")) << "x";
  r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint",
                         "ipc://" + dir.file("plain"), "ping"});
  CHECK(r.status == 2);
  CHECK(r.out.find(dir.file("plain") + " is not a socket") != std::string::npos);
  // A socket this user may not connect to: the daemon's is 0600 without
  // --ipc-mode; another user (nobody, when the test runs as root, as root may
  // connect to anything) is told so.
  Daemon d(dir);
  std::vector<std::string> as_other{fenceq::test::fenceq_tool_path()};
  if (::geteuid() == 0) {
    as_other = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "ping"};
    // A folder nobody may search (as /run/fenceq is to users outside group
    // fenceq): not "no socket", but "may not connect".
    ::chmod(dir.path().c_str(), 0700);
    r = fenceq::test::run(as_other);
    CHECK(r.status == 2);
    CHECK(r.out.find("this user may not connect to " + dir.file("fenceqd.sock")) !=
          std::string::npos);
    as_other.resize(as_other.size() - 3);
    ::chmod(dir.path().c_str(), 0755);  // nobody may reach the file, not open it
  } else {
    ::chmod(dir.file("fenceqd.sock").c_str(), 0);
  }
  as_other.insert(as_other.end(), {"--endpoint", d.endpoint(), "ping"});
  r = fenceq::test::run(as_other);
  CHECK(r.status == 2);
  CHECK(r.out.find("this user may not connect to " + dir.file("fenceqd.sock")) !=
        std::string::npos);
  // The owner is served.
  r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "ping"});
  CHECK(r.status == 0);
}

namespace {

// SIGPIPE ignored for the life of the object: writing to a tool that has
// exited is EPIPE, not the death of the test.
struct IgnoreSigpipe {
  void (*old)(int) = ::signal(SIGPIPE, SIG_IGN);
  ~IgnoreSigpipe() { ::signal(SIGPIPE, old); }
};

struct FedResult {
  std::optional<int> status;  // nullopt: still running at the deadline (then killed)
  std::string out;            // stdout and stderr
};

// Runs argv with `input` on its stdin. With `keep_open` the write end stays
// open once the input is written, as from a producer that never ends (only
// a tool that stops reading by itself can finish). Killed after `limit`.
FedResult run_fed(const std::vector<std::string>& argv, const std::string& input, bool keep_open,
                  std::chrono::milliseconds limit) {
  // The tool may exit without reading all of `input`: EPIPE, not our death.
  IgnoreSigpipe ignore_pipe;
  fenceq::test::Child child(
      {.argv = argv, .output = fenceq::test::Command::Output::pipe, .stdin_pipe = true});
  ::fcntl(child.in(), F_SETFL, O_NONBLOCK);
  std::size_t written = 0;
  if (input.empty() && !keep_open) child.close_in();
  FedResult r;
  bool out_open = true;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({child.out(), POLLIN, 0});
    if (child.in() >= 0 && written < input.size()) fds.push_back({child.in(), POLLOUT, 0});
    ::poll(fds.data(), fds.size(), 20);
    for (const auto& p : fds) {
      if (!p.revents) continue;
      if (p.fd == child.out()) {
        out_open = child.read_output(0);
      } else {
        ssize_t n = ::write(child.in(), input.data() + written, input.size() - written);
        if (n > 0) written += static_cast<std::size_t>(n);
        if (n < 0 && errno != EAGAIN) written = input.size();
        if (written >= input.size() && !keep_open) child.close_in();
      }
    }
    if (!out_open && !child.running()) {
      r.status = child.status();
      break;
    }
  }
  r.out = child.output();
  return r;  // still running: killed by ~Child
}

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("tool: non-finite, negative or absurdly large durations are refused at parse time, "
          "in one line naming the option") {
  TempDir dir;
  // Nobody serves it: a value that got through would end in a timeout instead.
  const std::string nobody = "ipc://" + dir.file("nobody.sock");
  struct Case {
    std::vector<std::string> args;
    std::string option;
  };
  const std::vector<Case> cases = {
      {{"-t", "1e300", "ping"}, "--timeout"},
      {{"-t", "nan", "ping"}, "--timeout"},
      {{"-t", "inf", "ping"}, "--timeout"},
      {{"-t", "-1", "ping"}, "--timeout"},
      {{"-t", "0", "ping"}, "--timeout"},
      {{"--now", "nan", "ping"}, "--now"},
      {{"--now", "-inf", "ping"}, "--now"},
      {{"enqueue", "x", "--delay", "nan"}, "--delay"},
      {{"enqueue", "x", "--delay", "-1"}, "--delay"},
      {{"enqueue", "x", "--delay", "1e300"}, "--delay"},
      {{"claim", "x", "o", "inf"}, "ttl"},
      {{"claim", "x", "o", "-5"}, "ttl"},
      {{"claim-next", "q", "o", "nan"}, "ttl"},
      {{"claim-next", "q", "o", "1", "--wait", "1e300"}, "--wait"},
      {{"claim-next", "q", "o", "1", "--wait", "3601"}, "--wait"},
      {{"renew", "x", "o", "1", "1e300"}, "ttl"},
      {{"fail", "x", "o", "1", "e", "--retry-in", "nan"}, "--retry-in"},
      {{"fail", "x", "o", "1", "e", "--retry-in", "-1"}, "--retry-in"},
      {{"purge", "inf"}, "older_than"},
      {{"purge", "-1"}, "older_than"},
      {{"work", "--ttl", "nan", "--", "true"}, "--ttl"},
      {{"work", "--ttl", "-0.5", "--", "true"}, "--ttl"},
      {{"work", "--ttl", "1e300", "--", "true"}, "--ttl"},
      {{"work", "--wait", "-1", "--", "true"}, "--wait"},
      {{"work", "--wait", "inf", "--", "true"}, "--wait"},
      {{"work", "--retry-in", "1e300", "--", "true"}, "--retry-in"},
      {{"work", "--kill-after", "nan", "--", "true"}, "--kill-after"},
      {{"work", "--kill-after", "-1", "--", "true"}, "--kill-after"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv{fenceq::test::fenceq_tool_path(), "--endpoint", nobody};
    // A short timeout unless the case is about it: a value wrongly let through waits briefly.
    if (c.option != "--timeout") argv.insert(argv.end(), {"--timeout", "0.2"});
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    // Bounded: a wait of 1e300 s let through would never end.
    auto r = run_fed(argv, "", false, 3s);
    INFO(Catch::Detail::stringify(c.args) << " -> " << r.out);
    CHECK(r.status == 2);
    CHECK(lines(r.out) == 1);
    CHECK(r.out.rfind("fenceq: " + c.option + ": must be ", 0) == 0);
  }
  // The bounds themselves are taken (and then fail against nobody, having
  // got as far as sending).
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"enqueue", "x", "--delay", "1000000000"}, {"claim", "x", "o", "1e9"}}) {
    std::vector<std::string> argv{fenceq::test::fenceq_tool_path(), "--endpoint", nobody,
                                  "--timeout", "0.2"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_fed(argv, "", false, 3s);
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK(r.out.find("unreachable: nothing serves") != std::string::npos);
  }
}

TEST_CASE("tool: a payload file or stdin is read no further than the payload limit + 1 byte, "
          "then refused naming the limit") {
  TempDir dir;
  Daemon d(dir);
  constexpr std::size_t kLimit = fenceq::protocol::kMaxPayloadBytes;
  const std::string limit_text = std::to_string(kLimit);
  auto write_file = [&](const std::string& name, std::size_t size) {
    auto path = dir.file(name);
    std::ofstream(path, std::ios::binary) << std::string(size, 'z');
    return path;
  };
  // At the limit: taken, stored whole.
  auto r = tool(d, {"--now", "1", "enqueue", "at-limit", "--payload-file",
                    write_file("at-limit", kLimit)});
  INFO(r.out);
  CHECK(r.status == 0);
  fenceq::Client c(d.endpoint());
  auto job = c.claim_next("default", "w", 10, 0, 2.0);
  REQUIRE(job);
  CHECK(job->payload->bytes.size() == kLimit);

  // One byte more: refused by the tool, naming the option and the limit.
  r = tool(d, {"--now", "1", "enqueue", "over", "--payload-file", write_file("over", kLimit + 1)});
  INFO(r.out);
  CHECK(r.status == 2);
  CHECK(lines(r.out) == 1);
  CHECK(r.out.find("--payload-file") != std::string::npos);
  CHECK(r.out.find(limit_text + " bytes") != std::string::npos);
  CHECK_FALSE(c.state("over"));

  // Stdin from a producer that never closes (as /dev/zero never ends): the
  // tool stops at limit + 1 bytes and refuses, without waiting for an end.
  auto fed = run_fed({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "--now", "1",
                      "enqueue", "endless", "--payload-file", "-"},
                     std::string(kLimit + 1, 'z'), true, 5s);
  INFO(fed.out);
  REQUIRE(fed.status);
  CHECK(*fed.status == 2);
  CHECK(lines(fed.out) == 1);
  CHECK(fed.out.find("--payload-file: stdin is larger than the limit of " + limit_text +
                     " bytes") != std::string::npos);
  // The same from /dev/zero, at once.
  const auto t0 = std::chrono::steady_clock::now();
  r = tool(d, {"--now", "1", "enqueue", "zeros", "--payload-file", "/dev/zero"});
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  CHECK(r.status == 2);
  CHECK(r.out.find("--payload-file: /dev/zero is larger than the limit of " + limit_text) !=
        std::string::npos);
  CHECK_FALSE(c.state("endless"));
  CHECK_FALSE(c.state("zeros"));
}

TEST_CASE("tool: a --curve-key file is read no further than 64 KiB, and a key from a pipe still "
          "works") {
  TempDir dir;
  auto key_file = dir.file("client.key");
  auto keygen = fenceq::test::run({fenceq::test::fenceqd_path(), "--curve-keygen", key_file});
  REQUIRE(keygen.status == 0);
  std::ifstream in(key_file);
  const std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string server_key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";  // any valid one
  const std::vector<std::string> argv{
      fenceq::test::fenceq_tool_path(), "--endpoint", "tcp://127.0.0.1:9", "--timeout", "0.2",
      "--curve-key", "/dev/fd/0", "--curve-server-key", server_key, "ping"};

  // From a producer that never closes: refused after 64 KiB + 1 bytes.
  auto r = run_fed(argv, std::string(64 * 1024 + 1, 'k'), true, 5s);
  INFO(r.out);
  REQUIRE(r.status);
  CHECK(*r.status == 2);
  CHECK(lines(r.out) == 1);
  CHECK(r.out.find("--curve-key: /dev/fd/0 is larger than the limit of 65536 bytes") !=
        std::string::npos);

  // A real key through a pipe (as `--curve-key <(...)`): taken (then no
  // daemon answers); a wrong one is named by its own path.
  r = run_fed(argv, key, false, 5s);
  INFO(r.out);
  REQUIRE(r.status);
  CHECK(*r.status == 2);
  // The key taken, the call times out: nothing listens on port 9, so with
  // ZMQ_IMMEDIATE no connection takes the request (it is not sent).
  CHECK(r.out.find("fenceq: timeout: ") != std::string::npos);
  CHECK(r.out.find("--curve-key") == std::string::npos);
  r = run_fed(argv, "nothing here\n", false, 5s);
  INFO(r.out);
  REQUIRE(r.status);
  CHECK(*r.status == 2);
  CHECK(r.out.find("/dev/fd/0 has no public-key and secret-key lines") != std::string::npos);
}

TEST_CASE("tool: fenceq work --help documents --kill-after and its default") {
  auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "work", "--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("--kill-after") != std::string::npos);
  CHECK(r.out.find("SIGKILL") != std::string::npos);
  CHECK(r.out.find("(default 10)") != std::string::npos);
}

TEST_CASE("tool: fenceq work --help documents --prefetch, and when to use it or not") {
  auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "work", "--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("--prefetch") != std::string::npos);
  CHECK(r.out.find("(default 1") != std::string::npos);
  CHECK(r.out.find("many short\ncommands") != std::string::npos);
  CHECK(r.out.find("Not for long\ncommands") != std::string::npos);
  r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "enqueue", "--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("--from") != std::string::npos);
  CHECK(r.out.find("batches of up to 1000") != std::string::npos);
}

// --- enqueue --from: jobs as JSON lines ----------------------------------------

namespace {

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  auto path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// `n` job lines: {"id": "<prefix>NNNN", "queue": queue}, from number `first`.
std::string job_lines(const std::string& prefix, int first, int n, const std::string& queue) {
  std::string out;
  char id[64];
  for (int i = first; i < first + n; ++i) {
    std::snprintf(id, sizeof id, "%s%04d", prefix.c_str(), i);
    out += nlohmann::json{{"id", id}, {"queue", queue}}.dump() + "\n";
  }
  return out;
}

std::uint64_t requests(fenceq::Client& c) { return c.stats().requests; }

std::int64_t ready_in(fenceq::Client& c, const std::string& queue) {
  const auto q = fenceq::test::queue_stats(c, queue);
  return q ? q->ready : 0;
}

}  // namespace

TEST_CASE("tool: enqueue --from a file or stdin: one job a JSON line, blank lines skipped, a "
          "summary line, and exit 1 when every job existed") {
  TempDir dir;
  Daemon d(dir);
  fenceq::Client c(d.endpoint());
  const std::string jobs_text =
      R"({"id": "f-1", "queue": "from", "payload": "résumé \"quoted\"\n", "priority": 5})"
      "\n\n   \r\n"
      R"({"id": "f-2", "delay": 100, "max_attempts": 3})"
      "\n"
      R"({"payload": null, "id": "f-3"})"
      "\n"
      R"({"id": "f-1", "queue": "from"})";  // the last line without its newline: taken too
  // --queue and --priority are the defaults for lines without them.
  auto r = tool(d, {"--now", "10", "enqueue", "--from", write_file(dir, "jobs.jsonl", jobs_text),
                    "--queue", "dflt", "--priority", "2"});
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out == "{\"created\":3,\"existed\":1}\n");

  std::map<std::string, fenceq::JobInfo> jobs;
  for (auto& j : c.list({})) jobs[j.id] = j;
  REQUIRE(jobs.size() == 3);
  CHECK(jobs["f-1"].queue == "from");
  CHECK(jobs["f-1"].priority == 5);
  CHECK(jobs["f-2"].queue == "dflt");
  CHECK(jobs["f-2"].priority == 2);
  CHECK(jobs["f-2"].max_attempts == 3);
  CHECK(jobs["f-2"].status == fenceq::JobStatus::delayed);
  CHECK(jobs["f-2"].not_before == 110.0);  // --now 10 + delay 100
  CHECK(jobs["f-3"].queue == "dflt");
  auto job = c.claim_next("from", "w", 10, 0, 20.0);
  REQUIRE(job);
  CHECK(job->id == "f-1");
  REQUIRE(job->payload);
  CHECK(job->payload->bytes == "résumé \"quoted\"\n");
  CHECK_FALSE(job->payload->binary);
  job = c.claim_next("dflt", "w", 10, 0, 20.0);
  REQUIRE(job);
  CHECK(job->id == "f-3");
  CHECK_FALSE(job->payload);

  // From stdin: two new, one there already.
  auto fed = run_fed({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "enqueue",
                      "--from", "-"},
                     "{\"id\": \"s-1\"}\n{\"id\": \"f-3\"}\n\n{\"id\": \"s-2\"}\n", false, 5s);
  INFO(fed.out);
  REQUIRE(fed.status);
  CHECK(*fed.status == 0);
  CHECK(fed.out == "{\"created\":2,\"existed\":1}\n");
  CHECK(c.state("s-1"));
  CHECK(c.state("s-2"));

  // Everything there already: as `enqueue ID` for one, exit 1.
  fed = run_fed({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "enqueue",
                 "--from", "-"},
                "{\"id\": \"s-1\"}\n{\"id\": \"s-2\"}\n", false, 5s);
  INFO(fed.out);
  REQUIRE(fed.status);
  CHECK(*fed.status == 1);
  CHECK(fed.out == "{\"created\":0,\"existed\":2}\n");
  // Nothing at all: nothing refused either.
  fed = run_fed({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "enqueue",
                 "--from", "-"},
                "\n\n", false, 5s);
  REQUIRE(fed.status);
  CHECK(*fed.status == 0);
  CHECK(fed.out == "{\"created\":0,\"existed\":0}\n");

  // An id, or a payload option, with --from; neither: usage errors.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"enqueue", "x", "--from", "-"},
           {"enqueue", "--from", "-", "--payload", "p"},
           {"enqueue"}}) {
    r = tool(d, args);
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK(lines(r.out) == 1);
  }
  CHECK_FALSE(c.state("x"));
}

TEST_CASE("tool: enqueue --from sends 2,500 lines in three batches") {
  TempDir dir;
  Daemon d(dir);
  fenceq::Client c(d.endpoint());
  const auto path = write_file(dir, "many.jsonl", job_lines("m-", 1, 2500, "many"));
  // What two stats requests in a row count: the baseline.
  const auto r0 = requests(c);
  const auto r1 = requests(c);
  auto r = tool(d, {"enqueue", "--from", path});
  const auto r2 = requests(c);
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out == "{\"created\":2500,\"existed\":0}\n");
  CHECK(r2 - r1 - (r1 - r0) == 3);  // 1000 + 1000 + 500
  CHECK(ready_in(c, "many") == 2500);
  CHECK(c.state("m-0001"));
  CHECK(c.state("m-2500"));

  // Again: all there, exit 1, three batches again.
  r = tool(d, {"enqueue", "--from", path});
  CHECK(r.status == 1);
  CHECK(r.out == "{\"created\":0,\"existed\":2500}\n");
}

TEST_CASE("tool: enqueue --from: a bad line exits 2 naming it, after the batches before it were "
          "applied, with nothing of its own batch nor after") {
  TempDir dir;
  Daemon d(dir);
  fenceq::Client c(d.endpoint());
  struct BadLine {
    std::string line;
    std::string error;
  };
  const std::vector<BadLine> cases = {
      {R"({"queue": "bad"})", "field 'id' is required"},
      {R"({"id": "x", "prio": 1})", "unknown field 'prio'"},
      {R"({"id": 7})", "field 'id' must be a string"},
      {R"({"id": "x", "priority": 1.5})", "field 'priority' must be an integer"},
      {R"({"id": "x", "priority": 4294967296})", "field 'priority' must be in"},
      {R"({"id": "x", "delay": -1})", "field 'delay' must be in [0, 1000000000]"},
      {R"({"id": "x", "max_attempts": -1})", "field 'max_attempts' must be in"},
      {R"({"id": "x", "payload": {"a": 1}})", "a field's value must be a string, a number or null"},
      {R"({"id": "x", "id": "y"})", "field 'id' is given twice"},
      {R"({"id": "x", "queue": ""})", "field 'queue' must be 1 to 256 bytes long"},
      {R"({"id": "x", "group": ""})", "field 'group' must be 1 to 256 bytes long"},
      {R"({"id": "x", "group": 7})", "field 'group' must be a string"},
      {R"(["x"])", "must be a JSON object"},
      {R"({"id": "x")", "not JSON"},
      {"{\"id\": \"\xff\"}", "not JSON"},
  };
  int n = 0;
  for (const auto& bad : cases) {
    ++n;
    const std::string prefix = "b" + std::to_string(n) + "-";
    // 1,000 good lines (a batch, sent), 499 more (its batch, never sent), the
    // bad line (line 1,500), then 1,000 good lines never read.
    const std::string text = job_lines(prefix, 1, 1000, "bad") +
                             job_lines(prefix, 1001, 499, "bad") + bad.line + "\n" +
                             job_lines(prefix, 1500, 1000, "bad");
    auto r = tool(d, {"enqueue", "--from", write_file(dir, prefix + ".jsonl", text)});
    INFO(bad.line << " -> " << r.out);
    CHECK(r.status == 2);
    CHECK(lines(r.out) == 1);
    CHECK(r.out.find("line 1500: " + bad.error) != std::string::npos);
    CHECK(r.out.find("the jobs up to line 1000 were enqueued (created 1000, existed 0), none "
                     "after") != std::string::npos);
    CHECK(c.state(prefix + "1000"));
    CHECK_FALSE(c.state(prefix + "1001"));
    CHECK_FALSE(c.state(prefix + "1499"));
    CHECK_FALSE(c.state(prefix + "1500"));
    CHECK_FALSE(c.state("x"));
  }
  CHECK(ready_in(c, "bad") == 1000 * n);

  // The first line bad: nothing sent at all.
  auto fed = run_fed({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "enqueue",
                      "--from", "-"},
                     "\n{\"id\": \"first\", \"dealy\": 1}\n{\"id\": \"second\"}\n", false, 5s);
  INFO(fed.out);
  REQUIRE(fed.status);
  CHECK(*fed.status == 2);
  CHECK(fed.out == "fenceq: --from stdin: line 2: unknown field 'dealy' (a job has id, queue, "
                   "payload, priority, delay, max_attempts, max_runtime, group); nothing was "
                   "enqueued\n");
  CHECK_FALSE(c.state("first"));
  CHECK_FALSE(c.state("second"));
}

TEST_CASE("tool: enqueue --from - streams: a quiet pipe's jobs are enqueued while it stays "
          "open, and an overlong line is refused without reading on") {
  TempDir dir;
  Daemon d(dir);
  fenceq::Client c(d.endpoint());
  IgnoreSigpipe ignore_pipe;
  fenceq::test::Child proc({.argv = {fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(),
                                     "enqueue", "--from", "-"},
                            .output = fenceq::test::Command::Output::pipe,
                            .stdin_pipe = true});
  const std::string first = job_lines("p-", 1, 3, "pipe");
  REQUIRE(::write(proc.in(), first.data(), first.size()) == static_cast<ssize_t>(first.size()));
  // The pipe stays open: the three jobs are sent once it is quiet.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!c.state("p-0003") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  CHECK(c.state("p-0001"));
  CHECK(c.state("p-0003"));
  CHECK(proc.running());  // still reading

  // A line longer than the payload limit + 64 KiB, with no end in sight: refused.
  const std::string longer(fenceq::protocol::kMaxPayloadBytes + 64 * 1024 + 1, 'x');
  ::fcntl(proc.in(), F_SETFL, O_NONBLOCK);
  std::size_t written = 0;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < until) {
    if (written < longer.size()) {
      ssize_t n = ::write(proc.in(), longer.data() + written, longer.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
    }
    proc.read_output(10);
    if (!proc.running()) break;
  }
  // What is left in the pipe (once the tool is gone, the write end is closed).
  if (!proc.running()) proc.read_all_output();
  const std::string& text = proc.output();
  INFO(text);
  CHECK(proc.status() == 2);
  CHECK(text == "fenceq: --from stdin: line 4 is longer than 327680 bytes (the 262144-byte "
                "payload limit and 64 KiB for the other fields); the jobs up to line 3 were "
                "enqueued (created 3, existed 0), none after\n");
}

TEST_CASE("tool: enqueue --from keeps each batch within the daemon's frame limit: large "
          "payloads go in smaller batches") {
  TempDir dir;
  Daemon d(dir);  // --max-message: the default 1 MiB
  fenceq::Client c(d.endpoint());
  // Eight payloads of 200 KiB: 1.6 MiB in one request would be dropped.
  std::string text;
  for (int i = 1; i <= 8; ++i) {
    text += nlohmann::json{{"id", "big-" + std::to_string(i)},
                           {"payload", std::string(200 * 1024, 'a' + i)}}
                .dump() +
            "\n";
  }
  const auto path = write_file(dir, "big.jsonl", text);
  const auto r0 = requests(c);
  const auto r1 = requests(c);
  auto r = tool(d, {"enqueue", "--from", path});
  const auto r2 = requests(c);
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out == "{\"created\":8,\"existed\":0}\n");
  CHECK(r2 - r1 - (r1 - r0) == 4);  // two of 200 KiB a batch
  auto job = c.claim_next("default", "w", 10, 0, 1.0);
  REQUIRE(job);
  CHECK(job->payload->bytes == std::string(200 * 1024, 'a' + 1));
}

TEST_CASE("tool: show prints a job's whole record, and list --owner keeps one owner's jobs") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  // Ids around the one shown, so that finding its row cannot pick a neighbour.
  for (const char* id : {"job-6", "job-7a", "job-\xC3\xA9"}) {
    REQUIRE(tool(d, {"enqueue", id, "--queue", "thumbs", "--max-attempts", "3"}).status == 0);
  }
  REQUIRE(tool(d, {"enqueue", "job-7", "--queue", "thumbs", "--max-attempts", "3", "--payload",
                   "photo-7.jpg"})
              .status == 0);
  {
    std::ofstream(dir.file("bytes.bin"), std::ios::binary) << std::string("\x89PNG\0\xff", 6);
  }
  REQUIRE(tool(d, {"enqueue", "job-8", "--queue", "thumbs", "--max-attempts", "3",
                   "--payload-file", dir.file("bytes.bin")})
              .status == 0);
  REQUIRE(tool(d, {"claim", "job-7", "worker-a", "30"}).out == "1\n");
  REQUIRE(tool(d, {"fail", "job-7", "worker-a", "1", "disk full", "--retry-in", "0"}).status == 0);
  REQUIRE(tool(d, {"claim", "job-7", "worker-b", "30"}).out == "2\n");
  REQUIRE(tool(d, {"complete", "job-7", "worker-b", "2", "thumbnail.png"}).status == 0);
  REQUIRE(tool(d, {"claim", "job-8", "worker-a", "30"}).out == "1\n");
  REQUIRE(tool(d, {"claim", "job-\xC3\xA9", "worker-a", "30"}).out == "1\n");

  auto r = tool(d, {"show", "job-7"});  // not a terminal: JSON
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["id"] == "job-7");
  CHECK(j["queue"] == "thumbs");
  CHECK(j["state"] == "done");
  CHECK(j["attempts"] == 2);
  CHECK(j["max_attempts"] == 3);
  CHECK(j["fence"] == 2);
  CHECK(j["owner"] == "worker-b");
  CHECK(j["error"] == "disk full");
  CHECK(j["result"] == "thumbnail.png");
  CHECK(j["payload"] == "photo-7.jpg");
  r = tool(d, {"show", "job-8"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["payload"]["base64"] == "iVBORwD/");  // 89 50 4e 47 00 ff
  r = tool(d, {"show", "job-\xC3\xA9"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["id"] == "job-\xC3\xA9");
  r = tool(d, {"show", "job-7b"});  // between two ids that exist
  CHECK(r.status == 1);
  CHECK(r.out == "null\n");

  r = tool(d, {"list", "--owner", "worker-a"});
  REQUIRE(r.status == 0);
  std::vector<std::string> ids;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    ids.push_back(nlohmann::json::parse(line)["id"]);
  }
  CHECK(ids == std::vector<std::string>{"job-8", "job-\xC3\xA9"});
  r = tool(d, {"list", "--owner", "worker-a", "--limit", "1"});
  CHECK(r.out.find("job-8") != std::string::npos);
  CHECK(r.out.find("job-\xC3\xA9") == std::string::npos);
  CHECK(tool(d, {"list", "--owner", "nobody"}).out.empty());
}

TEST_CASE("tool: list --order created or -created and --prefix, paged with --after and "
          "--after-created") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  for (const char* id : {"job-c", "job-a", "other", "job-b"}) {
    REQUIRE(tool(d, {"enqueue", id}).status == 0);
  }
  auto rows = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "list");
    auto r = tool(d, args);
    INFO(r.out);
    REQUIRE(r.status == 0);
    std::vector<nlohmann::json> out;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  };
  auto ids = [](const std::vector<nlohmann::json>& js) {
    std::vector<std::string> out;
    for (const auto& j : js) out.push_back(j["id"]);
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(ids(rows({})) == V{"job-a", "job-b", "job-c", "other"});
  CHECK(ids(rows({"--order", "created"})) == V{"job-c", "job-a", "other", "job-b"});
  CHECK(ids(rows({"--order", "-created"})) == V{"job-b", "other", "job-a", "job-c"});
  CHECK(ids(rows({"--prefix", "job-", "--order", "-created"})) == V{"job-b", "job-a", "job-c"});
  auto first = rows({"--prefix", "job-", "--order", "created", "--limit", "1"});
  REQUIRE(ids(first) == V{"job-c"});
  REQUIRE(first[0]["created"].get<double>() > 0);
  std::ostringstream created;
  created << std::setprecision(17) << first[0]["created"].get<double>();
  CHECK(ids(rows({"--prefix", "job-", "--order", "created", "--limit", "1", "--after", "job-c",
                  "--after-created", created.str()})) == V{"job-a"});
  // The cursor by age is both; the daemon says so.
  auto r = tool(d, {"list", "--order", "created", "--after", "job-c"});
  CHECK(r.status != 0);
  CHECK(r.out.find("after_created") != std::string::npos);
  CHECK(tool(d, {"list", "--order", "age"}).status != 0);
}

namespace {

// Runs the tool on a pseudo-terminal (util-linux `script`), as a person would,
// feeding it `keys` after `delay`; its output with CR LF made LF. `env`:
// NAME=value words set for the tool.
fenceq::test::RunResult on_terminal(const Daemon& d, const std::string& args,
                                    const std::string& keys = "", double delay = 0,
                                    const std::string& env = "") {
  const std::string tool_cmd = (env.empty() ? "" : "env " + env + " ") +
                               fenceq::test::fenceq_tool_path() + " --endpoint " + d.endpoint() +
                               " --timeout 3 " + args;
  const std::string feed = keys.empty() ? "true"
                                        : "sleep " + std::to_string(delay) + "; printf " + keys;
  // -e: script exits with the tool's status; the feeding keeps stdin open meanwhile.
  // The keys come through a FIFO held open 5 s more, and the feeder is
  // killed once the tool has exited: the run ends when the tool does.
  auto r = fenceq::test::run(
      {"/usr/bin/timeout", "20", "/bin/sh", "-c",
       "f=$(mktemp -u); mkfifo \"$f\"; (" + feed + "; sleep 5) > \"$f\" & feeder=$!; " +
           "script -qefc '" + tool_cmd + "' /dev/null < \"$f\"; rc=$?; " +
           "kill $feeder 2>/dev/null; rm -f \"$f\"; exit $rc"});
  std::string out;
  for (char ch : r.out) {
    if (ch != '\r') out += ch;
  }
  r.out = out;
  return r;
}

}  // namespace

TEST_CASE("tool: show names a job's parents and its blocked children with their states and "
          "stats counts blocked jobs") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  REQUIRE(tool(d, {"enqueue", "part-1", "--queue", "book"}).status == 0);
  REQUIRE(tool(d, {"enqueue", "part-2", "--queue", "book"}).status == 0);
  REQUIRE(tool(d, {"enqueue", "book", "--queue", "book", "--after", "part-2,part-1"}).status == 0);
  REQUIRE(tool(d, {"claim", "part-1", "w", "30"}).out == "1\n");
  REQUIRE(tool(d, {"complete", "part-1", "w", "1", "p1"}).status == 0);
  auto r = on_terminal(d, "show book");
  INFO(r.out);
  CHECK(r.out.find("state     blocked") != std::string::npos);
  CHECK(r.out.find("after     part-1 (done), part-2 (ready)") != std::string::npos);
  r = on_terminal(d, "show part-2");
  CHECK(r.out.find("children  book (blocked)") != std::string::npos);
  r = on_terminal(d, "stats");
  CHECK(r.out.find("QUEUE  READY  DELAYED  BLOCKED  LEASED") != std::string::npos);
  CHECK(r.out.find("book   1      0        1        0       1") != std::string::npos);
  // Not a terminal: JSON, with the lists as the daemon gave them.
  auto j = nlohmann::json::parse(tool(d, {"show", "book"}).out);
  CHECK(j["after"] == nlohmann::json({"part-1", "part-2"}));
  CHECK(nlohmann::json::parse(tool(d, {"show", "part-2"}).out)["blocked_children"] ==
        nlohmann::json({"book"}));
  CHECK(nlohmann::json::parse(tool(d, {"stats"}).out)["queues"]["book"]["blocked"] == 1);
  // Once the child is no longer blocked, its parents list it no more.
  REQUIRE(tool(d, {"claim", "part-2", "w", "30"}).out == "1\n");
  REQUIRE(tool(d, {"complete", "part-2", "w", "1", "p2"}).status == 0);
  r = on_terminal(d, "show part-2");
  CHECK(r.out.find("children") == std::string::npos);
  CHECK(r.out.find("state     done") != std::string::npos);
}

TEST_CASE("tool: on a terminal, jobs and stats print as tables with relative times, and --json "
          "keeps JSON") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  REQUIRE(tool(d, {"enqueue", "job-7", "--queue", "thumbs"}).status == 0);
  REQUIRE(tool(d, {"enqueue", "job-8", "--queue", "thumbs", "--delay", "600"}).status == 0);
  REQUIRE(tool(d, {"claim", "job-7", "worker-a", "30"}).out == "1\n");
  REQUIRE(tool(d, {"complete", "job-7", "worker-z", "1", "stale"}).status == 1);

  auto r = on_terminal(d, "state job-7");
  CHECK(r.status == 0);
  CHECK(r.out.find("owner   worker-a") != std::string::npos);
  // A 30 s lease taken just now ends in at most 30 s, however slow the machine.
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex("lease   ends in ([0-9.]+) s")));
  CHECK(std::stod(m[1]) > 0);
  CHECK(std::stod(m[1]) <= 30);
  r = on_terminal(d, "list");
  INFO(r.out);
  CHECK(r.out.find("ID     QUEUE   STATE    AGE") != std::string::npos);
  // Enqueued just now: an age in seconds (a fraction on an idle machine),
  // less than the lease has run.
  REQUIRE(std::regex_search(r.out, m, std::regex("job-7 +thumbs +leased +([0-9.]+) s +0 ")));
  CHECK(std::stod(m[1]) < 30);
  CHECK(r.out.find("lease ends in ") != std::string::npos);
  CHECK(r.out.find("claimable in 10 min") != std::string::npos);  // the 600 s delay
  r = on_terminal(d, "show job-7");
  CHECK(r.out.find("state     leased") != std::string::npos);
  CHECK(r.out.find("enqueued  ") != std::string::npos);
  CHECK(r.out.find("enqueued  -") == std::string::npos);
  CHECK(r.out.find("payload   -") != std::string::npos);
  r = on_terminal(d, "stats");
  CHECK(r.out.find("QUEUE   READY  DELAYED  LEASED  DONE  DEAD") != std::string::npos);
  CHECK(r.out.find("thumbs  0      1        1       0     0") != std::string::npos);
  CHECK(r.out.find("complete 1") != std::string::npos);  // the refused stale write
  CHECK(r.out.find("SINCE START  CLAIMED  COMPLETED  FAILED  RETRIED  DEAD  EXPIRED  REFUSED: "
                   "RENEW  COMPLETE") != std::string::npos);
  r = on_terminal(d, "--json state job-7");
  CHECK(nlohmann::json::parse(r.out)["owner"] == "worker-a");
  // The per-queue counters, as a script reads them.
  auto totals = nlohmann::json::parse(on_terminal(d, "--json stats").out)["queues"]["thumbs"]["totals"];
  CHECK(totals["claimed"] == 1);
  CHECK(totals["completed"] == 0);
  CHECK(totals["refused"]["complete"] == 1);
}

TEST_CASE("tool: groups (issue 31): enqueue --group and --from lines with a group, list --group, "
          "a GROUP column, show, stats, limit --group-* and a group's own group-limit (C3.25)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  fenceq::Client c(d.endpoint());
  for (const auto& [id, group] : std::vector<std::pair<std::string, std::string>>{
           {"a-1", "acme"}, {"a-2", "acme"}, {"b-1", "bolt"}}) {
    REQUIRE(tool(d, {"enqueue", id, "--queue", "tenants", "--group", group}).status == 0);
  }
  REQUIRE(tool(d, {"enqueue", "n-1", "--queue", "plain"}).status == 0);
  // A group of 0 bytes is the daemon's invalid_argument: exit 2, nothing created.
  auto r = tool(d, {"enqueue", "e-1", "--group", ""});
  CHECK(r.status == 2);
  CHECK(r.out.find("group") != std::string::npos);
  CHECK_FALSE(c.state("e-1"));

  // --from: --group is the default of the lines without one; null: no group.
  r = tool(d, {"enqueue", "--from",
               write_file(dir, "groups.jsonl",
                          "{\"id\": \"f-1\"}\n{\"id\": \"f-2\", \"group\": \"bolt\"}\n"
                          "{\"id\": \"f-3\", \"group\": null}\n"),
               "--queue", "fromq", "--group", "acme"});
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out == "{\"created\":3,\"existed\":0}\n");
  std::map<std::string, std::optional<std::string>> from;
  fenceq::ListOptions fromq;
  fromq.queue = "fromq";
  for (const auto& j : c.list(fromq)) from[j.id] = j.group;
  CHECK(from == std::map<std::string, std::optional<std::string>>{
                    {"f-1", "acme"}, {"f-2", "bolt"}, {"f-3", std::nullopt}});

  // JSON lines: `group` only on the rows of jobs that have one; --group filters.
  const auto rows = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "list");
    auto listed = tool(d, args);
    INFO(listed.out);
    REQUIRE(listed.status == 0);
    std::vector<nlohmann::json> out;
    std::istringstream lines(listed.out);
    for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  };
  auto acme = rows({"--group", "acme", "--queue", "tenants"});
  REQUIRE(acme.size() == 2);
  CHECK(acme[0]["id"] == "a-1");
  CHECK(acme[1]["id"] == "a-2");
  CHECK(acme[0]["group"] == "acme");
  CHECK(rows({"--group", "acme"}).size() == 3);  // f-1 too
  auto plain = rows({"--queue", "plain"});
  REQUIRE(plain.size() == 1);
  CHECK_FALSE(plain[0].contains("group"));
  CHECK(rows({"--group", "nobody"}).empty());
  r = tool(d, {"show", "b-1"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["group"] == "bolt");
  CHECK_FALSE(nlohmann::json::parse(tool(d, {"show", "n-1"}).out).contains("group"));

  // On a terminal: a GROUP column when a job shown has a group ("-" for
  // one without), none otherwise; show says the group.
  std::smatch m;
  r = on_terminal(d, "list");
  INFO(r.out);
  CHECK(std::regex_search(r.out, std::regex("ID +QUEUE +GROUP +STATE +AGE")));
  CHECK(std::regex_search(r.out, std::regex("\na-1 +tenants +acme +ready ")));
  CHECK(std::regex_search(r.out, std::regex("\nn-1 +plain +- +ready ")));
  r = on_terminal(d, "list --queue plain");
  CHECK(std::regex_search(r.out, std::regex("ID +QUEUE +STATE +AGE")));
  CHECK(r.out.find("GROUP") == std::string::npos);
  r = on_terminal(d, "show a-2");
  CHECK(r.out.find("\ngroup     acme\n") != std::string::npos);
  CHECK(on_terminal(d, "show n-1").out.find("group ") == std::string::npos);

  // limit --group-*: sent with queue_config, shown by stats.
  r = tool(d, {"limit", "tenants", "--group-max-leased", "1", "--group-rate", "5", "--group-per",
               "60"});
  INFO(r.out);
  CHECK(r.status == 0);
  auto q = nlohmann::json::parse(tool(d, {"stats"}).out)["queues"];
  CHECK(q["tenants"]["group_max_leased"] == 1);
  CHECK(q["tenants"]["group_rate"] == 5);
  CHECK(q["tenants"]["group_per"] == 60.0);
  CHECK(q["tenants"]["groups_waiting"] == 2);  // acme and bolt
  CHECK_FALSE(q["plain"].contains("group_max_leased"));
  CHECK_FALSE(q["plain"].contains("groups_waiting"));
  r = on_terminal(d, "stats");
  INFO(r.out);
  CHECK(std::regex_search(r.out, std::regex("GROUPS +WAITING +MAX LEASED EACH +RATE EACH")));
  CHECK(std::regex_search(r.out, std::regex("\ntenants +2 +1 +5 per 60 s\n")));
  // Only the queues with group settings or groups waiting.
  const auto groups_at = r.out.find("GROUPS ");
  REQUIRE(groups_at != std::string::npos);
  const auto groups_table = r.out.substr(groups_at, r.out.find("\n\n", groups_at) - groups_at);
  CHECK(groups_table.find("plain") == std::string::npos);
  CHECK(groups_table.find("fromq") != std::string::npos);  // its ready jobs of acme and bolt
  // The daemon holds them: one job of each group at most, so acme's second waits.
  std::set<std::string> claimed;
  for (int i = 0; i < 2; ++i) {
    r = tool(d, {"claim-next", "tenants", "w", "30"});
    INFO(r.out);
    REQUIRE(r.status == 0);
    claimed.insert(nlohmann::json::parse(r.out)["id"].get<std::string>());
  }
  CHECK(claimed.count("b-1") == 1);
  CHECK(claimed.size() == 2);
  CHECK(tool(d, {"claim-next", "tenants", "w", "30"}).out == "null\n");

  // group-limit (C3.25): acme's own cap of 2 lets its second job through,
  // stats lists it, and inherit gives acme the queue's cap of 1 again.
  r = tool(d, {"group-limit", "tenants", "acme", "--max-leased", "2"});
  INFO(r.out);
  CHECK(r.status == 0);
  r = tool(d, {"claim-next", "tenants", "w", "30"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["id"] == "a-2");
  q = nlohmann::json::parse(tool(d, {"stats"}).out)["queues"];
  CHECK(q["tenants"]["group_overrides"] == 1);
  CHECK(q["tenants"]["group_config"] == nlohmann::json{{"acme", {{"max_leased", 2}}}});
  r = on_terminal(d, "stats");
  CHECK(std::regex_search(r.out, std::regex("GROUP LIMITS +GROUP +MAX LEASED +RATE")));
  CHECK(std::regex_search(r.out, std::regex("\ntenants +acme +2 +\\(queue's\\)\n")));
  r = tool(d, {"group-limit", "tenants", "acme", "--max-leased", "x"});
  CHECK(r.status == 2);
  CHECK(r.out.find("a number or 'inherit'") != std::string::npos);
  CHECK(tool(d, {"group-limit", "tenants", "acme"}).status == 2);
  r = tool(d, {"group-limit", "tenants", "acme", "--rate", "-1"});  // the daemon's refusal
  CHECK(r.status != 0);
  CHECK(r.out.find("invalid_argument") != std::string::npos);
  CHECK(tool(d, {"group-limit", "tenants", "acme", "--max-leased", "inherit"}).status == 0);
  q = nlohmann::json::parse(tool(d, {"stats"}).out)["queues"];
  CHECK_FALSE(q["tenants"].contains("group_overrides"));
  CHECK_FALSE(q["tenants"].contains("group_config"));

  // A setting left out keeps its value; 0 lifts one; both lifted, stats says none.
  CHECK(tool(d, {"limit", "tenants", "--group-per", "30"}).status == 0);
  q = nlohmann::json::parse(tool(d, {"stats"}).out)["queues"];
  CHECK(q["tenants"]["group_per"] == 30.0);
  CHECK(q["tenants"]["group_max_leased"] == 1);
  CHECK(tool(d, {"limit", "tenants", "--group-max-leased", "0", "--group-rate", "0"}).status == 0);
  q = nlohmann::json::parse(tool(d, {"stats"}).out)["queues"];
  CHECK_FALSE(q["tenants"].contains("group_max_leased"));
  // Nothing to set: a usage error that names the group settings too.
  r = tool(d, {"limit", "tenants"});
  CHECK(r.status == 2);
  CHECK(r.out.find("--group-max-leased, --group-rate or --group-per") != std::string::npos);

  // The help says so.
  r = tool(d, {"limit", "--help"});
  CHECK(r.out.find("--group-max-leased") != std::string::npos);
  CHECK(r.out.find("--group-rate") != std::string::npos);
  CHECK(r.out.find("--group-per") != std::string::npos);
  r = tool(d, {"enqueue", "--help"});
  CHECK(r.out.find("--group") != std::string::npos);
  CHECK(r.out.find("\"group\"") != std::string::npos);
  CHECK(tool(d, {"list", "--help"}).out.find("--group") != std::string::npos);
}

TEST_CASE("tool: results prints each job's state and result, nil for an unknown id, as JSON "
          "and on a terminal as a table") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  REQUIRE(tool(d, {"enqueue", "part-1", "--queue", "fan"}).status == 0);
  REQUIRE(tool(d, {"enqueue", "part-2", "--queue", "fan"}).status == 0);
  REQUIRE(tool(d, {"claim", "part-1", "worker-a", "30"}).out == "1\n");
  REQUIRE(tool(d, {"complete", "part-1", "worker-a", "1", "41 pages"}).status == 0);

  auto r = tool(d, {"results", "part-1", "part-2", "nope", "part-1"});  // not a terminal: JSON
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.size() == 3);  // the repeated id once
  CHECK(j["part-1"]["state"] == "done");
  CHECK(j["part-1"]["result"] == "41 pages");
  CHECK(j["part-2"]["state"] == "ready");
  CHECK(j["part-2"]["result"].is_null());
  CHECK(j["nope"].is_null());

  r = on_terminal(d, "results part-1 nope");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("ID") != std::string::npos);
  CHECK(std::regex_search(r.out, std::regex("part-1 +done +41 pages")));
  CHECK(std::regex_search(r.out, std::regex("nope +- +\\(no such job\\)")));

  std::vector<std::string> many{"results"};
  for (int i = 0; i <= 1000; ++i) many.push_back("id-" + std::to_string(i));
  r = tool(d, many);
  CHECK(r.status == 2);  // a usage error, before any request
  CHECK(r.out.find("at most 1000") != std::string::npos);
}

TEST_CASE("tool: top shows the queues and the leases that end soonest, refreshes, and quits "
          "on q") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  for (int i = 0; i < 4; ++i) {
    REQUIRE(tool(d, {"enqueue", "t-" + std::to_string(i), "--queue", "thumbs"}).status == 0);
  }
  REQUIRE(tool(d, {"claim", "t-0", "worker-a", "300"}).status == 0);
  REQUIRE(tool(d, {"claim", "t-1", "worker-b", "20"}).status == 0);
  REQUIRE(tool(d, {"claim", "t-2", "worker-c", "7"}).out == "1\n");
  const auto t0 = std::chrono::steady_clock::now();
  // Wide enough for every column (issue 30: fitted to 80 by default).
  auto r = on_terminal(d, "top --interval 0.2", "q", 1.0, "COLUMNS=200");
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(took < 4s);  // q ended it, not the feeder's end
  CHECK(r.out.find("\x1b[?1049h") != std::string::npos);  // the alternate screen, then back
  CHECK(r.out.find("\x1b[?1049l") != std::string::npos);
  // Refreshed: more than one frame was drawn in the second before q.
  std::size_t frames = 0;
  for (auto at = r.out.find("fenceq top "); at != std::string::npos;
       at = r.out.find("fenceq top ", at + 1)) {
    ++frames;
  }
  CHECK(frames >= 3);
  // The leases, soonest first: t-2 (7 s), t-1 (20 s), t-0 (300 s).
  const auto c = r.out.rfind("leases ending soonest (3 of 3 leased)");
  REQUIRE(c != std::string::npos);
  const auto p2 = r.out.find("t-2  thumbs  worker-c  1", c);
  const auto p1 = r.out.find("t-1  thumbs  worker-b", c);
  const auto p0 = r.out.find("t-0  thumbs  worker-a", c);
  CHECK(p2 != std::string::npos);
  CHECK(p2 < p1);
  CHECK(p1 < p0);
  CHECK(r.out.find("thumbs  1      0        3       0     0") != std::string::npos);
  CHECK(r.out.find("CLAIMED/S  DONE/S  FAILED/S  EXPIRED  REFUSED") != std::string::npos);

  // --once (and a pipe): one frame, no screen control.
  r = tool(d, {"top", "--once", "--interval", "0.1"});
  CHECK(r.status == 0);
  CHECK(r.out.find("\x1b[") == std::string::npos);
  CHECK(r.out.find("leases ending soonest (3 of 3 leased)") != std::string::npos);
}

// --- issue 30: what a new user ran into --------------------------------------

namespace {

struct SplitResult {
  int status = -1;
  std::string out, err;  // stdout; stderr
};

// The tool run against `d` (as tool() runs it), its stdout and stderr apart:
// stderr goes through the file `stderr` of `dir`.
SplitResult tool_split(const Daemon& d, const TempDir& dir, std::vector<std::string> args) {
  const std::string err_file = dir.file("stderr");
  std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$@\" 2>\"$FENCEQ_TEST_STDERR\"", "sh",
                                fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(),
                                "--timeout", "3"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = fenceq::test::run(argv, {"FENCEQ_TEST_STDERR=" + err_file});
  std::ifstream in(err_file);
  return {r.status, r.out,
          std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

// The lines of `text` wider than `columns` (UTF-8 characters counted, not
// bytes), each with its width.
std::vector<std::string> wider_than(const std::string& text, std::size_t columns) {
  std::vector<std::string> wide;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto width =
        static_cast<std::size_t>(std::count_if(line.begin(), line.end(), [](char ch) {
          return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
        }));
    if (width > columns) wide.push_back(std::to_string(width) + ": " + line);
  }
  return wide;
}

}  // namespace

TEST_CASE("tool: global options are taken after the subcommand too (issue 30)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  REQUIRE(tool(d, {"enqueue", "job-30"}).status == 0);
  // On a terminal `show` prints a table; --json after the subcommand keeps JSON.
  auto r = on_terminal(d, "show job-30 --json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["id"] == "job-30");
  // The endpoint and the timeout after the subcommand.
  r = fenceq::test::run(
      {fenceq::test::fenceq_tool_path(), "ping", "--endpoint", d.endpoint(), "-t", "3"});
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["clock"] == "server");
  r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "state", "job-30", "-e", d.endpoint(),
                         "--json"});
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["id"] == "job-30");
  // A subcommand's own option of the same spelling still comes first, and
  // what no one takes is still refused.
  r = tool(d, {"show", "job-30", "--bogus"});
  CHECK(r.status == 2);
  CHECK(r.out.find("--bogus") != std::string::npos);
}

TEST_CASE("tool: a mistyped subcommand is named with the nearest ones, exit 2 (issue 30)") {
  TempDir dir;
  Daemon d(dir);
  auto r = tool_split(d, dir, {"enqeue", "x"});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "fenceq: unknown subcommand 'enqeue'; did you mean 'enqueue'?\n");
  r = tool_split(d, dir, {"wrok"});  // two letters swapped
  CHECK(r.err == "fenceq: unknown subcommand 'wrok'; did you mean 'work'?\n");
  r = tool_split(d, dir, {"stat"});
  CHECK(r.status == 2);
  CHECK(r.err == "fenceq: unknown subcommand 'stat'; did you mean 'state' or 'stats'?\n");
  // Nothing close: no guess.
  r = tool_split(d, dir, {"xyzzy"});
  CHECK(r.status == 2);
  CHECK(r.err == "fenceq: unknown subcommand 'xyzzy' (fenceq --help lists them)\n");
  // No subcommand at all is CLI11's own message, as before.
  r = tool_split(d, dir, {});
  CHECK(r.status == 2);
  CHECK(r.err.find("subcommand is required") != std::string::npos);
  CHECK(tool(d, {"state", "x"}).status == 1);  // nothing was enqueued
}

TEST_CASE("tool: work with its command not after -- says where -- goes, and runs nothing "
          "(issue 30)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  REQUIRE(tool(d, {"enqueue", "j-1", "--queue", "q"}).status == 0);
  REQUIRE(tool(d, {"enqueue", "j-2", "--queue", "z"}).status == 0);
  const std::string line = "fenceq --endpoint " + d.endpoint() + " --timeout 3 work --queue q";
  // Before: CLI11 refused -q given twice, an error about --queue.
  auto r = tool_split(d, dir, {"work", "--queue", "q", "grep", "-q", "z"});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "fenceq: work: put the command after --, or its options are taken for "
                 "fenceq's own: " + line + " -- grep -q z\n");
  // Parsed without an error (-q z taken as the queue), it would have run grep
  // for queue z's jobs: refused the same way. Words with spaces are quoted.
  r = tool_split(d, dir, {"work", "sh", "-c", "echo a b"});
  CHECK(r.status == 2);
  CHECK(r.err == "fenceq: work: put the command after --, or its options are taken for "
                 "fenceq's own: fenceq --endpoint " + d.endpoint() +
                 " --timeout 3 work -- sh -c 'echo a b'\n");
  r = tool_split(d, dir, {"work", "grep", "-q", "z"});
  CHECK(r.status == 2);
  CHECK(r.err.find(" --timeout 3 work -- grep -q z\n") != std::string::npos);
  fenceq::Client c(d.endpoint());
  CHECK(fenceq::test::listed(c, "j-1").status == fenceq::JobStatus::ready);
  CHECK(fenceq::test::listed(c, "j-2").status == fenceq::JobStatus::ready);
  // After --, and a command without options, as before.
  r = tool_split(d, dir, {"work", "--queue", "q", "--exit-when-empty", "--wait", "0.2", "--",
                          "grep", "-q", "z"});
  CHECK(r.status == 0);
  CHECK(fenceq::test::listed(c, "j-1").attempts >= 1);  // grep ran (and failed: no input)
  r = tool_split(d, dir, {"work", "--queue", "z", "--exit-when-empty", "--wait", "0.2", "cat"});
  CHECK(r.status == 0);
  CHECK(fenceq::test::listed(c, "j-2").status == fenceq::JobStatus::done);
}

TEST_CASE("tool: claim of a job that does not exist says so on stderr with the argument order, "
          "stdout keeps null and exit 1 (issue 30)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  REQUIRE(tool(d, {"enqueue", "job-30"}).status == 0);
  auto r = tool_split(d, dir, {"claim", "worker-a", "job-30", "30"});
  CHECK(r.status == 1);
  CHECK(r.out == "null\n");
  CHECK(r.err == "fenceq: no job 'worker-a' (usage: fenceq claim ID OWNER TTL)\n");
  // A refused claim of a job that exists says nothing more.
  REQUIRE(tool(d, {"claim", "job-30", "worker-a", "30"}).out == "1\n");
  r = tool_split(d, dir, {"claim", "job-30", "worker-b", "30"});
  CHECK(r.status == 1);
  CHECK(r.out == "null\n");
  CHECK(r.err.empty());
}

TEST_CASE("tool: top fits 80 columns dropping the least important columns, keeps REFUSED, and "
          "marks paused and limited queues (issue 30)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  for (const char* q : {"thumbs", "mail", "reports"}) {
    REQUIRE(tool(d, {"enqueue", std::string(q) + "-1", "--queue", q}).status == 0);
  }
  REQUIRE(tool(d, {"enqueue", "thumbs-2", "--queue", "thumbs", "--delay", "600"}).status == 0);
  REQUIRE(tool(d, {"claim", "thumbs-1", "worker-with-a-long-owner-name-7", "30"}).out == "1\n");
  REQUIRE(tool(d, {"complete", "thumbs-1", "worker-z", "1", "stale"}).status == 1);  // refused
  REQUIRE(tool(d, {"pause", "mail"}).status == 0);
  REQUIRE(tool(d, {"limit", "thumbs", "--max-leased", "2"}).status == 0);
  const auto top = [&](const std::string& columns) {
    return fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "top",
                              "--once", "--interval", "0.1"},
                             {"COLUMNS=" + columns});
  };
  // Not a terminal and no $COLUMNS: 80 columns.
  for (const std::string columns : {"", "80"}) {
    auto r = top(columns);
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK(wider_than(r.out, 80) == std::vector<std::string>{});
    std::istringstream lines(r.out);
    std::string header, row, line;
    while (std::getline(lines, line)) {
      if (line.rfind("QUEUE ", 0) == 0) header = line;
      if (line.rfind("thumbs ", 0) == 0) row = line;
    }
    const auto refused = header.find("REFUSED");
    REQUIRE(refused != std::string::npos);
    CHECK(header.find("OLDEST READY") != std::string::npos);
    CHECK(header.find("FAILED/S") != std::string::npos);
    CHECK(header.find("CANCELLED") == std::string::npos);  // the first to go
    REQUIRE(row.size() > refused);
    CHECK(row.substr(refused, 2) == "1 ");  // the stale complete
    CHECK(row.rfind("thumbs [L] ", 0) == 0);
    CHECK(r.out.find("\nmail [P] ") != std::string::npos);
    CHECK(r.out.find("\nreports ") != std::string::npos);
    CHECK(r.out.find("[P] paused") != std::string::npos);  // the legend
    CHECK(r.out.find("[L] limited") != std::string::npos);
    CHECK(r.out.find("\x1b[") == std::string::npos);
  }
  // Wider, every column; narrower, still the queue and REFUSED.
  auto r = top("200");
  CHECK(r.out.find("CANCELLED  CLAIMED/S  DONE/S  FAILED/S  EXPIRED  REFUSED  OLDEST READY") !=
        std::string::npos);
  r = top("40");
  INFO(r.out);
  CHECK(wider_than(r.out, 40) == std::vector<std::string>{});
  CHECK(r.out.find("REFUSED") != std::string::npos);
  CHECK(r.out.find("thumbs [L] ") != std::string::npos);
}

TEST_CASE("tool: top on a terminal makes a REFUSED count that grew since the last refresh stand "
          "out (issue 30)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  REQUIRE(tool(d, {"enqueue", "t-1", "--queue", "thumbs"}).status == 0);
  REQUIRE(tool(d, {"claim", "t-1", "worker-a", "300"}).out == "1\n");
  REQUIRE(tool(d, {"complete", "t-1", "worker-z", "1", "stale"}).status == 1);
  // Refused before top started, none since: nothing stands out.
  auto r = on_terminal(d, "top --interval 0.2", "q", 1.0);
  CHECK(r.status == 0);
  CHECK(r.out.find("REFUSED") != std::string::npos);
  CHECK(r.out.find("\x1b[1;7m") == std::string::npos);
  // A stale write while top runs: its frame shows the new count standing out,
  // the frames after it no more.
  int late = -1;
  std::thread stale([&] {
    std::this_thread::sleep_for(700ms);
    late = tool(d, {"complete", "t-1", "worker-z", "1", "stale again"}).status;
  });
  r = on_terminal(d, "top --interval 0.2", "q", 2.0);
  stale.join();
  INFO(r.out);
  CHECK(late == 1);
  CHECK(r.status == 0);
  const auto strong = r.out.find("\x1b[1;7m2\x1b[0m");
  CHECK(strong != std::string::npos);
  const auto last_frame = r.out.rfind("fenceq top ");
  REQUIRE(last_frame != std::string::npos);
  CHECK(strong < last_frame);
  CHECK(r.out.find("\x1b[1;7m", last_frame) == std::string::npos);
}

TEST_CASE("tool: top says reconnecting while the daemon is gone and goes on when it is back "
          "(issue 30)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  REQUIRE(tool(d, {"enqueue", "t-1", "--queue", "thumbs"}).status == 0);
  fenceq::test::RunResult r;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread viewer([&] { r = on_terminal(d, "top --interval 0.2", "q", 7.0); });
  std::this_thread::sleep_for(1500ms);
  d.kill9();
  std::this_thread::sleep_for(2000ms);
  d.restart();
  viewer.join();
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO(r.out);
  CHECK(r.status == 0);  // q, not a timeout
  CHECK(took < 12s);
  const auto gone = r.out.find("reconnecting");
  REQUIRE(gone != std::string::npos);
  CHECK(r.out.find("thumbs") < gone);
  // Back: frames with the queue again after the last "reconnecting".
  const auto back = r.out.find("QUEUE ", r.out.rfind("reconnecting"));
  REQUIRE(back != std::string::npos);
  CHECK(r.out.find("\nthumbs ", back) != std::string::npos);
}
