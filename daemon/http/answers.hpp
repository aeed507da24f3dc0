// The serving loop's replies to the HTTP listener's requests, as HTTP
// answers: Prometheus text, "ok", or the dashboard's JSON (a payload
// previewed, a page of jobs with its next cursor, the overview with its
// throughput history). The bridge thread's alone.
#pragma once

#include <deque>
#include <string>
#include <string_view>

#include "http/auth.hpp"
#include "http/pending.hpp"
#include "http/respond.hpp"

namespace fenceq::daemon::http {

class Answers {
 public:
  // `store` and `clock` are what the overview says the daemon runs with.
  // `auth`'s login counters go at the end of /metrics.
  Answers(std::string store, std::string clock, const Auth& auth)
      : store_(std::move(store)), clock_(std::move(clock)), auth_(auth) {}

  // Sets p's status, body and type from the wire reply `bytes` to p's
  // request. Throws (json, codec) on a reply it cannot shape.
  void answer(Pending& p, std::string_view bytes);

 private:
  void answer_text(Pending& p, std::string_view bytes) const;
  // Stats with the throughput history and the daemon's facts.
  json overview(json stats);

  // A sample of the counters summed over the queues, at a time of the steady clock.
  struct Sample {
    double t = 0;
    double claimed = 0, completed = 0, failed = 0, commits = 0;
  };
  std::deque<Sample> history_;
  std::string store_;
  std::string clock_;
  const Auth& auth_;
};

}  // namespace fenceq::daemon::http
