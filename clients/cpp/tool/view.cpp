#include "view.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

#include "fenceq_protocol/codec.hpp"
#include "work.hpp"

namespace fenceq::tool {

namespace {

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A duration as a person reads it: "12 s", "4 min", "3 h", "2 d".
std::string span(double seconds) {
  const double s = std::fabs(seconds);
  std::ostringstream out;
  if (s < 10) {
    out << std::fixed << std::setprecision(1) << s << " s";
  } else if (s < 120) {
    out << std::llround(s) << " s";
  } else if (s < 2 * 3600) {
    out << std::llround(s / 60) << " min";
  } else if (s < 2 * 86400) {
    out << std::llround(s / 3600) << " h";
  } else {
    out << std::llround(s / 86400) << " d";
  }
  return out.str();
}

// Text for a table cell or a field: one line (a command's output ends with a
// newline: that one is dropped), control characters escaped, at most `max`
// characters (then "...").
std::string cell(const std::string& text, std::size_t max = 40) {
  std::string_view v = text;
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  std::string t = escape_for_log(v);
  if (t.size() > max) t = t.substr(0, max - 3) + "...";
  return t;
}

// `text` cut to at most `max` bytes (then ending in "..."), never inside a
// UTF-8 character.
std::string cut(std::string text, std::size_t max) {
  if (text.size() <= max) return text;
  std::size_t keep = max >= 3 ? max - 3 : 0;
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  text.resize(keep);
  return max >= 3 ? text + "..." : text;
}

// A table: a header row, then rows, each column as wide as its widest cell.
// fit() hides the columns a narrow terminal has no room for; a cell marked
// with stand_out() prints in bold reverse video when the output is styled.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : shown_(header.size(), true) {
    rows_.push_back(std::move(header));
    strong_.emplace_back();
  }
  void add(std::vector<std::string> row) {
    rows_.push_back(std::move(row));
    strong_.emplace_back();
  }
  // The last row's cell under `column` (its header) stands out.
  void stand_out(std::string_view column) {
    for (std::size_t i = 0; i < rows_[0].size(); ++i) {
      if (rows_[0][i] == column) strong_.back().push_back(i);
    }
  }
  // Hides columns, in the order of `drop_first` (their headers), until a line
  // is at most `width` bytes long (0: any width). Columns not named stay.
  void fit(std::size_t width, const std::vector<std::string_view>& drop_first) {
    for (auto column : drop_first) {
      if (width == 0 || line_width() <= width) return;
      for (std::size_t i = 0; i < rows_[0].size(); ++i) {
        if (rows_[0][i] == column) shown_[i] = false;
      }
    }
  }
  // The longest line print() would write, before any cut.
  std::size_t line_width() const {
    std::size_t total = 0, columns = 0;
    for (std::size_t w : widths()) {
      if (w == kHidden) continue;
      total += w;
      ++columns;
    }
    return total + (columns > 1 ? 2 * (columns - 1) : 0);
  }
  // Lines longer than `width` (0: any) are cut there; `styled`: the cells
  // that stand out are wrapped in escape sequences (not counted in the width).
  void print(std::ostream& out, std::size_t width = 0, bool styled = false) const {
    const auto w = widths();
    std::size_t last = 0;  // the last column shown: not padded
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (w[i] != kHidden) last = i;
    }
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      const auto& row = rows_[r];
      std::string line;
      std::size_t plain = 0;  // bytes of `line` that show
      bool first = true;
      for (std::size_t i = 0; i < row.size() && (width == 0 || plain < width); ++i) {
        if (w[i] == kHidden) continue;
        std::string c = (first ? "" : "  ") + row[i];
        first = false;
        if (i < last) c.resize(c.size() + w[i] - row[i].size(), ' ');
        if (width && plain + c.size() > width) c.resize(width - plain);
        plain += c.size();
        const auto& strong = strong_[r];
        if (styled && std::find(strong.begin(), strong.end(), i) != strong.end()) {
          // The padding before the cell stays plain: only the figure stands out.
          const std::size_t lead = std::min<std::size_t>(c.size(), i == 0 ? 0 : 2);
          const std::size_t body = std::min(c.size() - lead, row[i].size());
          line += c.substr(0, lead) + "\x1b[1;7m" + c.substr(lead, body) + "\x1b[0m" +
                  c.substr(lead + body);
        } else {
          line += c;
        }
      }
      out << line << "\n";
    }
  }
  std::size_t size() const { return rows_.size() - 1; }

 private:
  static constexpr std::size_t kHidden = static_cast<std::size_t>(-1);
  // Each column's width, kHidden for a hidden one.
  std::vector<std::size_t> widths() const {
    std::vector<std::size_t> w;
    for (const auto& r : rows_) {
      w.resize(std::max(w.size(), r.size()));
      for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    }
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (i < shown_.size() && !shown_[i]) w[i] = kHidden;
    }
    return w;
  }
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> shown_;
  std::vector<std::vector<std::size_t>> strong_;  // per row, the columns that stand out
};

