// The fenceq command-line tool against a real daemon: output and exit status
// (0 success, 1 refusal, 2 error).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>

#include "daemon.hpp"
#include "fenceq_protocol/codec.hpp"

using fenceq::test::Daemon;
using fenceq::test::TempDir;
using namespace std::chrono_literals;

namespace {

fenceq::test::RunResult tool(const Daemon& d, std::vector<std::string> args) {
  std::vector<std::string> argv{fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(),
                                "--timeout", "3"};
  argv.insert(argv.end(), args.begin(), args.end());
  return fenceq::test::run(argv);
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
  CHECK(nobody.out.find("timeout") != std::string::npos);
}

TEST_CASE("tool: FENCEQ_ENDPOINT is the default endpoint") {
  TempDir dir;
  Daemon d(dir);
  auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "enqueue", "env-job"},
                             {"FENCEQ_ENDPOINT=" + d.endpoint()});
  CHECK(r.status == 0);
  CHECK(r.out == "true\n");
}

namespace {

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
  struct IgnorePipe {
    void (*old)(int) = ::signal(SIGPIPE, SIG_IGN);
    ~IgnorePipe() { ::signal(SIGPIPE, old); }
  } ignore_pipe;
  int in[2], out[2];
  REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  int to_child = in[1];
  std::size_t written = 0;
  if (input.empty() && !keep_open) {
    ::close(to_child);
    to_child = -1;
  }
  FedResult r;
  bool out_open = true;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({out[0], POLLIN, 0});
    if (to_child >= 0 && written < input.size()) fds.push_back({to_child, POLLOUT, 0});
    ::poll(fds.data(), fds.size(), 20);
    for (const auto& p : fds) {
      if (!p.revents) continue;
      if (p.fd == out[0]) {
        char buf[4096];
        ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n > 0) {
          r.out.append(buf, static_cast<std::size_t>(n));
        } else {
          out_open = false;
        }
      } else {
        ssize_t n = ::write(to_child, input.data() + written, input.size() - written);
        if (n > 0) written += static_cast<std::size_t>(n);
        if (n < 0 && errno != EAGAIN) written = input.size();
        if (written >= input.size() && !keep_open) {
          ::close(to_child);
          to_child = -1;
        }
      }
    }
    int status = 0;
    if (!out_open && ::waitpid(pid, &status, WNOHANG) == pid) {
      r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
  }
  if (!r.status) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  if (to_child >= 0) ::close(to_child);
  ::close(out[0]);
  return r;
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
  // The bounds themselves are taken (and then time out against nobody).
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"enqueue", "x", "--delay", "1000000000"}, {"claim", "x", "o", "1e9"}}) {
    std::vector<std::string> argv{fenceq::test::fenceq_tool_path(), "--endpoint", nobody,
                                  "--timeout", "0.2"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_fed(argv, "", false, 3s);
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK(r.out.find("timeout: no reply") != std::string::npos);
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
  CHECK(r.out.find("timeout: no reply") != std::string::npos);
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
