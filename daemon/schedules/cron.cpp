#include "schedules/cron.hpp"

#include <date/tz.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/logging.hpp"

namespace fenceq::daemon::cron {

namespace {

using Seconds = std::chrono::seconds;

constexpr std::size_t kMaxLength = 256;
constexpr std::size_t kMaxDigits = 3;  // every value fits in 2; a 3rd allows a leading zero

struct Field {
  const char* name;
  int lo, hi;
};
constexpr std::array<Field, 5> kFields{{
    {"minute", 0, 59},
    {"hour", 0, 23},
    {"day-of-month", 1, 31},
    {"month", 1, 12},
    {"day-of-week", 0, 7},
}};
constexpr int kMonthField = 3;
constexpr int kWeekdayField = 4;
constexpr std::array<std::string_view, 12> kMonthNames{"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<std::string_view, 7> kWeekdayNames{"SUN", "MON", "TUE", "WED",
                                                        "THU", "FRI", "SAT"};

// Ticks are searched over local days up to this far from t. Any expression
// that can match at all matches again within 12 years (next_after, cron.hpp);
// the 13th is to spare.
constexpr int kHorizonDays = 13 * 366;

// The years 1-9999: the date library's calendar holds more, but a time
// outside these is a caller's bug, not a schedule.
constexpr double kMinTime = -62135596800.0;  // 0001-01-01 00:00:00 UTC
constexpr double kMaxTime = 253402300799.0;  // 9999-12-31 23:59:59 UTC

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

bool equal_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (upper(a[i]) != upper(b[i])) return false;
  }
  return true;
}

// One field's text to its bit set (bit v for each value v it allows).
class FieldParser {
 public:
  FieldParser(int index, std::string_view text)
      : index_(index), field_(kFields[static_cast<std::size_t>(index)]), text_(text) {}

