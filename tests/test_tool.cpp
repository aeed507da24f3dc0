// The fenceq command-line tool against a real daemon: output and exit status
// (0 success, 1 refusal, 2 error).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "daemon.hpp"

using fenceq::test::Daemon;
using fenceq::test::TempDir;

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