std::uint64_t refused_sum(const QueueTotals& t) {
  return t.refused.renew + t.refused.complete + t.refused.release + t.refused.fail;
}

std::string attempts_text(std::int64_t attempts, std::int64_t max) {
  // Appended: `"/" + std::string&&` makes GCC 12 warn of a memcpy overlap
  // that cannot happen (-Wrestrict, GCC bug 105329).
  std::string text = std::to_string(attempts);
  if (max > 0) {
    text += '/';
    text += std::to_string(max);
  }
  return text;
}

// What a job's lease or delay means now, in words.
std::string when_text(const JobInfo& j, double now) {
  switch (j.status) {
    case JobStatus::leased: return "lease ends " + relative_time(j.until, now);
    case JobStatus::delayed: return "claimable " + relative_time(j.not_before, now);
    default: return "";
  }
}

}  // namespace

std::string relative_time(double at, double now) {
  const double d = at - now;
  if (std::fabs(d) < 0.05) return "now";
  return d > 0 ? "in " + span(d) : span(d) + " ago";
}

void print_state(std::ostream& out, const JobState& s, double now) {
  out << "id      " << cell(s.id, 200) << "\n"
      << "done    " << (s.done ? "yes" : "no") << "\n"
      << "fence   " << s.fence << "\n"
      << "owner   " << (s.owner ? cell(*s.owner, 200) : "-") << "\n";
  if (s.owner && !s.done) out << "lease   ends " << relative_time(s.until, now) << "\n";
  if (s.progress) out << "progress " << cell(*s.progress, 2000) << "\n";
  out << "result  " << (s.result ? cell(*s.result, 2000) : "-") << "\n";
}

// A payload as a person reads it: text as it is, binary as hex; long ones
// cut, with their size.
std::string payload_text(const std::optional<Payload>& p) {
  if (!p) return "-";
  constexpr std::size_t kShown = 2000;
  std::string shown;
  if (p->binary) {
    static const char* kHex = "0123456789abcdef";
    for (std::size_t i = 0; i < p->bytes.size() && shown.size() < kShown; ++i) {
      const auto b = static_cast<unsigned char>(p->bytes[i]);
      if (i) shown += ' ';
      shown += kHex[b >> 4];
      shown += kHex[b & 15];
    }
    shown = "(binary) " + shown;
  } else {
    shown = cell(p->bytes, kShown);
  }
  if (p->bytes.size() > (p->binary ? kShown / 3 : kShown)) {
    shown += " (" + std::to_string(p->bytes.size()) + " bytes in all)";
  }
  return shown;
}

