// One HTTP request waiting for the serving loop's answer (bridge.hpp), and
// what that answer becomes (answers.hpp).
#pragma once

#include <microhttpd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "fenceq_protocol/codec.hpp"

namespace fenceq::daemon::http {

// What an answer from the serving loop becomes.
enum class Kind {
  metrics,   // Prometheus text
  health,    // 200 "ok", or 503 and why
  api,       // JSON {"ok": true, "result": ...} or {"ok": false, "error": ...}
  overview,  // api, with the throughput history and the daemon's facts
  jobs,      // api, a page of `list` with the next page's cursor
};

// Whether a kind of answer is the dashboard's (JSON, with its headers).
inline bool is_dashboard(Kind kind) { return kind != Kind::metrics && kind != Kind::health; }

struct Pending {
  MHD_Connection* connection = nullptr;
  std::uint64_t rid = 0;
  protocol::Request request;
  Kind kind = Kind::metrics;
  std::chrono::steady_clock::time_point deadline;
  bool done = false;
  // The answer; until one comes, what a request that gets none is told.
  int status = 503;
  std::string body = "fenceqd did not answer\n";
  std::string type = "text/plain; charset=utf-8";
};

}  // namespace fenceq::daemon::http
