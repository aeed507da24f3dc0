// Bulk actions by filter (C3.16): retry_many, cancel_many, and purge with
// a filter. Each acts on one page of at most `limit` jobs, inside the
// batch's transaction, and answers {count, more}.
//
// retry_many and cancel_many read their page with the store's `list`, a
// window of kBulkWindow rows at a time from a cursor, then retry or cancel
// each job that passes exactly as the single ops do (the same statements:
// groups take turns again, children settle, awaits are answered, parked
// claims look again). A page's work is bounded by the rows it examines, not
// by those it matches (docs/architecture.md, "Bounded work on the serving
// thread"; a `group` that matched nothing walked 200,000 jobs for one page,
// 233-345 ms): a window is read without the request's filters (the open
// states by the primary key, every queue and state; a dead or cancelled state
// through jobs_dead, which holds the queue's jobs of that state alone), the
// filters are applied here, and the page stops once kBulkBudget has passed,
// whether or not a row matched, with `more: true` and its cursor kept
// (bulk_resume_). Dead and cancelled jobs are read through jobs_dead
// (ListFilter::reaped) once the exhausted jobs are marked dead.
//
// A filter's pages make one pass: the walks (the open states by id, then
// each dead state) from where the last page stopped to their end, then
// round from the first id to where the last page before the round started
// (jobs that changed behind the cursor); `more: false` only once the pass
// is over. After the limit is reached the
// page looks on (within the budget) for a job that passes, so that `more`
// is exact on a page that ends the matching jobs.
// purge's page (purge_page) reads the same windows by the primary key and
// hands each to the store as a range (PurgeParams::upto), whose statement
// applies the filters within it alone: a filter that matched nothing walked
// every finished job in one statement (200,000 cancelled jobs: one request
// 274-382 ms on SQLite). Its `more` is exact within a window; a page that
// reaches its limit at a window's end answers `more: true` unless its pass
// is over (the next page then finds what is left, or nothing).
#include <algorithm>
#include <charconv>
#include <chrono>

#include "execution/executor.hpp"

namespace fenceq::daemon {

using protocol::Op;
namespace req = protocol::req;

namespace {

// The filter of a bulk action (purge with a filter, retry_many, cancel_many).
const req::BulkFilter& filter_of(const protocol::Request& r) {
  if (r.op == Op::purge) return r.as<req::Purge>();
  if (r.op == Op::retry_many) return r.as<req::RetryMany>();
  return r.as<req::CancelMany>();
}
// The queue retry_many or cancel_many acts on.
const std::string& queue_of(const protocol::Request& r) {
  return r.op == Op::retry_many ? r.as<req::RetryMany>().queue : r.as<req::CancelMany>().queue;
}

// How long one request's page may work before it answers `more`.
constexpr std::chrono::milliseconds kBulkBudget{2};
// Rows a page reads at a time, whether or not they pass its filters,
// between looks at the budget (a window of 256 rows: ~0.3 ms).
constexpr std::size_t kBulkWindow = 256;
// Windows a page reads before it looks at the budget: a filter over fewer
// rows than that answers in one page, with `more` exact, also where a
// window is a round trip (PostgreSQL: ~1 ms); a page is still bounded, by
// rows examined (at most ~2 ms of windows past these).
constexpr std::size_t kBulkMinWindows = 4;
// Jobs changed at a time, between looks at the budget: a retry of a job in
// a chain (its edges counted again) costs ~0.2 ms, so 64 of them made a
// page of 12-16 ms against its 2 ms (the scale sweep's retry_many).
constexpr std::size_t kBulkChunk = 16;
// Filters whose last page's stop is kept (Executor::bulk_resume_).
constexpr std::size_t kMaxResumes = 256;

// The states an action changes when the request names none.
std::vector<JobStatus> states_of(const protocol::Request& r) {
  if (const auto& status = filter_of(r).status) return {*status};
  if (r.op == Op::retry_many) return {JobStatus::dead, JobStatus::cancelled};
  return {JobStatus::ready, JobStatus::delayed, JobStatus::leased, JobStatus::blocked,
          JobStatus::suspended, JobStatus::dead};
}

int finished_bits(const std::optional<JobStatus>& s) {
  if (!s) return kFinishedAll;
  if (*s == JobStatus::done) return kFinishedDone;
  if (*s == JobStatus::dead) return kFinishedDead;
  if (*s == JobStatus::cancelled) return kFinishedCancelled;
  return 0;  // the codec lets no other state through
}

}  // namespace

std::string Executor::resume_key(const protocol::Request& r, JobStatus status) {
  const auto& f = filter_of(r);
  // purge's queue may be none (every queue): "" then, "=NAME" for a queue.
  const std::optional<std::string> queue =
      r.op == Op::purge ? r.as<req::Purge>().queue : std::optional<std::string>(queue_of(r));
  std::string key;
  for (auto part : {std::to_string(static_cast<int>(r.op)), std::to_string(static_cast<int>(status)),
                    queue ? "=" + *queue : std::string(), f.prefix,
                    f.group ? "=" + *f.group : std::string()}) {
    key += std::to_string(part.size()) + ":" + part;
  }
  return key;
}

void Executor::remember_resume(const std::string& key, std::string after) {
  if (after.empty()) {
    bulk_resume_.erase(key);
    return;
  }
  // Only where to start: forgetting one costs a walk from the first id.
  if (bulk_resume_.size() >= kMaxResumes && !bulk_resume_.contains(key)) bulk_resume_.clear();
  bulk_resume_[key] = std::move(after);
}

// The parts of a page (Executor::BulkPage holds them): named, not in an
// anonymous namespace, as a member of a class of the header's may not have
// a type of this file alone.
namespace bulk_detail {

// Where a filter's pass is (bulk_resume_, as text): the walk and the last
// id examined in it, where the pass started (the page that last started
// short of the round), and whether it has gone round to the first walk's
// first id, to end where it started.
struct Cursor {
  std::size_t walk = 0;
  std::string after;
  std::size_t start_walk = 0;
  std::string start_after;
  bool wrapped = false;