namespace {
// A line of linked jobs (`show`'s after and blocks): at most 20, each with
// its state when `linked` has it.
std::string linked_text(const std::vector<std::string>& ids, const JobResults& linked) {
  constexpr std::size_t kShown = 20;
  std::string text;
  for (std::size_t i = 0; i < ids.size() && i < kShown; ++i) {
    if (i > 0) text += ", ";
    text += cell(ids[i], 60);
    const auto it = std::find_if(linked.begin(), linked.end(),
                                 [&](const auto& r) { return r.first == ids[i]; });
    if (it == linked.end()) continue;
    text += it->second ? " (" + std::string(protocol::status_name(it->second->status)) + ")"
                       : " (purged)";
  }
  if (ids.size() > kShown) text += " and " + std::to_string(ids.size() - kShown) + " more";
  return text;
}
}  // namespace

void print_job(std::ostream& out, const JobDetail& d, double now, const JobResults& linked) {
  const JobInfo& j = d.info;
  out << "id        " << cell(j.id, 200) << "\n"
      << "queue     " << cell(j.queue, 200) << "\n"
      << "state     " << protocol::status_name(j.status) << "\n"
      << (j.key ? "key       " + cell(*j.key, 200) + "\n" : std::string())
      << (j.group ? "group     " + cell(*j.group, 200) + "\n" : std::string())
      << "enqueued  " << (j.created > 0 ? relative_time(j.created, now) : "-") << "\n"
      << "priority  " << j.priority << "\n"
      << "attempts  " << attempts_text(j.attempts, j.max_attempts)
      << (j.max_attempts > 0 ? "" : " (no limit)") << "\n"
      << "fence     " << j.fence << "\n"
      << "owner     " << (j.owner ? cell(*j.owner, 200) : "-") << "\n";
  if (j.status == JobStatus::leased) {
    out << "lease     ends " << relative_time(j.until, now) << "\n";
  }
  if (j.status == JobStatus::delayed || j.status == JobStatus::ready) {
    out << "claimable " << (j.not_before > now ? relative_time(j.not_before, now) : "now") << "\n";
  }
  if (j.progress) out << "progress  " << cell(*j.progress, 2000) << "\n";
  out << "error     " << (j.error ? cell(*j.error, 2000) : "-") << "\n";
  out << "result    " << (d.result ? cell(*d.result, 2000) : "-") << "\n";
  out << "payload   " << payload_text(d.payload) << "\n";
  // Issue 32: the jobs it waits (or waited) for, and those of its children
  // still blocked.
  if (!d.after.empty()) out << "after     " << linked_text(d.after, linked) << "\n";
  if (!d.blocked_children.empty()) {
    out << "children  " << linked_text(d.blocked_children, linked) << "\n";
  }
  // Issue 33: its headers, one a line.
  for (const auto& [k, v] : d.headers) out << "header    " << cell(k + "=" + v, 2000) << "\n";
  // C3.22: its saved steps, one a line: the name, then the value as a
  // payload is shown ("-": nil).
  for (const auto& [name, value] : d.steps) {
    out << "step      " << cell(name, 200) << " = " << payload_text(value) << "\n";
  }
  // C3.23: the signal that woke it since its last suspend (its value as a
  // payload is shown, "-": nil), and while it is suspended, when its wait
  // ends and what then.
  if (d.signalled) out << "signal    " << payload_text(d.signal) << "\n";
  if (d.suspend_timeout) {
    out << "suspended waits for a signal; times out " << relative_time(*d.suspend_timeout, now)
        << (d.suspend_fails ? " (then dead)" : " (then ready again)") << "\n";
  }
}

