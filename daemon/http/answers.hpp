// The serving loop's replies to the HTTP listener's requests, as HTTP
// answers: Prometheus text, "ok", or the dashboard's JSON (a payload
// previewed, a page of jobs with its next cursor, the overview with its
// throughput history). The bridge thread's alone.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

#include "http/auth.hpp"
#include "http/pending.hpp"
#include "http/respond.hpp"
#include "execution/throughput.hpp"

namespace fenceq::daemon::http {

// The dashboard's throughput history: samples of the daemon's
// counters (Throughput) taken every kSampleEvery from the start, whether or
// not a dashboard is open, the last kKept of them (five minutes): a first
// visit shows the recent past, in a few kilobytes at most.
class History {
 public:
  static constexpr double kSampleEvery = 2.0;  // seconds
  static constexpr std::size_t kKept = 151;    // 150 rates: 5 minutes

  // The counters at a time of the steady clock, in seconds.
  struct Sample {
    double t = 0;
    double claimed = 0, completed = 0, failed = 0, commits = 0;
  };
  // Whether a sample is due at `now`: none yet, or the last kSampleEvery old.
  bool due(double now) const { return samples_.empty() || now - samples_.back().t >= kSampleEvery; }
  // Keeps `s`, the oldest sample going past kKept.
  void add(const Sample& s);
  // The rates (per second) between consecutive samples, oldest first, each
  // [{"ago": seconds before `now`, "claimed", "completed", "failed", "commits"}].
  json rates(double now) const;
  std::size_t size() const { return samples_.size(); }

 private:
  std::deque<Sample> samples_;
};

class Answers {
 public:
  // `store` and `clock` are what the overview says the daemon runs with.
  // `auth`'s login counters go at the end of /metrics. `throughput` is
  // sampled for the overview's history (it must outlive this).
  Answers(std::string store, std::string clock, const Auth& auth, const Throughput& throughput)
      : store_(std::move(store)), clock_(std::move(clock)), auth_(auth), throughput_(throughput) {}

  // Sets p's status, body and type from the wire reply `bytes` to p's
  // request. Throws (json, codec) on a reply it cannot shape.
  void answer(Pending& p, std::string_view bytes);
  // Samples the counters into the history when a sample is due (the bridge
  // calls it at least every 200 ms).
  void sample();

 private:
  void answer_text(Pending& p, std::string_view bytes) const;
  // Stats with the throughput history and the daemon's facts.
  json overview(json stats);

  History history_;
  std::string store_;
  std::string clock_;
  const Auth& auth_;
  const Throughput& throughput_;
};

}  // namespace fenceq::daemon::http