  std::uint64_t parse() {
    std::uint64_t bits = 0;
    std::size_t start = 0;
    while (true) {
      std::size_t comma = text_.find(',', start);
      std::string_view item = text_.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      if (item.empty()) {
        fail(start == 0                        ? "empty item before ','"
             : comma == std::string_view::npos ? "empty item after ','"
                                               : "empty item between ',,'");
      }
      bits |= parse_item(item);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return bits;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("cron field " + std::to_string(index_ + 1) + " (" + field_.name +
                                ") " + client_text(text_) + ": " + what);
  }

  std::string range_text() const {
    return std::to_string(field_.lo) + "-" + std::to_string(field_.hi);
  }

  // item = base ["/" step]; base = "*" | value ["-" value]
  std::uint64_t parse_item(std::string_view item) {
    std::size_t slash = item.find('/');
    std::string_view base = item.substr(0, slash);
    int step = 1;
    if (slash != std::string_view::npos) {
      std::string_view s = item.substr(slash + 1);
      if (s.empty()) fail("no step after '/'");
      step = number(s, "step ");
      if (step < 1) fail("step 0: a step is at least 1");
    }
    if (base.empty()) fail("no value before '/'");
    int lo, hi;
    if (base == "*") {
      lo = field_.lo;
      hi = field_.hi;
    } else if (std::size_t dash = base.find('-'); dash != std::string_view::npos) {
      std::string_view a = base.substr(0, dash), b = base.substr(dash + 1);
      if (a.empty()) fail("no value before '-'");
      if (b.empty()) fail("no value after '-'");
      lo = value(a);
      hi = value(b);
      if (lo > hi) {
        fail("range " + std::string(base) + " is backwards (" + std::to_string(lo) + " > " +
             std::to_string(hi) + ")");
      }
    } else {
      // N/S runs from N to the field's end, as in Vixie cron.
      lo = value(base);
      hi = slash == std::string_view::npos ? lo : field_.hi;
    }
    std::uint64_t bits = 0;
    for (int v = lo; v <= hi; v += step) bits |= std::uint64_t{1} << v;
    return bits;
  }

  // A step or a value as digits, at most kMaxDigits of them (so none overflows).
  int number(std::string_view s, const char* what) {
    for (char c : s) {
      if (!is_digit(c)) fail(what + client_text(s) + " is not a number");
    }
    if (s.size() > kMaxDigits) {
      fail(what + client_text(s) + " has more than " + std::to_string(kMaxDigits) + " digits");
    }
    int n = 0;
    for (char c : s) n = n * 10 + (c - '0');
    return n;
  }

  // A value of the field: a number in its range, or a name of a month or weekday.
  int value(std::string_view s) {
    const std::string_view* names = nullptr;
    std::size_t count = 0;
    if (index_ == kMonthField) {
      names = kMonthNames.data();
      count = kMonthNames.size();
    } else if (index_ == kWeekdayField) {
      names = kWeekdayNames.data();
      count = kWeekdayNames.size();
    }
    if (!s.empty() && is_alpha(s[0])) {
      if (!names) fail(client_text(s) + " is not a number");
      for (std::size_t i = 0; i < count; ++i) {
        if (equal_nocase(s, names[i])) return static_cast<int>(i) + (index_ == kMonthField);
      }
      fail("unknown name " + client_text(s) + " (" + std::string(names[0]) + "-" +
           std::string(names[count - 1]) + ")");
    }
    int v = number(s, "");
    if (v < field_.lo || v > field_.hi) {
      // The example in cron.hpp's message: the value alone when it is the field.
      fail((s == text_ ? std::string() : std::string(s) + " ") + "out of range " + range_text());
    }
    return v;
  }

  int index_;
  Field field_;
  std::string_view text_;
};

struct Macro {
  std::string_view name;
  std::string_view fields;
};
constexpr std::array<Macro, 7> kMacros{{
    {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
    {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},
    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
}};

std::vector<std::string_view> split_blanks(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_blank(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_blank(text[i])) ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

// The five fields' texts, from a macro or as written.
std::vector<std::string_view> fields_of(std::string_view text) {
  std::vector<std::string_view> words = split_blanks(text);
  if (words.empty()) throw std::invalid_argument("empty cron expression");
  if (words[0][0] == '@') {
    if (equal_nocase(words[0], "@reboot")) {
      throw std::invalid_argument(
          "cron macro '@reboot' is not supported: schedules tick in time, not at the daemon's "
          "start");
    }
    for (const Macro& m : kMacros) {
      if (!equal_nocase(words[0], m.name)) continue;
      if (words.size() > 1) {
        throw std::invalid_argument("cron macro " + client_text(words[0]) +
                                    " takes nothing after it: " + client_text(text));
      }
      return split_blanks(m.fields);
    }
    throw std::invalid_argument("unknown cron macro " + client_text(words[0]) +
                                " (@yearly @annually @monthly @weekly @daily @midnight @hourly)");
  }
  if (words.size() != 5) {
    throw std::invalid_argument("cron expression " + client_text(text) + ": " +
                                std::to_string(words.size()) +
                                " fields, expected 5 (minute hour day-of-month month "
                                "day-of-week)");
  }
  return words;
}

const date::time_zone* zone_of(std::string_view tz) {
  if (tz.empty() || tz == "UTC") return nullptr;  // no need of tzdata for UTC
  // /usr/share/zoneinfo/localtime is the host's own zone (/etc/localtime): a
  // schedule would mean another time on each host.
  if (tz != "localtime") {
    try {
      return date::locate_zone(std::string(tz));
    } catch (const std::exception&) {
      // The library says "X not found in timezone database"; ours names the field.
    }
  }
  throw UnknownZone("unknown time zone " + client_text(tz));
}

// The expression can match some day. Only when the day-of-week field is `*`
// and day-of-month restricted can it not: its days must exist in its months
// ("0 0 30 2 *"). A day-of-month field starting with `*` holds the 1st, and
// with day-of-week restricted either field matching (Vixie's OR) always finds
// days; and every date falls on every weekday in the 400-year cycle.
bool can_match(const Expr& e) {
  if (!e.dow_star || e.dom_star) return true;
  constexpr std::array<int, 13> kLongest{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  for (int m = 1; m <= 12; ++m) {
    if (!(e.months >> m & 1)) continue;
    std::uint32_t days_in_month = (std::uint32_t{2} << kLongest[static_cast<std::size_t>(m)]) - 2;
    if (e.days & days_in_month) return true;
  }
  return false;
}

bool day_matches(const Expr& e, date::local_days d) {
  date::year_month_day ymd{d};
  if (!(e.months >> static_cast<unsigned>(ymd.month()) & 1)) return false;
  bool dom = e.days >> static_cast<unsigned>(ymd.day()) & 1;
  bool dow = e.weekdays >> date::weekday{d}.c_encoding() & 1;
  // Vixie cron: a `*` field matches every day, so AND; both restricted: OR.
  return e.dom_star || e.dow_star ? dom && dow : dom || dow;
}

// The UTC instant (Unix seconds) of wall time `l` in the zone, or nullopt
// when a forward jump skipped it; a time that a backward jump repeats is its
// first occurrence (cron.hpp).
std::optional<std::int64_t> to_utc(const Expr& e, date::local_seconds l) {
  if (!e.zone) return l.time_since_epoch().count();
  date::local_info info = e.zone->get_info(l);
  if (info.result == date::local_info::nonexistent) return std::nullopt;
  // unique: `first` is the one; ambiguous: `first` is the earlier offset.
  return (l.time_since_epoch() - info.first.offset).count();
}

// The local day that instant `t` falls on.
date::local_days local_day(const Expr& e, double t) {
  date::sys_seconds s{Seconds{static_cast<std::int64_t>(std::floor(t))}};
  Seconds offset = e.zone ? e.zone->get_info(s).offset : Seconds{0};
  return date::floor<date::days>(date::local_seconds{s.time_since_epoch() + offset});
}

date::local_seconds at(date::local_days d, int hour, int minute) {
  return date::local_seconds{d} + std::chrono::hours{hour} + std::chrono::minutes{minute};
}

int lowest(std::uint64_t bits) { return std::countr_zero(bits); }
int highest(std::uint64_t bits) { return std::bit_width(bits) - 1; }

// Both searches take a day's ticks in wall-time order as their UTC order.
// That holds wherever a backward jump returns to a time after the forward
// jump before it skipped (every real DST rule): the first occurrences of
// increasing wall times are increasing instants. It lets an hour whose last
// (first) tick is on the wrong side of t be skipped with one conversion.

// The day's first tick after t.
std::optional<std::int64_t> first_after(const Expr& e, date::local_days d, double t) {
  int last_minute = highest(e.minutes);
  for (int h = 0; h < 24; ++h) {
    if (!(e.hours >> h & 1)) continue;
    auto last = to_utc(e, at(d, h, last_minute));
    if (last && static_cast<double>(*last) <= t) continue;
    for (int m = 0; m < 60; ++m) {
      if (!(e.minutes >> m & 1)) continue;
      auto u = to_utc(e, at(d, h, m));
      if (u && static_cast<double>(*u) > t) return u;
    }
  }
  return std::nullopt;
}

// The day's last tick at or before t.
std::optional<std::int64_t> last_until(const Expr& e, date::local_days d, double t) {
  int first_minute = lowest(e.minutes);
  for (int h = 23; h >= 0; --h) {
    if (!(e.hours >> h & 1)) continue;
    auto first = to_utc(e, at(d, h, first_minute));
    if (first && static_cast<double>(*first) > t) continue;
    for (int m = 59; m >= 0; --m) {
      if (!(e.minutes >> m & 1)) continue;
      auto u = to_utc(e, at(d, h, m));
      if (u && static_cast<double>(*u) <= t) return u;
    }
  }
  return std::nullopt;
}

}  // namespace

Expr parse(std::string_view text, std::string_view tz) {
  if (text.size() > kMaxLength) {
    throw std::invalid_argument("cron expression too long: " + std::to_string(text.size()) +
                                " bytes, at most " + std::to_string(kMaxLength));
  }
  std::vector<std::string_view> fields = fields_of(text);
  std::array<std::uint64_t, 5> bits{};
  for (int i = 0; i < 5; ++i) {
    bits[static_cast<std::size_t>(i)] = FieldParser(i, fields[static_cast<std::size_t>(i)]).parse();
  }
  Expr e;
  e.minutes = bits[0];
  e.hours = static_cast<std::uint32_t>(bits[1]);
  e.days = static_cast<std::uint32_t>(bits[2]);
  e.months = static_cast<std::uint16_t>(bits[3]);
  // 7 is Sunday too.
  e.weekdays = static_cast<std::uint8_t>((bits[4] | bits[4] >> 7) & 0x7f);
  e.dom_star = fields[2][0] == '*';
  e.dow_star = fields[4][0] == '*';
  e.zone = zone_of(tz);
  return e;
}

std::optional<double> next_after(const Expr& e, double t) {
  if (!(t >= kMinTime && t <= kMaxTime) || !can_match(e)) return std::nullopt;
  // From the day before t's: one more day is cheap, and safe in a zone whose
  // offset changes across midnight.
  date::local_days first = local_day(e, t) - date::days{1};
  for (int i = 0; i <= kHorizonDays; ++i) {
    date::local_days d = first + date::days{i};
    if (!day_matches(e, d)) continue;
    if (auto u = first_after(e, d, t)) return static_cast<double>(*u);
  }
  return std::nullopt;
}

std::optional<double> latest_in(const Expr& e, double not_before, double t) {
  if (std::isnan(t) || std::isnan(not_before) || t < kMinTime) return std::nullopt;
  t = std::min(t, kMaxTime);
  if (!(not_before < t) || !can_match(e)) return std::nullopt;
  // From the day after t's: where the offset drops across midnight, t's wall
  // time can be a repeat of the previous day's, and the next day's first
  // ticks (first occurrences) before t.
  date::local_days last = local_day(e, t) + date::days{1};
  // The day before not_before's is the earliest that can hold a tick after it.
  date::local_days stop = local_day(e, std::max(not_before, kMinTime)) - date::days{1};
  for (int i = 0; i <= kHorizonDays; ++i) {
    date::local_days d = last - date::days{i};
    if (d < stop) break;
    if (!day_matches(e, d)) continue;
    if (auto u = last_until(e, d, t)) {
      if (static_cast<double>(*u) > not_before) return static_cast<double>(*u);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace fenceq::daemon::cron