void print_job_table(std::ostream& out, const std::vector<JobInfo>& jobs, double now) {
  // A GROUP column only when a job shown has a group (issue 31): the table
  // of jobs without one is as it was.
  const bool groups =
      std::any_of(jobs.begin(), jobs.end(), [](const JobInfo& j) { return j.group.has_value(); });
  std::vector<std::string> header{"ID", "QUEUE", "STATE", "AGE", "PRI", "ATTEMPTS",
                                  "FENCE", "OWNER", "WHEN", "ERROR"};
  if (groups) header.insert(header.begin() + 2, "GROUP");
  Table t(std::move(header));
  for (const auto& j : jobs) {
    std::vector<std::string> row{cell(j.id),
                                 cell(j.queue, 20),
                                 std::string(protocol::status_name(j.status)),
                                 j.created > 0 ? span(now - j.created) : "-",
                                 std::to_string(j.priority),
                                 attempts_text(j.attempts, j.max_attempts),
                                 std::to_string(j.fence),
                                 j.owner ? cell(*j.owner, 24) : "-",
                                 when_text(j, now),
                                 j.error ? cell(*j.error, 48) : ""};
    if (groups) row.insert(row.begin() + 2, j.group ? cell(*j.group, 20) : "-");
    t.add(std::move(row));
  }
  t.print(out);
  if (t.size() == 0) out << "(no jobs)\n";
}

void print_stats(std::ostream& out, const Stats& st) {
  // A BLOCKED column (issue 32) only when a queue has blocked jobs, a
  // SUSPENDED one (C3.23) only when a queue has suspended jobs: the table of
  // queues without is as it was.
  const bool blocked = std::any_of(st.queues.begin(), st.queues.end(),
                                   [](const QueueStats& q) { return q.blocked > 0; });
  const bool suspended = std::any_of(st.queues.begin(), st.queues.end(),
                                     [](const QueueStats& q) { return q.suspended > 0; });
  std::vector<std::string> header{"QUEUE", "READY", "DELAYED", "LEASED", "DONE", "DEAD",
                                  "CANCELLED", "OLDEST READY"};
  if (suspended) header.insert(header.begin() + 4, "SUSPENDED");
  if (blocked) header.insert(header.begin() + 3, "BLOCKED");
  Table t(std::move(header));
  for (const auto& q : st.queues) {
    std::vector<std::string> row{cell(q.queue, 30), std::to_string(q.ready),
                                 std::to_string(q.delayed), std::to_string(q.leased),
                                 std::to_string(q.done), std::to_string(q.dead),
                                 std::to_string(q.cancelled),
                                 q.ready > 0 ? span(q.oldest_ready_age) : "-"};
    if (suspended) row.insert(row.begin() + 4, std::to_string(q.suspended));
    if (blocked) row.insert(row.begin() + 3, std::to_string(q.blocked));
    t.add(std::move(row));
  }
  t.print(out);
  if (t.size() == 0) out << "(no queues)\n";
  // The queues whose settings hold claims back (queue_config).
  Table l({"LIMITS", "PAUSED", "MAX LEASED", "RATE"});
  for (const auto& q : st.queues) {
    if (!q.config) continue;
    const auto& k = *q.config;
    std::ostringstream rate;
    if (k.rate > 0) rate << k.rate << " per " << span(k.per);
    l.add({cell(q.queue, 30), k.paused ? "yes" : "no",
           k.max_leased > 0 ? std::to_string(k.max_leased) : "-", k.rate > 0 ? rate.str() : "-"});
  }
  if (l.size() > 0) {
    out << "\n";
    l.print(out);
  }
  // The queues with group settings or groups waiting (issue 31): how many
  // groups have a ready job, and each group's limits.
  Table g({"GROUPS", "WAITING", "MAX LEASED EACH", "RATE EACH"});
  for (const auto& q : st.queues) {
    const bool limited = q.config && q.config->group_limited();
    if (!limited && q.groups_waiting == 0) continue;
    std::string max = "-", rate = "-";
    if (limited && q.config->group_max_leased > 0) max = std::to_string(q.config->group_max_leased);
    if (limited && q.config->group_rate > 0) {
      rate = std::to_string(q.config->group_rate) + " per " + span(q.config->group_per);
    }
    g.add({cell(q.queue, 30), std::to_string(q.groups_waiting), max, rate});
  }
  if (g.size() > 0) {
    out << "\n";
    g.print(out);
  }
  // The groups with limits of their own (C3.25), the first 100 a queue.
  Table o({"GROUP LIMITS", "GROUP", "MAX LEASED", "RATE"});
  for (const auto& q : st.queues) {
    const double queue_per = q.config ? q.config->group_per : 1;
    for (const auto& [group, k] : q.group_config) {
      std::string max = "(queue's)", rate = "(queue's)";
      if (k.max_leased) max = *k.max_leased > 0 ? std::to_string(*k.max_leased) : "none";
      if (k.rate) {
        rate = *k.rate > 0 ? std::to_string(*k.rate) + " per " + span(k.per.value_or(queue_per))
                           : "none";
      } else if (k.per) {
        rate = "(queue's) per " + span(*k.per);
      }
      o.add({cell(q.queue, 30), cell(group, 30), max, rate});
    }
  }
  if (o.size() > 0) {
    out << "\n";
    o.print(out);
  }
  // What happened in each queue since the daemon started.
  Table c({"SINCE START", "CLAIMED", "COMPLETED", "FAILED", "RETRIED", "DEAD", "EXPIRED",
           "REFUSED: RENEW", "COMPLETE", "RELEASE", "FAIL"});
  for (const auto& q : st.queues) {
    const auto& x = q.totals;
    c.add({cell(q.queue, 30), std::to_string(x.claimed), std::to_string(x.completed),
           std::to_string(x.failed), std::to_string(x.retried), std::to_string(x.dead),
           std::to_string(x.expired), std::to_string(x.refused.renew),
           std::to_string(x.refused.complete), std::to_string(x.refused.release),
           std::to_string(x.refused.fail)});
  }
  if (c.size() > 0) {
    out << "\n";
    c.print(out);
  }
  out << "\nrequests " << st.requests << ", commits " << st.commits << " (mean batch "
      << std::fixed << std::setprecision(1) << st.mean_batch << "), waiting claims "
      << st.waiting_claims << ", up " << span(st.uptime) << "\n";
  out << "fenced writes refused (stale or lost leases): renew " << st.renew.refused
      << ", complete " << st.complete.refused << ", release " << st.release.refused
      << ", fail " << st.fail.refused << "\n";
}

