// Cron expressions for periodic jobs: parsing, and the ticks they give in a
// time zone. The daemon keeps an Expr per schedule and asks for the next tick
// (next_after) or for the latest one it missed while down (latest_in), so a
// schedule enqueues at most one job for a gap, however long.
//
// Grammar (copied into the protocol docs; keep the two in step):
//
//   An expression is at most 256 bytes. It is either a macro or exactly 5
//   fields, separated by runs of spaces and tabs (leading and trailing ones
//   are ignored):
//
//     field  1 minute        0-59
//            2 hour          0-23
//            3 day-of-month  1-31
//            4 month         1-12, or JAN-DEC
//            5 day-of-week   0-7, or SUN-SAT (0 and 7 are both Sunday)
//
//   Names are the three-letter English ones, in any case (jan, Jan, JAN), and
//   stand wherever a number may in their field (MON-FRI, JAN,JUL), but not
//   as a step. SUN is 0, so a range ending on Sunday is written 5-7 (not
//   FRI-SUN, which is backwards).
//
//   A field is a comma-separated list of one or more items, with no spaces:
//     *        every value of the field (for day-of-week 0-7)
//     N        the value N
//     N-M      N to M inclusive; N <= M
//     X/S      every S-th value of X from its start, X being *, N-M or N;
//              N/S means N-max/S (max: 59, 23, 31, 12, 7); 1 <= S <= 999
//   A number has 1 to 3 digits. An empty item (a leading, trailing or
//   doubled comma), anything else in a field, a value out of its field's
//   range and a step of 0 are errors.
//
//   Macros, in any case, alone on the line:
//     @yearly, @annually   0 0 1 1 *
//     @monthly             0 0 1 * *
//     @weekly              0 0 * * 0
//     @daily, @midnight    0 0 * * *
//     @hourly              0 * * * *
//   @reboot is refused: the daemon schedules ticks in time, not at its start.
//
//   A minute matches when its minute, hour and month are in their fields and
//   its day matches. The day matches as in Vixie cron: when the day-of-month
//   and day-of-week fields both are restricted (neither starts with `*`), a
//   day matches when EITHER field matches it ("0 0 13 * FRI": every 13th and
//   every Friday); otherwise when both do. `*` matches every day, and a field
//   like `*/2` counts as starting with `*`: "0 0 */2 * MON" is the
//   odd-numbered days that are Mondays.
//
// Ticks and time zones:
//
//   Fields are matched against the wall time of the expression's zone: an
//   IANA name such as "Europe/Berlin", as spelled in the system's tzdata
//   (case matters; links like "US/Eastern" work; "localtime", the host's own
//   zone, is refused); "" and "UTC" are UTC. There are no
//   seconds: a tick is the UTC instant at which that zone's wall clock shows
//   a matching minute at second 0.
//
//   Where a forward DST jump skips local times, those times do not exist and
//   do not fire: on 2026-03-29 in Europe/Berlin 02:00-02:59 are skipped, so
//   "30 2 * * *" has no tick that day (and is not moved to 03:30).
//   Where a backward jump repeats local times, each fires once, at its FIRST
//   occurrence (still on summer time): on 2026-10-25 in Europe/Berlin
//   "30 2 * * *" fires at 00:30 UTC (02:30 CEST), not again at 01:30 UTC
//   (02:30 CET), and "0 * * * *" has 24 ticks that day, not 25: none at
//   01:00 UTC (the second 02:00), so that hour's gap is two hours long.
//
//   The zone's rules are the system's (tzdata, /usr/share/zoneinfo, read by
//   Howard Hinnant's date library). That library takes only the files'
//   listed transitions, which Debian's tzdata lists up to 2037: from 2038 on
//   a zone keeps its last offset all year (Europe/Berlin stays on CET).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace date {
class time_zone;
}

namespace fenceq::daemon::cron {

// A parsed expression: a bit per allowed value of each field, and the zone.
// Small and trivially copyable (the daemon caches many); the zone points into
// the date library's database, which lives as long as the process.
struct Expr {
  std::uint64_t minutes = 0;              // bit m: minute m, 0-59
  std::uint32_t hours = 0;                // bit h: hour h, 0-23
  std::uint32_t days = 0;                 // bit d: day of month d, 1-31
  std::uint16_t months = 0;               // bit m: month m, 1-12
  std::uint8_t weekdays = 0;              // bit w: weekday w, 0 (Sunday)-6; a 7 is stored as 0
  bool dom_star = false;                  // the day-of-month field starts with `*`
  bool dow_star = false;                  // the day-of-week field starts with `*`
  const date::time_zone* zone = nullptr;  // nullptr: UTC

  friend bool operator==(const Expr&, const Expr&) = default;
};

// Parses `text` in zone `tz` (an IANA name like "Europe/Berlin"; "" or "UTC"
// = UTC). Throws std::invalid_argument with a one-line message naming the
// field and what is wrong, e.g. "cron field 2 (hour) '25': out of range
// 0-23", or "unknown time zone 'Mars/Base'" (then UnknownZone, so a caller
// can name the zone's field).
Expr parse(std::string_view text, std::string_view tz);

// parse()'s `tz` is not a zone of the time zone database.
struct UnknownZone : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The first tick strictly after `t` (Unix seconds, UTC, may be fractional),
// or nullopt when there is none: the expression can never match ("0 0 30 2
// *"), or t is NaN or outside the years 1-9999. The search runs over local
// days up to 13 years ahead, enough for every expression that can match: the
// rarest recur within 12 years (a day of the month that must also be a given
// weekday, "0 0 */31 2 MON": Feb 1 on a Monday) or 8 (Feb 29: 2096, 2104).
std::optional<double> next_after(const Expr& e, double t);

// The latest tick in (not_before, t]: at or before `t` and strictly after
// `not_before`; nullopt when there is none. Searches back from t, so a long
// gap costs no more than the distance to its latest tick (at most the 13
// years above), however far back not_before is. Used to enqueue only the
// latest missed tick.
std::optional<double> latest_in(const Expr& e, double not_before, double t);

}  // namespace fenceq::daemon::cron
