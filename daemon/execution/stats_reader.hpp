// Counts the jobs of every queue by state on a thread of its own, over a
// read-only connection of its own. A count reads every job (300,000 jobs:
// about 200 ms), and the serving thread must not stop for it: `stats`,
// `/metrics` and systemd's STATUS= ask here, and their replies leave when the
// count is done, while claims go on being served.
//
// Counts are coalesced: one count answers every request made before it
// started, so any number of scrapers cost one count at a time; and a count
// starts at most as often as the last one took (at least kMinGap apart), so
// counting takes at most half of one core however often it is asked.
//
// Pages of `list` are read here too, one read transaction each,
// before any count that is due: a page can read every job (a state no job
// is in: 1,000,000 jobs, about 1.3 s), and the dashboard and `fenceq list`
// must not hold up the group commit either.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fenceq_protocol/codec.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon {

// The store's filter of a `list` request (views into `r`).
ListFilter list_filter(const protocol::req::List& r);
// A `list` page with each error cut to its share of the reply's budget.
protocol::JobList bounded_page(protocol::JobList jobs);

class StatsReader {
 public:
  // `reader`: a second connection to the job store, used by this thread
  // alone and only to read.
  explicit StatsReader(std::unique_ptr<StoreReads> reader);
  ~StatsReader();  // stops the thread (a count under way finishes first)
  StatsReader(const StatsReader&) = delete;
  StatsReader& operator=(const StatsReader&) = delete;

  // Asks for a count that sees everything committed so far, at store time
  // `now`. Returns its number: the count with that number or a later one
  // answers it.
  std::uint64_t request(double now);

  // Readable (an eventfd) when a count has finished since the last latest().
  int fd() const { return event_fd_; }

  struct Count {
    std::uint64_t number = 0;  // 0: none finished yet
    std::vector<protocol::QueueStats> queues;
    std::string error;  // the count failed (the store's message); queues empty
  };
  // The last finished count; resets fd().
  Count latest();

  // Asks for a page of `list` that sees everything committed so far; its
  // number comes back with its reply in take_lists(). The reply is encoded
  // here too (a page can be megabytes), for `rid`.
  std::uint64_t request_list(const protocol::req::List& list, double now,
                             const std::optional<protocol::Rid>& rid);
  struct Listed {
    std::uint64_t number = 0;
    std::string reply;  // the page, or unavailable when the read failed
  };
  // The pages read since the last call; fd() is readable when there are some.
  std::vector<Listed> take_lists();

 private:
  void loop();

  static constexpr std::chrono::milliseconds kMinGap{100};

  std::unique_ptr<StoreReads> reader_;
  int event_fd_ = -1;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::uint64_t requested_ = 0;  // the number of the last request
  double now_ = 0;               // its time
  Count done_;
  struct ListAsked {
    std::uint64_t number;
    protocol::req::List request;
    double now;
    std::optional<protocol::Rid> rid;
  };
  std::uint64_t lists_asked_ = 0;
  std::vector<ListAsked> lists_;  // to read, in order
  std::vector<Listed> listed_;    // read, for take_lists()
  void read_lists(std::vector<ListAsked> asked);
  std::thread thread_;
};

}  // namespace fenceq::daemon