void print_schedules(std::ostream& out, const std::vector<Schedule>& list, double now) {
  Table t({"SCHEDULE", "CRON", "ZONE", "QUEUE", "NEXT", "LAST"});
  for (const auto& s : list) {
    t.add({cell(s.name, 30), cell(s.cron, 30), s.tz, cell(s.queue, 20),
           s.next > 0 ? relative_time(s.next, now) : "never",
           s.last ? relative_time(*s.last, now) : "-"});
  }
  t.print(out);
  if (t.size() == 0) out << "(no schedules)\n";
}

void print_results(std::ostream& out, const JobResults& results) {
  Table t({"ID", "STATE", "RESULT"});
  for (const auto& [id, o] : results) {
    if (!o) {
      t.add({cell(id, 40), "-", "(no such job)"});
      continue;
    }
    t.add({cell(id, 40), std::string(protocol::status_name(o->status)),
           o->result ? cell(*o->result, 60) : "-"});
  }
  t.print(out);
}

// --- fenceq top ---------------------------------------------------------------

namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

// The width top fits its lines to: the terminal's (read again at each
// refresh, so that a resize is followed), else $COLUMNS, else 80.
std::size_t frame_width() {
  winsize ws{};
  if (::isatty(1) && ::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    char* end = nullptr;
    const long n = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && n > 0 && n <= 10000) return static_cast<std::size_t>(n);
  }
  return 80;
}

