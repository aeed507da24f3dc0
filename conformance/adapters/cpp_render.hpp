// The C++ adapter's two translations (conformance/README.md): the
// client's typed answers back into the wire form of each op's result, and
// the adapter JSON of payloads and job states into the client's types.
#pragma once

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fenceq::conformance {

using json = nlohmann::json;

// The client cannot make the call as asked (no parameter for a field, a
// value it has no way to send); nothing was sent. Answered `unsupported`.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --- adapter JSON into the client's types (each throws Unsupported) ---
// A payload: a str, {"$bin": hex}, or null (none).
std::optional<Payload> payload_of(const json& j);
// A job state's wire name (ready, delayed, leased, done, dead, cancelled, blocked).
JobStatus status_of(const json& j);

// --- the client's answers in the wire form (bin as {"$bin": hex}) ---
json render(const ServerInfo& v);
json render(const JobState& v);
json render(const std::optional<Payload>& v);
json render(const ClaimedJob& v);
json render(const CompletedAndNext& v);
json render(const CompletedManyAndNext& v);
json render(const Enqueued& v);  // {id, created} when keyed, else the bool
json render(const JobInfo& v);
json render(const JobDetail& v);
json render(const JobResults& v);
json render(const BulkOutcome& v);
json render(const Schedule& v);
json render(const Stats& v);

// A vector of answers, an optional one (null when empty), or a plain value.
template <typename T>
json render(const std::vector<T>& v) {
  json out = json::array();
  for (const auto& x : v) out.push_back(render(x));
  return out;
}
inline json render(const std::vector<bool>& v) {
  json out = json::array();
  for (bool b : v) out.push_back(b);
  return out;
}
template <typename T>
json render(const std::optional<T>& v) {
  return v ? render(*v) : json(nullptr);
}
inline json render(bool v) { return v; }
inline json render(std::int64_t v) { return v; }
inline json render(const std::string& v) { return v; }

}  // namespace fenceq::conformance
