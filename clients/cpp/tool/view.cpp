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
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

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

// A table: a header row, then rows, each column as wide as its widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out, std::size_t width = 0) const {
    std::vector<std::size_t> w;
    for (const auto& r : rows_) {
      w.resize(std::max(w.size(), r.size()));
      for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    }
    for (const auto& r : rows_) {
      std::string line;
      for (std::size_t i = 0; i < r.size(); ++i) {
        std::string c = r[i];
        if (i + 1 < r.size()) c.resize(w[i], ' ');
        line += (i ? "  " : "") + c;
      }
      if (width && line.size() > width) line.resize(width);
      out << line << "\n";
    }
  }
  std::size_t size() const { return rows_.size() - 1; }

 private:
  std::vector<std::vector<std::string>> rows_;
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

void print_job(std::ostream& out, const JobDetail& d, double now) {
  const JobInfo& j = d.info;
  out << "id        " << cell(j.id, 200) << "\n"
      << "queue     " << cell(j.queue, 200) << "\n"
      << "state     " << protocol::status_name(j.status) << "\n"
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
}

void print_job_table(std::ostream& out, const std::vector<JobInfo>& jobs, double now) {
  Table t({"ID", "QUEUE", "STATE", "AGE", "PRI", "ATTEMPTS", "FENCE", "OWNER", "WHEN", "ERROR"});
  for (const auto& j : jobs) {
    t.add({cell(j.id), cell(j.queue, 20), std::string(protocol::status_name(j.status)),
           j.created > 0 ? span(now - j.created) : "-", std::to_string(j.priority), attempts_text(j.attempts, j.max_attempts),
           std::to_string(j.fence), j.owner ? cell(*j.owner, 24) : "-", when_text(j, now),
           j.error ? cell(*j.error, 48) : ""});
  }
  t.print(out);
  if (t.size() == 0) out << "(no jobs)\n";
}

void print_stats(std::ostream& out, const Stats& st) {
  Table t({"QUEUE", "READY", "DELAYED", "LEASED", "DONE", "DEAD", "CANCELLED", "OLDEST READY"});
  for (const auto& q : st.queues) {
    t.add({cell(q.queue, 30), std::to_string(q.ready), std::to_string(q.delayed),
           std::to_string(q.leased), std::to_string(q.done), std::to_string(q.dead),
           std::to_string(q.cancelled), q.ready > 0 ? span(q.oldest_ready_age) : "-"});
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

// --- fenceq top ---------------------------------------------------------------

namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

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
  static std::size_t width() {
    winsize ws{};
    if (::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 100;
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

void draw(std::ostream& out, const Stats& st, const Sample& prev, const Sample& cur,
          const std::vector<JobInfo>& leases, std::size_t leased_scanned, long shown,
          const std::string& endpoint, std::size_t width) {
  const double dt = cur.at - prev.at;
  out << "fenceq top  " << cell(endpoint, 60) << "  up " << span(st.uptime) << "  "
      << "waiting claims " << st.waiting_claims << "  (q quits)\n\n";
  // Rates from the daemon's counters between two refreshes (they survive a
  // purge, unlike the counts by state).
  Table t({"QUEUE", "READY", "DELAYED", "LEASED", "DONE", "DEAD", "CANCELLED", "CLAIMED/S",
           "DONE/S", "FAILED/S", "EXPIRED", "REFUSED", "OLDEST READY"});
  for (const auto& [name, q] : cur.queues) {
    std::string claimed = "-", completed = "-", failed = "-";
    auto p = prev.queues.find(name);
    if (dt > 0 && p != prev.queues.end()) {
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
    t.add({cell(name, 30), std::to_string(q.ready), std::to_string(q.delayed),
           std::to_string(q.leased), std::to_string(q.done), std::to_string(q.dead),
           std::to_string(q.cancelled), claimed, completed, failed, std::to_string(q.totals.expired),
           std::to_string(refused_sum(q.totals)), q.ready > 0 ? span(q.oldest_ready_age) : "-"});
  }
  t.print(out, width);
  if (t.size() == 0) out << "(no queues)\n";
  out << "\nstale writes refused since start: renew " << st.renew.refused << "  complete "
      << st.complete.refused << "  release " << st.release.refused << "  fail "
      << st.fail.refused << "\n\n";
  const double now = cur.at;
  out << "leases ending soonest (" << leases.size() << " of " << leased_scanned
      << (leased_scanned >= 10000 ? "+" : "") << " leased):\n";
  Table l({"JOB", "QUEUE", "OWNER", "FENCE", "ATTEMPTS", "LEASE ENDS"});
  for (const auto& j : leases) {
    l.add({cell(j.id), cell(j.queue, 20), j.owner ? cell(*j.owner, 30) : "-",
           std::to_string(j.fence), attempts_text(j.attempts, j.max_attempts),
           relative_time(j.until, now)});
  }
  if (l.size() > 0) l.print(out, width);
  (void)shown;
}

Sample sample_of(const Stats& st) {
  Sample s;
  s.at = epoch_now();
  for (const auto& q : st.queues) s.queues[q.queue] = q;
  return s;
}

}  // namespace

int run_top(Client& client, const TopOptions& o) {
  const bool live = !o.once && ::isatty(1);
  Sample prev;
  if (!live) {
    // One frame: rates over `interval`, from two samples.
    prev = sample_of(client.stats());
    ::usleep(static_cast<useconds_t>(std::clamp(o.interval, 0.0, 10.0) * 1e6));
    const Stats st = client.stats();
    std::size_t scanned = 0;
    auto leases = soonest_leases(client, o.leases, scanned);
    draw(std::cout, st, prev, sample_of(st), leases, scanned, o.leases, client.endpoint(), 0);
    return 0;
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  Screen screen;
  prev = sample_of(client.stats());
  Sample first = prev;
  for (;;) {
    const Stats st = client.stats();
    Sample cur = sample_of(st);
    std::size_t scanned = 0;
    auto leases = soonest_leases(client, o.leases, scanned);
    std::ostringstream frame;
    draw(frame, st, prev.at == cur.at ? first : prev, cur, leases, scanned, o.leases,
         client.endpoint(), Screen::width());
    std::string text = frame.str();
    // Each line cleared to its end, so a shorter frame leaves nothing behind.
    std::string screen_text = "\x1b[H";
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) screen_text += line + "\x1b[K\n";
    screen_text += "\x1b[J";
    std::cout << screen_text << std::flush;
    prev = cur;
    if (quit_within(o.interval)) break;
  }
  return 0;
}

}  // namespace fenceq::tool