// The terminal in single-key mode, on the alternate screen, cursor hidden, for
// the life of the object; restored as it was.
class Screen {
 public:
  Screen() {
    if (::tcgetattr(0, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      keys_ = ::tcsetattr(0, TCSANOW, &raw) == 0;
    }
    std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;
  }
  ~Screen() {
    std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
    if (keys_) ::tcsetattr(0, TCSANOW, &saved_);
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  // Draws `frame` over the last one, each line cleared to its end, so that a
  // shorter frame leaves nothing behind.
  static void show(const std::string& frame) {
    std::string text = "\x1b[H";
    std::istringstream lines(frame);
    for (std::string line; std::getline(lines, line);) text += line + "\x1b[K\n";
    text += "\x1b[J";
    std::cout << text << std::flush;
  }

 private:
  termios saved_{};
  bool keys_ = false;
};

// Waits up to `seconds` for a key on stdin; true when it was q or Q (or the
// input ended, or a signal asked to stop).
bool quit_within(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if (g_stop) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{0, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) {
      char c = 0;
      const ssize_t got = ::read(0, &c, 1);
      if (got == 0) {
        ::usleep(static_cast<useconds_t>(std::max<long long>(0, left.count()) * 1000));
        return false;  // stdin closed: refresh on, only signals stop it
      }
      if (got == 1 && (c == 'q' || c == 'Q')) return true;
    }
  }
}

// The leases that end soonest (of at most 10 pages of leased jobs).
std::vector<JobInfo> soonest_leases(Client& client, long count, std::size_t& scanned) {
  std::vector<JobInfo> leased;
  ListOptions lo;
  lo.status = JobStatus::leased;
  lo.limit = 1000;
  for (int page = 0; page < 10; ++page) {
    auto rows = client.list(lo);
    for (auto& r : rows) leased.push_back(std::move(r));
    if (rows.size() < static_cast<std::size_t>(lo.limit)) break;
    lo.after = leased.back().id;
  }
  scanned = leased.size();
  std::sort(leased.begin(), leased.end(),
            [](const JobInfo& a, const JobInfo& b) { return a.until < b.until; });
  if (leased.size() > static_cast<std::size_t>(count)) leased.resize(count);
  return leased;
}

struct Sample {
  double at = 0;
  std::map<std::string, QueueStats> queues;
};

// One frame's figures: the daemon's, and the samples its rates come from.
struct Frame {
  Stats st;
  Sample prev, cur;  // prev empty: no rates yet
  std::vector<JobInfo> leases;
  std::size_t leased_scanned = 0;
};

// How a frame is drawn: fitted to `width`; `live`: refreshed until q;
// `styled`: on a terminal, where a cell may stand out.
struct Look {
  std::size_t width = 80;
  bool live = false;
  bool styled = false;
};

// `line` cut to the frame's width.
std::string fitted(const std::string& line, const Look& look) { return cut(line, look.width); }

// The first line: endpoint, uptime, waiting claims; the endpoint is cut when
// the line would not fit.
std::string title(const std::string& endpoint, const std::string& rest, const Look& look) {
  const std::string head = "fenceq top  ";
  const std::string tail = rest + (look.live ? "  (q quits)" : "");
  const std::size_t room =
      look.width > head.size() + tail.size() ? look.width - head.size() - tail.size() : 0;
  return fitted(head + cell(endpoint, std::clamp<std::size_t>(room, 16, 60)) + tail, look);
}

// The queue table's columns that a narrow terminal drops, least important
// first. QUEUE and REFUSED (the stale writes fencing refused: what fenceq is
// for) always stay; then what a person acts on: the backlog and its age, the
// jobs leased, the throughput and failures.
const std::vector<std::string_view> kQueueDropOrder = {
    "CANCELLED", "DONE",   "DELAYED",      "CLAIMED/S", "DEAD", "EXPIRED",
    "FAILED/S",  "DONE/S", "OLDEST READY", "LEASED",    "READY"};
// The leases table's: the job, when its lease ends, its owner and fence stay longest.
const std::vector<std::string_view> kLeaseDropOrder = {"ATTEMPTS", "QUEUE", "FENCE", "OWNER"};

bool paused(const QueueStats& q) { return q.config && q.config->paused; }
bool limited(const QueueStats& q) {
  return q.config && (q.config->max_leased > 0 || q.config->rate > 0 || q.config->group_limited());
}

// A queue's marker next to its name: [P] paused, [L] limited (max leased or
// rate, of the queue or of each group), [PL] both; the legend under the
// table says so.
std::string marker(const QueueStats& q) {
  if (!paused(q) && !limited(q)) return "";
  return std::string(" [") + (paused(q) ? "P" : "") + (limited(q) ? "L" : "") + "]";
}

// The queue table, each name cut to `name_max` bytes (before its marker).
Table queue_table(const Frame& f, std::size_t name_max) {
  const double dt = f.cur.at - f.prev.at;
  // Rates from the daemon's counters between two refreshes (they survive a
  // purge, unlike the counts by state).
  Table t({"QUEUE", "READY", "DELAYED", "LEASED", "DONE", "DEAD", "CANCELLED", "CLAIMED/S",
           "DONE/S", "FAILED/S", "EXPIRED", "REFUSED", "OLDEST READY"});
  for (const auto& [name, q] : f.cur.queues) {
    std::string claimed = "-", completed = "-", failed = "-";
    auto p = f.prev.queues.find(name);
    const bool before = dt > 0 && p != f.prev.queues.end();
    if (before) {
      auto rate = [&](std::uint64_t now_n, std::uint64_t then_n) {
        std::ostringstream r;
        r << std::fixed << std::setprecision(1)
          << (now_n > then_n ? static_cast<double>(now_n - then_n) / dt : 0.0);
        return r.str();
      };
      const auto& a = q.totals;
      const auto& b = p->second.totals;
      claimed = rate(a.claimed, b.claimed);
      completed = rate(a.completed, b.completed);
      failed = rate(a.failed, b.failed);
    }
    t.add({cell(name, name_max) + marker(q), std::to_string(q.ready), std::to_string(q.delayed),
           std::to_string(q.leased), std::to_string(q.done), std::to_string(q.dead),
           std::to_string(q.cancelled), claimed, completed, failed,
           std::to_string(q.totals.expired), std::to_string(refused_sum(q.totals)),
           q.ready > 0 ? span(q.oldest_ready_age) : "-"});
    // Stale writes refused since the last refresh: a worker is writing
    // under a lease it no longer holds.
    if (before && refused_sum(q.totals) > refused_sum(p->second.totals)) t.stand_out("REFUSED");
  }
  return t;
}

void draw(std::ostream& out, const Frame& f, const std::string& endpoint, const Look& look) {
  const Stats& st = f.st;
  out << title(endpoint,
               "  up " + span(st.uptime) + "  waiting claims " + std::to_string(st.waiting_claims),
               look)
      << "\n\n";
  // The widest name that fits once every column that may go has gone (never
  // less than 8 bytes, nor more than 30).
  constexpr std::size_t kNameMax = 30, kNameMin = 8;
  Table t = queue_table(f, kNameMax);
  t.fit(look.width, kQueueDropOrder);
  if (t.line_width() > look.width) {
    std::size_t widest = 0;
    for (const auto& [name, q] : f.cur.queues) {
      widest = std::max(widest, cell(name, kNameMax).size());
    }
    const std::size_t excess = t.line_width() - look.width;
    t = queue_table(f, std::max(kNameMin, widest > excess ? widest - excess : 0));
    t.fit(look.width, kQueueDropOrder);
  }
  t.print(out, look.width, look.styled);
  if (t.size() == 0) out << "(no queues)\n";
  const auto any = [&](bool (*of)(const QueueStats&)) {
    return std::any_of(f.cur.queues.begin(), f.cur.queues.end(),
                       [&](const auto& named) { return of(named.second); });
  };
  const bool any_paused = any(paused), any_limited = any(limited);
  if (any_paused || any_limited) {
    out << fitted(std::string(any_paused ? "[P] paused (fenceq resume QUEUE)" : "") +
                      (any_paused && any_limited ? "  " : "") +
                      (any_limited ? "[L] limited: max leased or rate (fenceq stats)" : ""),
                  look)
        << "\n";
  }
  out << "\n"
      << fitted("stale writes refused since start: renew " + std::to_string(st.renew.refused) +
                    "  complete " + std::to_string(st.complete.refused) + "  release " +
                    std::to_string(st.release.refused) + "  fail " +
                    std::to_string(st.fail.refused),
                look)
      << "\n\n";
  const double now = f.cur.at;
  out << "leases ending soonest (" << f.leases.size() << " of " << f.leased_scanned
      << (f.leased_scanned >= 10000 ? "+" : "") << " leased):\n";
  Table l({"JOB", "QUEUE", "OWNER", "FENCE", "ATTEMPTS", "LEASE ENDS"});
  for (const auto& j : f.leases) {
    l.add({cell(j.id), cell(j.queue, 20), j.owner ? cell(*j.owner, 30) : "-",
           std::to_string(j.fence), attempts_text(j.attempts, j.max_attempts),
           relative_time(j.until, now)});
  }
  l.fit(look.width, kLeaseDropOrder);
  if (l.size() > 0) l.print(out, look.width);
}

// The frame shown while the daemon does not answer.
void draw_reconnecting(std::ostream& out, const std::string& endpoint, double since,
                       const std::string& why, const Look& look) {
  out << title(endpoint, "", look) << "\n\n"
      << fitted("reconnecting… no answer for " + span(since), look) << "\n"
      << fitted(escape_for_log(why), look) << "\n";
}

Sample sample_of(const Stats& st) {
  Sample s;
  s.at = epoch_now();
  for (const auto& q : st.queues) s.queues[q.queue] = q;
  return s;
}

// A frame's figures now, over `prev`.
Frame frame_of(Client& client, Sample prev, long leases) {
  Frame f;
  f.st = client.stats();
  f.prev = std::move(prev);
  f.cur = sample_of(f.st);
  f.leases = soonest_leases(client, leases, f.leased_scanned);
  return f;
}

}  // namespace