  std::string encode() const {
    return std::to_string(walk) + "," + std::to_string(start_walk) + "," + (wrapped ? "1" : "0") +
           "," + std::to_string(after.size()) + "," + after + start_after;
  }
  // A page that starts here starts a pass here, if none is under way.
  static Cursor decode(const std::string& text, std::size_t walks) {
    Cursor c;
    std::size_t at = 0;
    auto number = [&](std::size_t& out) {
      const auto comma = text.find(',', at);
      if (comma == std::string::npos) return false;
      const auto [p, ec] = std::from_chars(text.data() + at, text.data() + comma, out);
      at = comma + 1;
      return ec == std::errc() && p == text.data() + comma;
    };
    std::size_t wrapped = 0, size = 0;
    if (!number(c.walk) || !number(c.start_walk) || !number(wrapped) || !number(size) ||
        at + size > text.size() || c.walk > walks || c.start_walk > walks) {
      return Cursor{};  // from the first id: costs time, not jobs
    }
    c.wrapped = wrapped == 1;
    c.after = text.substr(at, size);
    c.start_after = text.substr(at + size);
    return c;
  }
};


// A walk of a page: the open states by the primary key (one walk for all),
// or one dead state through jobs_dead.
struct Walk {
  std::vector<JobStatus> states;
  std::optional<JobStatus> dead;  // read through jobs_dead
};

}  // namespace bulk_detail

using bulk_detail::Cursor;
using bulk_detail::Walk;

Executor::Outcome Executor::purge_page(const protocol::Request& request, double now) {
  const auto& r = request.as<req::Purge>();
  const auto start = SteadyClock::now();
  const std::string key = resume_key(request, r.status.value_or(JobStatus::done));
  Cursor c;  // one walk (0): every job by id, as bulk()'s passes go
  if (auto k = bulk_resume_.find(key); k != bulk_resume_.end()) c = Cursor::decode(k->second, 1);
  if (!c.wrapped) {
    c.start_walk = c.walk;
    c.start_after = c.after;
  }
  const auto group = r.group ? std::optional<std::string_view>(*r.group) : std::nullopt;
  std::vector<CallResult> results;
  std::int64_t count = 0;
  bool more = false;
  for (std::size_t windows = 0;; ++windows) {
    if (windows >= kBulkMinWindows && SteadyClock::now() - start >= kBulkBudget) {
      more = true;
      break;
    }
    if (c.wrapped && (c.walk > c.start_walk || (c.walk == c.start_walk && c.start_after.empty()))) {
      break;  // round to where the pass started: it is over
    }
    if (c.walk >= 1) {
      if (c.wrapped || (c.start_walk == 0 && c.start_after.empty())) break;  // the pass is over
      c.wrapped = true;
      c.walk = 0;
      c.after.clear();
      continue;
    }
    ListFilter f;
    f.limit = static_cast<std::int64_t>(kBulkWindow);
    f.after = c.after;
    f.prefix = r.prefix;  // a range of ids: it bounds the walk itself
    auto rows = store_.list(f, now);
    const bool end = rows.size() < kBulkWindow;
    // Gone round to where the pass started: the window ends there.
    const bool over = c.wrapped && c.start_walk == 0 &&
                      std::erase_if(rows, [&](const JobInfo& j) { return j.id > c.start_after; }) > 0;
    const bool last = over || (end && (c.wrapped || (c.start_walk == 0 && c.start_after.empty())));
    if (!rows.empty()) {
      PurgeParams p{r.queue, r.older_than, now, finished_bits(r.status), r.prefix, group,
                    r.limit - count};
      p.after = c.after;
      p.upto = rows.back().id;
      store_.run({Call{p, 0}}, results, false);
      count += results.at(0).number.value_or(0);
      if (count >= r.limit) {
        // This window again next time (what it purged is gone): more is
        // left when one more in it passes, or when the pass goes on.
        more = results.at(0).ok || !last;
        break;
      }
      c.after = rows.back().id;
    }
    if (over) break;
    if (end) {
      c.walk = 1;
      c.after.clear();
    }
  }
  remember_resume(key, more ? c.encode() : std::string());
  return protocol::Result{BulkOutcome{count, more}};
}

namespace {

std::vector<Walk> walks_of(const std::vector<JobStatus>& states) {
  std::vector<Walk> walks;
  for (auto s : states) {
    if (s == JobStatus::dead || s == JobStatus::cancelled) {
      walks.push_back({{s}, s});
    } else if (walks.empty() || walks.front().dead) {
      walks.insert(walks.begin(), Walk{{s}, std::nullopt});
    } else {
      walks.front().states.push_back(s);
    }
  }
  return walks;
}

bool passes(const protocol::Request& r, const Walk& w, const JobInfo& j) {
  if (j.queue != queue_of(r)) return false;
  if (const auto& group = filter_of(r).group; group && j.group != *group) return false;
  return std::find(w.states.begin(), w.states.end(), j.status) != w.states.end();
}

}  // namespace

struct Executor::BulkPage {
  std::vector<Walk> walks;
  Executor::SteadyClock::time_point start;
  Cursor c;
  Cursor kept;  // where acting stopped once the limit was reached
  std::int64_t count = 0, left = 0;
  bool more = false;
  bool looking = false;  // the limit is reached: only whether one more passes
  std::size_t windows = 0;
  std::vector<Call> calls;
  std::vector<CallResult> results;

