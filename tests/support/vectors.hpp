// Test support: the shared protocol vectors (protocol/vectors/*.json) and the
// comparison rule their README defines.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace fenceq::test {

struct VectorStep {
  std::string name;
  std::string request;                // payload bytes
  nlohmann::json reply;               // expected, readable
  std::optional<std::string> reply_bytes;  // exact bytes, when determined
  bool subset = false;
  // An error step whose request is well-formed: refused when applied (no such
  // job, a cron expression the daemon cannot read), so it decodes without error.
  bool decodes = false;
};

struct VectorSuite {
  std::string name;
  std::string clock;  // "client" or "server"
  std::vector<VectorStep> steps;
};

std::vector<VectorSuite> load_vector_suites();

// Empty when `actual` (reply bytes) satisfies the step; otherwise why not.
std::string vector_mismatch(const VectorStep& step, const std::string& actual);

// `j` as the msgpack bytes of a request (for raw requests a client would not send).
inline std::string pack(const nlohmann::json& j) {
  auto v = nlohmann::json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

class Daemon;
// `request` sent as is on a new connection to `d`; its reply as JSON, null
// when none came within 5 s.
nlohmann::json raw(const Daemon& d, const nlohmann::json& request);
// The error code of a reply raw() gave; "" when it is not an error reply.
std::string error_code(const nlohmann::json& reply);

}  // namespace fenceq::test
