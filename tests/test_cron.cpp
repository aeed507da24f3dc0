// Cron expressions (daemon/schedules/cron.hpp) in-process: the grammar, each rejection
// and its message, the ticks in UTC, the day-of-month/day-of-week rule, the
// latest missed tick, and DST in Europe/Berlin and America/New_York; then a
// brute-force check of the searches against every minute of a few days
// around DST changes.
//
// Expected instants are Unix seconds, each commented with what it is (from
// `date -u -d '2026-03-29 01:30' +%s`, and checked with
// `TZ=Europe/Berlin date -d @...`).
#include <catch2/catch.hpp>

#include <date/tz.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "schedules/cron.hpp"

namespace cron = fenceq::daemon::cron;
using cron::Expr;

namespace {

// 2026-01-01 00:00:00 UTC, a Thursday.
constexpr double kJan1 = 1767225600;
constexpr double kMinute = 60, kHour = 3600, kDay = 86400;

// The message parse() throws for (text, tz), or "" when it does not throw.
std::string error_of(std::string_view text, std::string_view tz = "") {
  try {
    cron::parse(text, tz);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::uint64_t bits(std::initializer_list<int> values) {
  std::uint64_t b = 0;
  for (int v : values) b |= std::uint64_t{1} << v;
  return b;
}

std::uint64_t span(int lo, int hi, int step = 1) {
  std::uint64_t b = 0;
  for (int v = lo; v <= hi; v += step) b |= std::uint64_t{1} << v;
  return b;
}

// Every tick in (from, to], by next_after.
std::vector<double> ticks(const Expr& e, double from, double to) {
  std::vector<double> out;
  for (auto t = cron::next_after(e, from); t && *t <= to; t = cron::next_after(e, *t)) {
    out.push_back(*t);
  }
  return out;
}

// Midnight UTC of the given days of January 2026.
std::vector<double> january(std::initializer_list<int> days) {
  std::vector<double> out;
  for (int d : days) out.push_back(kJan1 + (d - 1) * kDay);
  return out;
}

}  // namespace

TEST_CASE("parse: *, N, N-M, steps and lists set exactly their values") {
  Expr e = cron::parse("*/15 0-23/6 1,15,31 1-12 *", "");
  CHECK(e.minutes == bits({0, 15, 30, 45}));
  CHECK(e.hours == bits({0, 6, 12, 18}));
  CHECK(e.days == bits({1, 15, 31}));
  CHECK(e.months == span(1, 12));
  CHECK(e.weekdays == span(0, 6));
  CHECK(e.dom_star == false);
  CHECK(e.dow_star == true);
  CHECK(e.zone == nullptr);

  e = cron::parse("* * * * *", "UTC");
  CHECK(e.minutes == span(0, 59));
  CHECK(e.hours == span(0, 23));
  CHECK(e.days == span(1, 31));
  CHECK(e.months == span(1, 12));
  CHECK(e.weekdays == span(0, 6));
  CHECK(e.dom_star);
  CHECK(e.dow_star);

  // N/S runs from N to the field's maximum.
  CHECK(cron::parse("5/20 * * * *", "").minutes == bits({5, 25, 45}));
  CHECK(cron::parse("* 22/1 * * *", "").hours == bits({22, 23}));
  CHECK(cron::parse("* * 10/10 * *", "").days == bits({10, 20, 30}));
  // A step past the range's end keeps only its start.
  CHECK(cron::parse("*/99 * * * *", "").minutes == bits({0}));
  CHECK(cron::parse("10-20/99 * * * *", "").minutes == bits({10}));
  // Lists mix every kind of item; overlaps are harmless.
  CHECK(cron::parse("1,2-4,*/30,50/5,3 * * * *", "").minutes == bits({0, 1, 2, 3, 4, 30, 50, 55}));
  CHECK(cron::parse("59 23 31 12 6", "").minutes == bits({59}));
  // A leading zero within 3 digits.
  CHECK(cron::parse("007 01 * * *", "").minutes == bits({7}));
  // Runs of spaces and tabs separate fields; blanks at the ends are ignored.
  CHECK(cron::parse(" \t0\t\t12  *   * \t*  ", "") == cron::parse("0 12 * * *", ""));
}

TEST_CASE("parse: month and weekday names in any case, in ranges and lists, and 7 is Sunday") {
  CHECK(cron::parse("0 0 1 JAN *", "").months == bits({1}));
  CHECK(cron::parse("0 0 1 jan,Jul,DEC *", "").months == bits({1, 7, 12}));
  CHECK(cron::parse("0 0 1 mar-MAY *", "").months == bits({3, 4, 5}));
  CHECK(cron::parse("0 0 1 JAN-DEC/3 *", "").months == bits({1, 4, 7, 10}));
  CHECK(cron::parse("0 0 * * MON-FRI", "").weekdays == span(1, 5));
  CHECK(cron::parse("0 0 * * sun,sat", "").weekdays == bits({0, 6}));
  CHECK(cron::parse("0 0 * * Wed", "").weekdays == bits({3}));
  // 0 and 7 are both Sunday.
  CHECK(cron::parse("0 0 * * 7", "").weekdays == bits({0}));
  CHECK(cron::parse("0 0 * * 0", "") == cron::parse("0 0 * * 7", ""));
  CHECK(cron::parse("0 0 * * SUN", "") == cron::parse("0 0 * * 7", ""));
  CHECK(cron::parse("0 0 * * 5-7", "").weekdays == bits({0, 5, 6}));
  CHECK(cron::parse("0 0 * * 0-7", "").weekdays == span(0, 6));
  // * on day-of-week is 0-7: */2 is 0,2,4,6; 1/2 is 1,3,5,7 (7: Sunday).
  CHECK(cron::parse("0 0 * * */2", "").weekdays == bits({0, 2, 4, 6}));
  CHECK(cron::parse("0 0 * * 1/2", "").weekdays == bits({0, 1, 3, 5}));
  // Names only where they mean something, and only the three-letter ones.
  CHECK(error_of("JAN 0 * * *") == "cron field 1 (minute) 'JAN': 'JAN' is not a number");
  CHECK(error_of("0 0 * MON *") == "cron field 4 (month) 'MON': unknown name 'MON' (JAN-DEC)");
  CHECK(error_of("0 0 * * MONDAY") ==
        "cron field 5 (day-of-week) 'MONDAY': unknown name 'MONDAY' (SUN-SAT)");
  CHECK(error_of("0 0 * JANUARY *") ==
        "cron field 4 (month) 'JANUARY': unknown name 'JANUARY' (JAN-DEC)");
  // SUN is 0, so a range cannot end on it.
  CHECK(error_of("0 0 * * FRI-SUN") ==
        "cron field 5 (day-of-week) 'FRI-SUN': range FRI-SUN is backwards (5 > 0)");
  // Steps are numbers.
  CHECK(error_of("0 0 * */FEB *") == "cron field 4 (month) '*/FEB': step 'FEB' is not a number");
}

TEST_CASE("parse: the macros are their five fields, @reboot and unknown ones are refused") {
  CHECK(cron::parse("@yearly", "") == cron::parse("0 0 1 1 *", ""));
  CHECK(cron::parse("@annually", "") == cron::parse("0 0 1 1 *", ""));
  CHECK(cron::parse("@monthly", "") == cron::parse("0 0 1 * *", ""));
  CHECK(cron::parse("@weekly", "") == cron::parse("0 0 * * 0", ""));
  CHECK(cron::parse("@daily", "") == cron::parse("0 0 * * *", ""));
  CHECK(cron::parse("@midnight", "") == cron::parse("0 0 * * *", ""));
  CHECK(cron::parse("@hourly", "") == cron::parse("0 * * * *", ""));
  CHECK(cron::parse(" @Daily\t", "") == cron::parse("0 0 * * *", ""));
  CHECK(cron::parse("@HOURLY", "Europe/Berlin") == cron::parse("0 * * * *", "Europe/Berlin"));

  CHECK(error_of("@reboot") ==
        "cron macro '@reboot' is not supported: schedules tick in time, not at the daemon's "
        "start");
  CHECK(error_of("@REBOOT").find("'@reboot' is not supported") != std::string::npos);
  CHECK(error_of("@fortnightly") ==
        "unknown cron macro '@fortnightly' (@yearly @annually @monthly @weekly @daily "
        "@midnight @hourly)");
  CHECK(error_of("@") != "");
  CHECK(error_of("@daily 5") == "cron macro '@daily' takes nothing after it: '@daily 5'");
  CHECK(error_of("0 @daily * * *") == "cron field 2 (hour) '@daily': '@daily' is not a number");
}

TEST_CASE("parse: every malformed expression is refused, the message naming field and fault") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      // Values out of their field's range, each field at both ends.
      {"60 * * * *", "cron field 1 (minute) '60': out of range 0-59"},
      {"* 25 * * *", "cron field 2 (hour) '25': out of range 0-23"},
      {"* 24 * * *", "cron field 2 (hour) '24': out of range 0-23"},
      {"* * 0 * *", "cron field 3 (day-of-month) '0': out of range 1-31"},
      {"* * 32 * *", "cron field 3 (day-of-month) '32': out of range 1-31"},
      {"* * * 0 *", "cron field 4 (month) '0': out of range 1-12"},
      {"* * * 13 *", "cron field 4 (month) '13': out of range 1-12"},
      {"* * * * 8", "cron field 5 (day-of-week) '8': out of range 0-7"},
      // Within a list or range, the value is named.
      {"* 1,25 * * *", "cron field 2 (hour) '1,25': 25 out of range 0-23"},
      {"* 20-24 * * *", "cron field 2 (hour) '20-24': 24 out of range 0-23"},
      {"70/5 * * * *", "cron field 1 (minute) '70/5': 70 out of range 0-59"},
      // Ranges run upwards.
      {"* 5-3 * * *", "cron field 2 (hour) '5-3': range 5-3 is backwards (5 > 3)"},
      {"* * * DEC-JAN *", "cron field 4 (month) 'DEC-JAN': range DEC-JAN is backwards (12 > 1)"},
      // Steps.
      {"*/0 * * * *", "cron field 1 (minute) '*/0': step 0: a step is at least 1"},
      {"1-5/00 * * * *", "cron field 1 (minute) '1-5/00': step 0: a step is at least 1"},
      {"*/ * * * *", "cron field 1 (minute) '*/': no step after '/'"},
      {"/5 * * * *", "cron field 1 (minute) '/5': no value before '/'"},
      {"*/5/2 * * * *", "cron field 1 (minute) '*/5/2': step '5/2' is not a number"},
      {"*/-1 * * * *", "cron field 1 (minute) '*/-1': step '-1' is not a number"},
      {"*/1000 * * * *", "cron field 1 (minute) '*/1000': step '1000' has more than 3 digits"},
      // Empty items.
      {"1,,2 * * * *", "cron field 1 (minute) '1,,2': empty item between ',,'"},
      {"1, * * * *", "cron field 1 (minute) '1,': empty item after ','"},
      {",1 * * * *", "cron field 1 (minute) ',1': empty item before ','"},
      {", * * * *", "cron field 1 (minute) ',': empty item before ','"},
      // Half ranges, negatives, garbage.
      {"1- * * * *", "cron field 1 (minute) '1-': no value after '-'"},
      {"-1 * * * *", "cron field 1 (minute) '-1': no value before '-'"},
      {"1-2-3 * * * *", "cron field 1 (minute) '1-2-3': '2-3' is not a number"},
      {"*-5 * * * *", "cron field 1 (minute) '*-5': '*' is not a number"},
      {"** * * * *", "cron field 1 (minute) '**': '**' is not a number"},
      {"5x * * * *", "cron field 1 (minute) '5x': '5x' is not a number"},
      {"0x10 * * * *", "cron field 1 (minute) '0x10': '0x10' is not a number"},
      {"+5 * * * *", "cron field 1 (minute) '+5': '+5' is not a number"},
      {"1.5 * * * *", "cron field 1 (minute) '1.5': '1.5' is not a number"},
      {"? * * * *", "cron field 1 (minute) '?': '?' is not a number"},
      {"* * L * *", "cron field 3 (day-of-month) 'L': 'L' is not a number"},
      {"* * * * 5#2", "cron field 5 (day-of-week) '5#2': '5#2' is not a number"},
      // Long numbers stop at the digit count, not by overflowing.
      {"0000 * * * *", "cron field 1 (minute) '0000': '0000' has more than 3 digits"},
      {"99999999999999999999 * * * *",
       "cron field 1 (minute) '99999999999999999999': '99999999999999999999' has more than 3 "
       "digits"},
      {"* 100 * * *", "cron field 2 (hour) '100': out of range 0-23"},
      // Bytes that do not belong are quoted on one line.
      {"0 0 * * *\n", "cron field 5 (day-of-week) '*\\x0a': '*\\x0a' is not a number"},
      {"0 0 * * 1\xc3\xa9",
       "cron field 5 (day-of-week) '1\\xc3\\xa9': '1\\xc3\\xa9' is not a number"},
      // The field count.
      {"* * * *",
       "cron expression '* * * *': 4 fields, expected 5 (minute hour day-of-month month "
       "day-of-week)"},
      {"0 * * * * *",
       "cron expression '0 * * * * *': 6 fields, expected 5 (minute hour day-of-month month "
       "day-of-week)"},
      {"*,* * *,*",
       "cron expression '*,* * *,*': 3 fields, expected 5 (minute hour day-of-month month "
       "day-of-week)"},
      {"", "empty cron expression"},
      {" \t ", "empty cron expression"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK(error_of(c.text) == c.message);
  }
}

TEST_CASE("parse: at most 256 bytes") {
  std::string ok = "0 0 * * *" + std::string(256 - 9, ' ');
  REQUIRE(ok.size() == 256);
  CHECK(cron::parse(ok, "") == cron::parse("0 0 * * *", ""));
  CHECK(error_of(ok + " ") == "cron expression too long: 257 bytes, at most 256");
  CHECK(error_of(std::string(100000, '1')) ==
        "cron expression too long: 100000 bytes, at most 256");
}

TEST_CASE("parse: the zone is an IANA name, empty and UTC mean UTC, unknown zones are refused") {
  CHECK(cron::parse("* * * * *", "").zone == nullptr);
  CHECK(cron::parse("* * * * *", "UTC").zone == nullptr);
  const Expr berlin = cron::parse("* * * * *", "Europe/Berlin");
  REQUIRE(berlin.zone != nullptr);
  CHECK(berlin.zone == date::locate_zone("Europe/Berlin"));
  CHECK(cron::parse("* * * * *", "America/New_York").zone != nullptr);
  CHECK(cron::parse("* * * * *", "Etc/UTC").zone != nullptr);

  CHECK(error_of("* * * * *", "Mars/Base") == "unknown time zone 'Mars/Base'");
  // Typed, so that the daemon names the field `tz` without reading the text.
  CHECK_THROWS_AS(cron::parse("* * * * *", "Mars/Base"), cron::UnknownZone);
  CHECK_THROWS_AS(cron::parse("* 25 * * *", "Mars/Base"), std::invalid_argument);
  CHECK_THROWS_AS(cron::parse("time zone", ""), std::invalid_argument);
  try {
    cron::parse("time zone", "");
  } catch (const cron::UnknownZone&) {
    FAIL("an expression's error is not the zone's");
  } catch (const std::invalid_argument&) {
  }
  CHECK(error_of("* * * * *", "europe/berlin") == "unknown time zone 'europe/berlin'");
  CHECK(error_of("* * * * *", "Europe/Berlin ") == "unknown time zone 'Europe/Berlin '");
  CHECK(error_of("* * * * *", "../../etc/passwd") == "unknown time zone '../../etc/passwd'");
  CHECK(error_of("* * * * *", "/usr/share/zoneinfo/UTC") ==
        "unknown time zone '/usr/share/zoneinfo/UTC'");
  // The host's own zone would make a schedule mean another time on each host.
  CHECK(error_of("* * * * *", "localtime") == "unknown time zone 'localtime'");
  CHECK(error_of("* * * * *", std::string_view("UTC\0x", 5)) == "unknown time zone 'UTC\\x00x'");
  // A long name is cut in the message.
  std::string msg = error_of("* * * * *", std::string(5000, 'A'));
  CHECK(msg == "unknown time zone '" + std::string(300, 'A') + "...'");
  // The expression is checked first.
  CHECK(error_of("* 25 * * *", "Mars/Base") == "cron field 2 (hour) '25': out of range 0-23");
}

TEST_CASE("parse: an Expr is small and trivially copyable, to cache by the thousand") {
  STATIC_REQUIRE(std::is_trivially_copyable_v<Expr>);
  STATIC_REQUIRE(sizeof(Expr) <= 32);
  const Expr a = cron::parse("*/5 9-17 * * MON-FRI", "Europe/Berlin");
  Expr b = a;
  CHECK(b == a);
  CHECK(cron::next_after(b, kJan1) == cron::next_after(a, kJan1));
  CHECK_FALSE(cron::parse("*/5 9-17 * * MON-FRI", "") == a);
}

TEST_CASE("next_after: UTC, strictly after t, t may be fractional") {
  const Expr quarter = cron::parse("*/15 * * * *", "");
  CHECK(cron::next_after(quarter, kJan1) == kJan1 + 15 * kMinute);
  CHECK(cron::next_after(quarter, kJan1 - 0.5) == kJan1);
  CHECK(cron::next_after(quarter, kJan1 + 0.5) == kJan1 + 15 * kMinute);
  CHECK(cron::next_after(quarter, kJan1 + 899.999) == kJan1 + 15 * kMinute);
  CHECK(cron::next_after(quarter, kJan1 + 45 * kMinute) == kJan1 + kHour);

  const Expr every = cron::parse("* * * * *", "");
  CHECK(cron::next_after(every, kJan1 + 59) == kJan1 + 60);
  CHECK(cron::next_after(every, kJan1 + 60) == kJan1 + 120);

  // 2026-01-01 14:30 UTC
  CHECK(cron::next_after(cron::parse("30 14 * * *", ""), kJan1) == 1767277800);
  // Past today's 14:30: tomorrow's.
  CHECK(cron::next_after(cron::parse("30 14 * * *", ""), 1767277800) == 1767277800 + kDay);
  // Thursday 2026-01-01 09:00, then from Friday's 09:00 Monday 2026-01-05 09:00.
  const Expr weekdays = cron::parse("0 9 * * MON-FRI", "");
  CHECK(cron::next_after(weekdays, kJan1) == kJan1 + 9 * kHour);
  CHECK(cron::next_after(weekdays, kJan1 + kDay + 9 * kHour) == 1767603600);
  // The turn of the year: 2026-12-31 23:59 UTC, then 2027-01-01 00:00 UTC.
  CHECK(cron::next_after(every, 1798761540 - 1) == 1798761540);
  CHECK(cron::next_after(every, 1798761540) == 1798761600);
  CHECK(cron::next_after(cron::parse("@yearly", ""), kJan1) == 1798761600);
  // Far-off and invalid times have no tick.
  CHECK(cron::next_after(every, std::nan("")) == std::nullopt);
  CHECK(cron::next_after(every, HUGE_VAL) == std::nullopt);
  CHECK(cron::next_after(every, -HUGE_VAL) == std::nullopt);
  CHECK(cron::next_after(every, 1e300) == std::nullopt);
  // Before 1970 works: 1969-12-31 23:59 UTC.
  CHECK(cron::next_after(every, -61) == -60);
}

TEST_CASE("next_after: ends of months, Feb 29, and expressions that never match") {
  // 31st: January's, then March's (2026-03-31 00:00 UTC), then May's.
  const Expr last = cron::parse("0 0 31 * *", "");
  CHECK(cron::next_after(last, kJan1) == 1769817600);       // 2026-01-31 00:00 UTC
  CHECK(cron::next_after(last, 1769817600) == 1774915200);  // 2026-03-31 00:00 UTC
  CHECK(cron::next_after(last, 1774915200) == 1780185600);  // 2026-05-31 00:00 UTC

  const Expr leap = cron::parse("0 0 29 2 *", "");
  CHECK(cron::next_after(leap, kJan1) == 1835395200);       // 2028-02-29 00:00 UTC
  CHECK(cron::next_after(leap, 1835395200) == 1961625600);  // 2032-02-29 00:00 UTC
  CHECK(cron::latest_in(leap, 0, kJan1) == 1709164800);     // 2024-02-29 00:00 UTC
  // 2100 is no leap year: from 2096-03-01 the next is 2104-02-29, 8 years on.
  CHECK(cron::next_after(leap, 3981398400) == 4233686400);

  // Feb 1 on a Monday (*/31 on day-of-month is the 1st only, and starts with
  // `*`, so both fields must match): 2027, then not before 2038.
  const Expr rare = cron::parse("0 0 */31 2 MON", "");
  CHECK(cron::next_after(rare, kJan1) == 1801440000);       // 2027-02-01 00:00 UTC
  CHECK(cron::next_after(rare, 1801440000) == 2148595200);  // 2038-02-01 00:00 UTC
  CHECK(cron::latest_in(rare, 0, kJan1) == 1612137600);     // 2021-02-01 00:00 UTC

  // Dates that do not exist: never.
  CHECK(cron::next_after(cron::parse("0 0 30 2 *", ""), kJan1) == std::nullopt);
  CHECK(cron::next_after(cron::parse("0 0 31 2,4,6,9,11 *", ""), kJan1) == std::nullopt);
  CHECK(cron::latest_in(cron::parse("0 0 30 2 *", ""), -HUGE_VAL, kJan1) == std::nullopt);
  // One month of the list has the day.
  CHECK(cron::next_after(cron::parse("0 0 31 4,5 *", ""), kJan1) == 1780185600);  // May 31
  // With a weekday too (OR), Feb 30 does not stop February's Fridays.
  CHECK(cron::next_after(cron::parse("0 0 30 2 FRI", ""), kJan1) == 1770336000);  // 2026-02-06
}

TEST_CASE("next_after: day-of-month and day-of-week both restricted match either (Vixie)") {
  // January 2026: Fridays are 2, 9, 16, 23, 30; the 13th is a Tuesday.
  CHECK(ticks(cron::parse("0 0 13 * FRI", ""), kJan1, kJan1 + 31 * kDay - 1) ==
        january({2, 9, 13, 16, 23, 30}));
  // The first seven days, and every Monday (5, 12, 19, 26).
  CHECK(ticks(cron::parse("0 0 1-7 * MON", ""), kJan1 - 1, kJan1 + 31 * kDay - 1) ==
        january({1, 2, 3, 4, 5, 6, 7, 12, 19, 26}));
  // One of them `*`: it matches every day, so the other decides.
  CHECK(ticks(cron::parse("0 0 13 * *", ""), kJan1, kJan1 + 31 * kDay - 1) == january({13}));
  CHECK(ticks(cron::parse("0 0 * * FRI", ""), kJan1, kJan1 + 31 * kDay - 1) ==
        january({2, 9, 16, 23, 30}));
  // A field starting with `*` counts as `*` for the rule: odd days AND Fridays.
  CHECK(ticks(cron::parse("0 0 */2 * FRI", ""), kJan1, kJan1 + 31 * kDay - 1) == january({9, 23}));
  // The 13th AND every day (the day-of-week `*/1` starts with `*`).
  CHECK(ticks(cron::parse("0 0 13 * */1", ""), kJan1, kJan1 + 31 * kDay - 1) == january({13}));
  // February 13 2026 is both a Friday and the 13th: one tick.
  CHECK(ticks(cron::parse("0 0 13 * FRI", ""), 1770940800 - 1, 1770940800) ==
        std::vector<double>{1770940800});  // 2026-02-13 00:00 UTC
}

TEST_CASE("latest_in: the latest tick after not_before up to t, however long the gap") {
  const Expr hourly = cron::parse("0 * * * *", "");
  // Down for ten years: one answer, the latest hour.
  constexpr double kTenYearsBefore = 1451606400;  // 2016-01-01 00:00 UTC
  CHECK(cron::latest_in(hourly, kTenYearsBefore, kJan1 + 3 * kHour + 59 * kMinute) ==
        kJan1 + 3 * kHour);
  // t on a tick includes it; not_before on a tick excludes it.
  CHECK(cron::latest_in(hourly, kJan1, kJan1 + 3 * kHour) == kJan1 + 3 * kHour);
  CHECK(cron::latest_in(hourly, kJan1 + 3 * kHour, kJan1 + 3 * kHour + 59 * kMinute) ==
        std::nullopt);
  CHECK(cron::latest_in(hourly, kJan1 + 3 * kHour - 0.001, kJan1 + 4 * kHour - 0.001) ==
        kJan1 + 3 * kHour);
  CHECK(cron::latest_in(hourly, kJan1 + 0.5, kJan1 + kHour - 0.5) == std::nullopt);
  // An empty or reversed interval has none.
  CHECK(cron::latest_in(hourly, kJan1, kJan1) == std::nullopt);
  CHECK(cron::latest_in(hourly, kJan1 + kHour, kJan1) == std::nullopt);
  CHECK(cron::latest_in(hourly, std::nan(""), kJan1) == std::nullopt);
  CHECK(cron::latest_in(hourly, kJan1 - kHour, std::nan("")) == std::nullopt);
  // not_before unbounded below.
  CHECK(cron::latest_in(hourly, -HUGE_VAL, kJan1 + 1) == kJan1);

  const Expr yearly = cron::parse("@yearly", "");
  // None in range: after 2026-01-01 00:00 until 2026-12-31.
  CHECK(cron::latest_in(yearly, kJan1, kJan1 + 364 * kDay) == std::nullopt);
  CHECK(cron::latest_in(yearly, kJan1 - 1, kJan1 + 364 * kDay) == kJan1);
  // From 10 years back, the latest New Year.
  CHECK(cron::latest_in(yearly, kTenYearsBefore - 1, kJan1 + 364 * kDay) == kJan1);

  // A day's ticks: the latest one at or before t.
  const Expr three = cron::parse("10,20,30 8 * * *", "");
  CHECK(cron::latest_in(three, kJan1, kJan1 + 8 * kHour + 25 * kMinute) ==
        kJan1 + 8 * kHour + 20 * kMinute);
  CHECK(cron::latest_in(three, kJan1, kJan1 + 8 * kHour + 9 * kMinute) == std::nullopt);
  // The day before's last one.
  CHECK(cron::latest_in(three, kJan1, kJan1 + kDay + 8 * kHour) ==
        kJan1 + 8 * kHour + 30 * kMinute);
}

TEST_CASE("DST Europe/Berlin 2026-03-29: 02:00-02:59 do not exist, 02:30 does not fire") {
  const Expr e = cron::parse("30 2 * * *", "Europe/Berlin");
  // 2026-03-28 01:30 UTC (02:30 CET) -> 2026-03-30 00:30 UTC (02:30 CEST): none on the 29th.
  CHECK(cron::next_after(e, 1774661400) == 1774830600);
  CHECK(cron::latest_in(e, 1774661400, 1774830600 - 1) == std::nullopt);
  CHECK(cron::latest_in(e, 1774661400 - 1, 1774830600 - 1) == 1774661400);
  // Not moved to 03:30 either: 2026-03-29 01:30 UTC (03:30 CEST) is no tick.
  CHECK(ticks(e, 1774661400, 1774830600) == std::vector<double>{1774830600});

  // Hourly: 23 ticks that local day, every UTC hour from 2026-03-28 23:00 UTC
  // (00:00 CET) to 2026-03-29 21:00 UTC (23:00 CEST); 01:00 UTC is 03:00 CEST.
  const Expr hourly = cron::parse("0 * * * *", "Europe/Berlin");
  std::vector<double> expected;
  for (double t = 1774738800; t <= 1774818000; t += kHour) expected.push_back(t);
  REQUIRE(expected.size() == 23);
  CHECK(ticks(hourly, 1774738800 - 1, 1774818000 + kHour - 1) == expected);
}

TEST_CASE("DST Europe/Berlin 2026-10-25: 02:00-02:59 repeat and fire once, at the first (CEST)") {
  const Expr e = cron::parse("30 2 * * *", "Europe/Berlin");
  // From 2026-10-24 00:30 UTC (02:30 CEST): 2026-10-25 00:30 UTC (02:30
  // CEST, the first), then 2026-10-26 01:30 UTC (02:30 CET); not 2026-10-25
  // 01:30 UTC (the second 02:30, CET).
  CHECK(cron::next_after(e, 1792801800) == 1792888200);
  CHECK(cron::next_after(e, 1792888200) == 1792978200);
  // From within the repeated hour, as from any time after the first 02:30.
  CHECK(cron::next_after(e, 1792891800 - 1) == 1792978200);
  CHECK(cron::next_after(e, 1792891800) == 1792978200);
  CHECK(cron::latest_in(e, 1792888200, 1792978200 - 1) == std::nullopt);
  CHECK(cron::latest_in(e, 1792801800, 1792978200 - 1) == 1792888200);
  CHECK(cron::latest_in(e, 1792801800, 1792891800) == 1792888200);

  // Hourly: that local day has 25 hours but 24 ticks, distinct and
  // increasing: 00:00, 01:00 and 02:00 CEST (2026-10-24 22:00 and 23:00,
  // 2026-10-25 00:00 UTC), then 03:00 CET to 23:00 CET (2026-10-25 02:00 to
  // 22:00 UTC). No tick at 01:00 UTC, the second 02:00 (CET).
  const Expr hourly = cron::parse("0 * * * *", "Europe/Berlin");
  // The local day: from 2026-10-24 22:00 UTC to 2026-10-25 23:00 UTC.
  std::vector<double> got = ticks(hourly, 1792879200 - 1, 1792969200 - 1);
  std::vector<double> expected{1792879200, 1792882800, 1792886400};
  for (double t = 1792893600; t <= 1792965600; t += kHour) expected.push_back(t);
  REQUIRE(expected.size() == 24);
  CHECK(got == expected);
  for (std::size_t i = 1; i < got.size(); ++i) CHECK(got[i] > got[i - 1]);
  // The gap over the repeated hour is two hours long.
  CHECK(cron::next_after(hourly, 1792886400) == 1792893600);
  CHECK(cron::latest_in(hourly, 1792886400 - 1, 1792893600 - 1) == 1792886400);

  // Every 20 minutes: the repeated hour's minutes fire once (00:00-00:40 UTC).
  const Expr twenty = cron::parse("*/20 2 * * *", "Europe/Berlin");
  CHECK(ticks(twenty, 1792879200, 1792969200) ==
        std::vector<double>{1792886400, 1792887600, 1792888800});
}

TEST_CASE("DST America/New_York 2026: 01:30 on Nov 1 fires once (EDT), 02:30 on Mar 8 never") {
  const Expr fall = cron::parse("30 1 * * *", "America/New_York");
  // From 2026-10-31 12:00 UTC: 2026-11-01 05:30 UTC (01:30 EDT), then
  // 2026-11-02 06:30 UTC (01:30 EST), not 2026-11-01 06:30 UTC (01:30 EST).
  CHECK(cron::next_after(fall, 1793448000) == 1793511000);
  CHECK(cron::next_after(fall, 1793511000) == 1793601000);
  const Expr spring = cron::parse("30 2 * * *", "America/New_York");
  // From 2026-03-07 07:30 UTC (02:30 EST) to 2026-03-09 06:30 UTC (02:30 EDT).
  CHECK(cron::next_after(spring, 1772868600) == 1773037800);
  // Weekdays count by the zone's date: Friday 2026-01-02 00:00 UTC is still
  // Thursday in New York; Friday 00:00 EST is 05:00 UTC.
  CHECK(cron::next_after(cron::parse("0 0 * * FRI", "America/New_York"), kJan1) ==
        kJan1 + kDay + 5 * kHour);
}

namespace {

// The definition, minute by minute: UTC minute u is a tick when the zone's
// wall time at u matches and u is that wall time's first occurrence.
bool is_tick(const Expr& e, std::int64_t u) {
  const date::time_zone* z = e.zone ? e.zone : date::locate_zone("Etc/UTC");
  date::sys_seconds s{std::chrono::seconds{u}};
  date::local_seconds l = z->to_local(s);
  date::local_days d = date::floor<date::days>(l);
  date::hh_mm_ss<std::chrono::seconds> hms{l - d};
  date::year_month_day ymd{d};
  if (!(e.minutes >> hms.minutes().count() & 1) || !(e.hours >> hms.hours().count() & 1) ||
      !(e.months >> static_cast<unsigned>(ymd.month()) & 1)) {
    return false;
  }
  bool dom = e.days >> static_cast<unsigned>(ymd.day()) & 1;
  bool dow = e.weekdays >> date::weekday{d}.c_encoding() & 1;
  if (!(e.dom_star || e.dow_star ? dom && dow : dom || dow)) return false;
  date::local_info info = z->get_info(l);
  return info.result != date::local_info::ambiguous ||
         s == date::sys_seconds{l.time_since_epoch() - info.first.offset};
}

}  // namespace

TEST_CASE("next_after and latest_in agree with a minute-by-minute scan around DST changes") {
  struct Window {
    const char* zone;
    const char* what;
    std::int64_t from;
  };
  // Each window: 5 days from 00:00 UTC 2 days before the change.
  const Window windows[] = {
      {"Europe/Berlin", "2026-03-29 spring forward", 1774569600},        // 2026-03-27
      {"Europe/Berlin", "2026-10-25 fall back", 1792713600},             // 2026-10-23
      {"America/New_York", "2026-03-08 spring forward", 1772755200},     // 2026-03-06
      {"America/New_York", "2026-11-01 fall back", 1793318400},          // 2026-10-30
      {"Australia/Lord_Howe", "2026-04-05 back 30 min", 1775174400},     // 2026-04-03
      {"Australia/Lord_Howe", "2026-10-04 forward 30 min", 1790899200},  // 2026-10-02
      {"Asia/Kathmandu", "+05:45, no DST", 1767225600},                  // 2026-01-01
      {"UTC", "UTC", 1767225600},                                        // 2026-01-01
  };
  const char* exprs[] = {
      "* * * * *",        "*/7 * * * *",      "30 2 * * *",
      "59 23 * * *",      "0 0 * * *",        "0,15,30,45 0-3 * * *",
      "15 1-2 */2 * SUN", "45 1 25-31 * SUN", "0 * * 3,4,10,11 *",
  };
  for (const Window& w : windows) {
    for (const char* text : exprs) {
      INFO(w.zone << " " << w.what << ": " << text);
      const Expr e = cron::parse(text, w.zone);
      std::vector<double> expected;
      const std::int64_t to = w.from + 5 * 86400;
      for (std::int64_t u = w.from; u <= to; u += 60) {
        if (is_tick(e, u)) expected.push_back(static_cast<double>(u));
      }
      std::vector<double> got =
          ticks(e, static_cast<double>(w.from) - 0.5, static_cast<double>(to));
      CHECK(got == expected);
      // latest_in from every few minutes back to the window's start.
      for (std::int64_t t = w.from; t <= to; t += 997) {
        std::optional<double> want;
        auto after = std::upper_bound(expected.begin(), expected.end(), static_cast<double>(t));
        if (after != expected.begin()) want = *(after - 1);
        CHECK(cron::latest_in(e, static_cast<double>(w.from) - 0.5, static_cast<double>(t)) ==
              want);
      }
    }
  }
}