  bool over_budget() const { return SteadyClock::now() - start >= kBulkBudget; }
  // Whether the pass is over (round to where it started, or at the end of
  // the walks when it started at the beginning); steps to the next walk
  // or round when the last one ended.
  bool pass_over() {
    for (;;) {
      if (c.wrapped && (c.walk > c.start_walk || (c.walk == c.start_walk && c.start_after.empty()))) {
        return true;
      }
      if (c.walk < walks.size()) return false;
      if (c.wrapped || (c.start_walk == 0 && c.start_after.empty())) return true;
      c.wrapped = true;
      c.walk = 0;
      c.after.clear();
    }
  }
};

bool Executor::bulk_window(const protocol::Request& r, double now, BulkPage& page) {
  auto& c = page.c;
  const auto& w = page.walks[c.walk];
  ListFilter f;
  f.limit = static_cast<std::int64_t>(kBulkWindow);
  f.after = c.after;
  f.prefix = filter_of(r).prefix;  // a range of ids: it bounds the walk itself
  if (w.dead) {
    f.queue = queue_of(r);
    f.status = *w.dead;
    f.reaped = true;  // above, when a dead job is asked for
  }
  const auto rows = store_.list(f, now);
  ++page.windows;
  page.calls.clear();
  auto act = [&] {
    if (page.calls.empty()) return;
    store_.run(page.calls, page.results, false);
    awaits_.note_writes(page.calls, page.results);  // cancelled jobs are finished
    page.count += std::count_if(page.results.begin(), page.results.end(),
                                [](const auto& x) { return x.ok; });
    page.calls.clear();
  };
  bool over = false;
  for (const auto& row : rows) {
    if (c.wrapped && c.walk == c.start_walk && row.id > c.start_after) {
      over = true;
      break;
    }
    c.after = row.id;
    if (!passes(r, w, row)) continue;
    if (page.looking) {
      page.more = true;
      break;
    }
    if (r.op == Op::retry_many) {
      page.calls.push_back({RetryParams{row.id, now}, 0});
    } else {
      page.calls.push_back({CancelParams{row.id, now}, 0});
    }
    if (--page.left == 0) {
      page.looking = true;
      page.kept = c;
    }
    // A chunk of jobs changed: the time is looked at (the cursor is past
    // them all).
    if (page.calls.size() == kBulkChunk) {
      act();
      if (!page.looking && page.over_budget()) {
        page.more = true;
        break;
      }
    }
  }
  act();
  if (page.more || over) return false;
  if (rows.size() < kBulkWindow) {  // the end of this walk
    ++c.walk;
    c.after.clear();
  }
  return true;
}

Executor::Outcome Executor::bulk(const protocol::Request& r, double now) {
  if (r.op == Op::purge) return purge_page(r, now);
  const auto states = states_of(r);
  BulkPage page;
  page.start = SteadyClock::now();
  page.left = filter_of(r).limit;
  if (std::find(states.begin(), states.end(), JobStatus::dead) != states.end()) {
    store_.reap_exhausted(now);
  }
  page.walks = walks_of(states);
  const std::string key = resume_key(r, states.front());
  if (auto k = bulk_resume_.find(key); k != bulk_resume_.end()) {
    page.c = Cursor::decode(k->second, page.walks.size());
  }
  // Until it goes round, a pass starts where its page starts (as before
  // windows: a page went on to the end, then round from the first id).
  if (!page.c.wrapped) {
    page.c.start_walk = page.c.walk;
    page.c.start_after = page.c.after;
  }
  for (;;) {
    if (page.windows >= kBulkMinWindows && page.over_budget()) {
      page.more = true;
      break;
    }
    if (page.pass_over() || !bulk_window(r, now, page)) break;
  }
  if (page.looking) page.c = page.kept;
  remember_resume(key, page.more ? page.c.encode() : std::string());
  return protocol::Result{BulkOutcome{page.count, page.more}};
}

}  // namespace fenceq::daemon