int run_top(Client& client, const TopOptions& o) {
  const bool live = !o.once && ::isatty(1);
  const auto look = [&] { return Look{frame_width(), live, ::isatty(1) == 1}; };
  if (!live) {
    // One frame: rates over `interval`, from two samples.
    Sample prev = sample_of(client.stats());
    ::usleep(static_cast<useconds_t>(std::clamp(o.interval, 0.0, 10.0) * 1e6));
    draw(std::cout, frame_of(client, std::move(prev), o.leases), client.endpoint(), look());
    return 0;
  }
  // A client of its own whose calls give up after a refresh (at least 1 s,
  // at most --timeout): a daemon gone shows as "reconnecting…" within about
  // that, not after the whole --timeout, and a fresh one after each failure
  // sends nothing left over from the old one.
  const auto call_timeout = std::min(
      o.call_timeout, std::max(std::chrono::milliseconds(1000),
                               std::chrono::milliseconds(std::llround(o.interval * 1000))));
  std::optional<Client> own;
  const auto connect = [&]() -> Client& {
    if (!o.connect) return client;
    own.emplace(o.connect(call_timeout));
    return *own;
  };
  Client* c = &connect();
  // The first sample is taken before the screen: a daemon that is not there
  // at all (a wrong endpoint) is an error, not a wait.
  Sample prev = sample_of(c->stats());
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  Screen screen;
  std::optional<std::chrono::steady_clock::time_point> lost_since;
  for (;;) {
    std::ostringstream frame;
    try {
      Frame f = frame_of(*c, std::move(prev), o.leases);
      draw(frame, f, client.endpoint(), look());
      prev = std::move(f.cur);
      lost_since.reset();
    } catch (const Error& e) {
      const auto now = std::chrono::steady_clock::now();
      if (!lost_since) lost_since = now;
      draw_reconnecting(frame, client.endpoint(),
                        std::chrono::duration<double>(now - *lost_since).count(), e.what(), look());
      // The daemon may come back restarted, its counters from zero: rates
      // start again from its first answer.
      prev = Sample{};
      c = &connect();
    }
    Screen::show(frame.str());
    if (quit_within(o.interval)) break;
  }
  return 0;
}

}  // namespace fenceq::tool
