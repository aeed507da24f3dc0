// The bridge between the HTTP thread and the serving loop. The HTTP thread
// never touches the store: each request that needs the daemon becomes a wire
// request sent over an inproc socket by the bridge's own thread, and its
// connection is suspended until the reply comes (at most kRequestTimeout), so
// one slow request holds no other.
//
// /metrics is answered from the last scrape's text while it is less than
// kMetricsFresh old, and while a scrape is on its way the other /metrics
// requests wait for its answer instead of sending their own: a flood of
// scrapes costs the serving loop at most one count a second, and holds no
// connection longer than a count takes.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/answers.hpp"
#include "http/pending.hpp"

namespace fenceq::daemon::http {

class Bridge {
 public:
  // Creates the wake-up eventfd; throws std::runtime_error when it cannot.
  Bridge(zmq::context_t& ctx, Answers answers);
  ~Bridge();  // stop()s, closes the eventfd
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  // Starts the bridge thread, which connects to kHttpInproc.
  void run();
  // Answers every request it holds (503, "fenceqd is stopping" for text) and
  // joins the thread; afterwards start() answers 503 at once.
  void stop();

  // (HTTP thread) Sends `r` to the serving loop and suspends `c` until its
  // answer, which handle() finds in *state when MHD calls it again (resumed).
  MHD_Result start(MHD_Connection* c, void** state, protocol::Request r, Kind kind);
  // (HTTP thread) The answer of a resumed connection, taken out of *state;
  // null when the connection has not been through start().
  static std::shared_ptr<Pending> resumed(void** state);
  // (HTTP thread) MHD's end of a request: frees what start() left in *state.
  static void completed(void** state);

 private:
  void loop();
  void send_outbox(zmq::socket_t& s);
  void receive(zmq::socket_t& s);
  // Answers what is past its deadline, or everything when stopping.
  bool expire();
  void finish(const std::shared_ptr<Pending>& p);  // with mutex_ held
  // (with mutex_ held) The scrape in flight answered (or given up): its
  // followers get the same answer, and a good one is kept for the next.
  void settle_metrics(const Pending& scrape);

  zmq::context_t& ctx_;
  Answers answers_;  // the bridge thread's alone
  std::mutex mutex_;
  std::deque<std::shared_ptr<Pending>> outbox_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Pending>> waiting_;
  std::uint64_t next_rid_ = 1;
  struct Metrics {
    std::string body;  // the last good scrape's answer, at `at`
    std::chrono::steady_clock::time_point at{};
    std::shared_ptr<Pending> scrape;                  // in flight, if any
    std::vector<std::shared_ptr<Pending>> followers;  // waiting for it
  } metrics_;  // under mutex_
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace fenceq::daemon::http
