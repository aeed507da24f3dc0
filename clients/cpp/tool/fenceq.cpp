// fenceq: the command-line client. Exit status: 0 success (true, a fence, a
// job), 1 refusal (false, nil), 2 error (error reply, timeout, bad usage), so
// that it composes in shell scripts:
//
//   if fence=$(fenceq claim job-7 worker-a 30); then ...; fi
//
// Jobs and figures print as JSON for scripts (--json, or stdout not a
// terminal) and as tables with relative times for a person (view.hpp).
//
// Each subcommand is one row of kSubcommands (name, description, options, and
// what runs it); main() builds the command line from the table and runs the
// row that was parsed.
#include <fenceq/client.hpp>
#include <fenceq/subscriber.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "fenceq_protocol/codec.hpp"
#include "backup.hpp"
#include "view.hpp"
#include "work.hpp"

namespace {

constexpr int kTrue = 0;
constexpr int kRefused = 1;
constexpr int kError = 2;

using json = nlohmann::ordered_json;

int print_bool(bool b) {
  std::cout << (b ? "true" : "false") << "\n";
  return b ? kTrue : kRefused;
}

json opt_json(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

// Usage errors found after parsing: one line, exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The largest number of seconds the tool takes for a delay, a retry, a lease
// or a wait of `fenceq work` (about 31 years): the daemon's own bound for
// delay and retry_in. Larger values are typing mistakes, and 1e300 or inf
// overflow every conversion that follows.
constexpr double kMaxSeconds = 1e9;
// A reply timeout longer than a day is a mistake; in milliseconds it must also
// fit the int that poll() takes.
constexpr double kMaxTimeout = 86400;
// --kill-after: the grace between SIGTERM and SIGKILL.
constexpr double kMaxKillAfter = 86400;
// A CURVE key file is a few hundred bytes.
constexpr std::size_t kMaxKeyFileBytes = 64 * 1024;

// 1e9 as 1000000000, as a user types it.
std::string number_text(double v) {
  std::ostringstream out;
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    out << static_cast<long long>(v);
  } else {
    out << v;
  }
  return out.str();
}

// A number of seconds on the command line: finite and within [lo, hi] (above
// lo when `lo_open`). CLI11 alone takes "nan", "inf" and "1e300" as doubles;
// the message names the option (CLI11 prefixes it).
CLI::Validator seconds_in(double lo, double hi, bool lo_open = false) {
  const bool bounded = hi < std::numeric_limits<double>::max();
  const std::string range =
      bounded ? std::string(lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + "]"
              : "";
  const std::string what =
      bounded ? "a number of seconds in " + range : "a finite number of seconds";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        const double v = std::strtod(begin, &end);
        const bool number = end != begin && *end == '\0';
        if (number && std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi) return {};
        return "must be " + what + ", not '" +
               fenceq::tool::escape_for_log(text.substr(0, 64)) + "'";
      },
      bounded ? "SECONDS in " + range : "SECONDS", "seconds");
}

// A whole number on the command line within [lo, hi], as seconds_in words it.
CLI::Validator count_in(long lo, long hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        errno = 0;
        const long v = std::strtol(begin, &end, 10);
        if (end != begin && *end == '\0' && errno == 0 && v >= lo && v <= hi) return {};
        return "must be a whole number in " + range + ", not '" +
               fenceq::tool::escape_for_log(text.substr(0, 64)) + "'";
      },
      "N in " + range, "count");
}

// A file descriptor closed on scope exit (never a standard one: stdin is
// read in place, not owned).
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd > 2) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Reads `path` (- for stdin when `dash_is_stdin`) up to its end, but never
// more than `limit` + 1 bytes: enough to tell that it is too large without
// holding all of it (a --payload-file of /dev/zero, or a pipe that never
// closes, never ends). Throws UsageError naming `option` and the limit when
// it is larger.
std::string read_bounded(const std::string& path, std::size_t limit, const std::string& option,
                         bool dash_is_stdin) {
  const bool stdin_ = dash_is_stdin && path == "-";
  const std::string name = stdin_ ? "stdin" : path;
  Fd f(stdin_ ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) throw UsageError(option + ": cannot read " + name + ": " + std::strerror(errno));
  std::string bytes(limit + 1, '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(f.fd, bytes.data() + got, bytes.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw UsageError(option + ": cannot read " + name + ": " + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  if (got > limit) {
    throw UsageError(option + ": " + name + " is larger than the limit of " +
                     std::to_string(limit) + " bytes");
  }
  bytes.resize(got);
  return bytes;
}

// curve_keys() reads its key file line by line with no bound (a key file of
// /dev/zero would use up memory first). The tool reads it first, bounded, and
// hands the library a file it can read whole: the same path when it is a
// regular file, else (a pipe such as <(...), which cannot be read twice) a
// memory file holding the bytes read, its name in errors replaced by `path`.
fenceq::CurveKeys bounded_curve_keys(const std::string& path, const std::string& server_key) {
  // As curve_keys() would, `-` names a file, not stdin.
  const std::string bytes = read_bounded(path, kMaxKeyFileBytes, "--curve-key", false);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    return fenceq::curve_keys(path, server_key);
  }
  Fd mem(::memfd_create("fenceq-curve-key", MFD_CLOEXEC));
  if (mem.fd < 0) throw UsageError("--curve-key: cannot hold " + path + " in memory");
  for (std::size_t put = 0; put < bytes.size();) {
    ssize_t n = ::write(mem.fd, bytes.data() + put, bytes.size() - put);
    if (n <= 0) throw UsageError("--curve-key: cannot hold " + path + " in memory");
    put += static_cast<std::size_t>(n);
  }
  const std::string alias = "/proc/self/fd/" + std::to_string(mem.fd);
  try {
    return fenceq::curve_keys(alias, server_key);
  } catch (const fenceq::Error& e) {
    std::string message = std::string(e.what()).substr(e.code().size() + 2);
    for (auto at = message.find(alias); at != std::string::npos; at = message.find(alias, at)) {
      message.replace(at, alias.size(), path);
      at += path.size();
    }
    throw fenceq::Error(e.code(), message);
  }
}

// --- enqueue --from: jobs as JSON lines ---------------------------------------

// The longest line `enqueue --from` takes: the payload limit, plus room for
// the id (up to 1 KiB), the other fields and JSON escapes in the payload.
constexpr std::size_t kMaxFromLine = fenceq::protocol::kMaxPayloadBytes + 64 * 1024;
// A batch is sent once it holds kMaxBatchItems jobs, or before it would carry
// more than this many bytes of ids, queues, payloads and groups (a frame well within
// the daemon's default --max-message of 1 MiB).
constexpr std::size_t kMaxFromBatchBytes = 512 * 1024;
// What a job costs in a batch beyond its id, queue and payload: the keys and
// the numbers.
constexpr std::size_t kFromJobOverhead = 128;

// Reads a file descriptor line by line, never holding more than one line (at
// most kMaxFromLine bytes) and a buffer.
class LineReader {
 public:
  LineReader(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}

  // The next line, without its '\n' (nullopt at the end of the input). A
  // line longer than kMaxFromLine throws at once, before the rest of it is read.
  std::optional<std::string> next(long line_number) {
    std::string line;
    for (;;) {
      if (pos_ == len_) {
        if (eof_) return line.empty() ? std::nullopt : std::optional<std::string>(std::move(line));
        fill();
        continue;
      }
      const char* begin = buf_ + pos_;
      const auto* nl = static_cast<const char*>(std::memchr(begin, '\n', len_ - pos_));
      const std::size_t take = nl ? static_cast<std::size_t>(nl - begin) : len_ - pos_;
      if (line.size() + take > kMaxFromLine) {
        throw UsageError("line " + std::to_string(line_number) + " is longer than " +
                         std::to_string(kMaxFromLine) + " bytes (the " +
                         std::to_string(fenceq::protocol::kMaxPayloadBytes) +
                         "-byte payload limit and 64 KiB for the other fields)");
      }
      line.append(begin, take);
      pos_ += take;
      if (nl) {
        ++pos_;
        return line;
      }
    }
  }

  // True when a read would wait: nothing buffered and nothing ready on the
  // input (a pipe whose producer is quiet). Files are always ready.
  bool would_wait() const {
    if (pos_ < len_ || eof_) return false;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

 private:
  void fill() {
    pos_ = len_ = 0;
    for (;;) {
      ssize_t n = ::read(fd_, buf_, sizeof buf_);
      if (n > 0) {
        len_ = static_cast<std::size_t>(n);
        return;
      }
      if (n == 0) {
        eof_ = true;
        return;
      }
      if (errno == EINTR) continue;
      throw UsageError("cannot read " + name_ + ": " + std::strerror(errno));
    }
  }

  int fd_;
  std::string name_;
  char buf_[64 * 1024];
  std::size_t pos_ = 0, len_ = 0;
  bool eof_ = false;
};

// Throws what is wrong with one line of `enqueue --from`.
[[noreturn]] void bad_line(const std::string& what) { throw std::invalid_argument(what); }

// Only a flat object is a job: a nested array or object anywhere (outside a
// string) is refused before it is parsed, whatever its depth.
void check_flat(std::string_view line) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char ch : line) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '{' || ch == '[') {
      if (++depth > 1) bad_line("a field's value must be a string, a number or null");
    } else if (ch == '}' || ch == ']') {
      --depth;
    }
  }
}

// A line of `enqueue --from` as a job: its fields over `defaults` (the
// enqueue options given on the command line). Throws std::invalid_argument
// saying what is wrong.
fenceq::JobSpec parse_job_line(const std::string& line, const fenceq::EnqueueOptions& defaults) {
  namespace proto = fenceq::protocol;
  check_flat(line);
  std::set<std::string> seen;
  std::string twice;
  nlohmann::json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t event,
                                             nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && twice.empty() &&
        !seen.insert(parsed.get<std::string>()).second) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line, cb);
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    std::string what = e.what();
    if (auto at = what.find("] "); at != std::string::npos) what.erase(0, at + 2);
    if (auto at = what.find("at line 1, column"); at != std::string::npos) {
      what.replace(at, std::strlen("at line 1, column"), "at column");
    }
    bad_line("not JSON: " + what);
  }
  if (!j.is_object()) bad_line("must be a JSON object, not " + std::string(j.type_name()));
  if (!twice.empty()) bad_line("field '" + twice + "' is given twice");
  fenceq::JobSpec spec;
  spec.queue = defaults.queue;
  spec.priority = defaults.priority;
  spec.delay = defaults.delay;
  spec.max_attempts = defaults.max_attempts;
  spec.max_runtime = defaults.max_runtime;
  spec.group = defaults.group;
  spec.deadline = defaults.deadline;
  bool has_id = false;
  const auto string_in = [](const std::string& key, const nlohmann::json& v, std::size_t lo,
                            std::size_t hi) {
    if (!v.is_string()) bad_line("field '" + key + "' must be a string, not " + v.type_name());
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() < lo || s.size() > hi) {
      bad_line("field '" + key + "' must be " + std::to_string(lo) + " to " + std::to_string(hi) +
               " bytes long, not " + std::to_string(s.size()));
    }
    return s;
  };
  const auto integer_in = [](const std::string& key, const nlohmann::json& v, std::int64_t lo,
                             std::int64_t hi) {
    if (!v.is_number_integer()) bad_line("field '" + key + "' must be an integer");
    const bool fits = v.is_number_unsigned()
                          ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi)
                          : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
    if (!fits) {
      bad_line("field '" + key + "' must be in [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "]");
    }
    return v.get<std::int64_t>();
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "id") {
      spec.id = string_in(key, v, 0, proto::kMaxKeyBytes);
      has_id = true;
    } else if (key == "queue") {
      spec.queue = string_in(key, v, 1, proto::kMaxQueueBytes);
    } else if (key == "payload") {
      if (!v.is_null()) {
        spec.payload = fenceq::Payload{string_in(key, v, 0, proto::kMaxPayloadBytes), false};
      }
    } else if (key == "priority") {
      spec.priority = integer_in(key, v, -(1LL << 31), (1LL << 31) - 1);
    } else if (key == "delay") {
      if (!v.is_number()) bad_line("field 'delay' must be a number of seconds");
      const double d = v.get<double>();
      if (!std::isfinite(d) || d < 0 || d > kMaxSeconds) {
        bad_line("field 'delay' must be in [0, " + number_text(kMaxSeconds) + "]");
      }
      spec.delay = d;
    } else if (key == "max_attempts") {
      spec.max_attempts = integer_in(key, v, 0, 1000000);
    } else if (key == "max_runtime") {
      const double d = v.is_number() ? v.get<double>() : -1;
      if (!std::isfinite(d) || d <= 0 || d > kMaxSeconds) {
        bad_line("field 'max_runtime' must be a number of seconds in (0, " +
                 number_text(kMaxSeconds) + "]");
      }
      spec.max_runtime = d;
    } else if (key == "group") {
      // null: in no group, whatever --group says.
      spec.group = v.is_null() ? std::nullopt
                               : std::optional<std::string>(
                                     string_in(key, v, 1, proto::kMaxGroupBytes));
    } else {
      bad_line("unknown field '" + key +
               "' (a job has id, queue, payload, priority, delay, max_attempts, max_runtime, group)");
    }
  }
  if (!has_id) bad_line("field 'id' is required");
  return spec;
}

// `fenceq enqueue --from`: reads jobs from `path` (- for stdin) and sends them
// with enqueue_many, a batch at a time; prints {"created": N, "existed": M}.
// Exit 0, or 1 when nothing was created and something existed (every job was
// already there: as `enqueue ID` answers for one). A bad line, or a batch the
// daemon refused or did not answer, throws: the batches before it were
// applied, nothing of its own batch was, and nothing after it is read.
int enqueue_from(fenceq::Client& client, const std::string& path,
                 const fenceq::EnqueueOptions& defaults, std::optional<double> now) {
  const bool stdin_ = path == "-";
  const std::string name = stdin_ ? "stdin" : path;
  Fd f(stdin_ ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) throw UsageError("--from: cannot read " + name + ": " + std::strerror(errno));
  LineReader reader(f.fd, name);

  std::int64_t created = 0, existed = 0;
  long applied_through = 0;  // the last line of the batches applied
  std::vector<fenceq::JobSpec> batch;
  std::vector<long> batch_lines;  // each job's line number
  std::size_t batch_bytes = 0;
  // What was applied before an error: the end of its message.
  const auto so_far = [&] {
    if (applied_through == 0) return std::string("nothing was enqueued");
    return "the jobs up to line " + std::to_string(applied_through) + " were enqueued (created " +
           std::to_string(created) + ", existed " + std::to_string(existed) + "), none after";
  };
  const auto fail = [&](const std::string& what) -> UsageError {
    return UsageError("--from " + name + ": " + what);
  };
  const auto send = [&] {
    if (batch.empty()) return;
    std::vector<bool> answers;
    try {
      answers = client.enqueue_many(batch, now);
    } catch (const fenceq::Error& e) {
      const std::string text = e.what();
      const std::string first = std::to_string(batch_lines.front());
      const std::string last = std::to_string(batch_lines.back());
      // "invalid_argument: jobs[3]: field 'id' ...": the daemon names the entry.
      const std::string tag = e.code() + ": jobs[";
      if (text.rfind(tag, 0) == 0) {
        const std::size_t close = text.find("]: ", tag.size());
        std::size_t index = batch.size();
        if (close != std::string::npos) {
          try {
            index = std::stoul(text.substr(tag.size(), close - tag.size()));
          } catch (const std::exception&) {
          }
        }
        if (index < batch.size()) {
          throw fail("line " + std::to_string(batch_lines[index]) + ": " + e.code() + ": " +
                     text.substr(close + 3) + "; its batch (lines " + first + " to " + last +
                     ") was refused whole; " + so_far());
        }
      }
      const bool unknown = e.code() == "timeout" || e.code() == "transport" ||
                           e.code() == "outcome_unknown" || e.code() == "bad_reply";
      throw fail("lines " + first + " to " + last + ": " + text +
                 (unknown ? "; they may or may not have been enqueued (enqueueing them again "
                            "is safe: a job already there is kept); before them, "
                          : "; they were not enqueued; before them, ") +
                 so_far());
    }
    for (bool b : answers) (b ? created : existed) += 1;
    applied_through = batch_lines.back();
    batch.clear();
    batch_lines.clear();
    batch_bytes = 0;
  };

  long number = 0;
  for (;;) {
    // A quiet producer (a pipe with nothing ready) does not hold back the
    // jobs read so far: they are sent before the read waits.
    if (!batch.empty() && reader.would_wait()) send();
    std::optional<std::string> line;
    try {
      line = reader.next(number + 1);
    } catch (const UsageError& e) {
      throw fail(std::string(e.what()) + "; " + so_far());
    }
    if (!line) break;
    ++number;
    if (line->find_first_not_of(" \t\r") == std::string::npos) continue;  // blank
    fenceq::JobSpec spec;
    try {
      spec = parse_job_line(*line, defaults);
    } catch (const std::invalid_argument& e) {
      throw fail("line " + std::to_string(number) + ": " + e.what() + "; " + so_far());
    }
    const std::size_t bytes = spec.id.size() + spec.queue.size() +
                              (spec.payload ? spec.payload->bytes.size() : 0) +
                              (spec.group ? spec.group->size() : 0) + kFromJobOverhead;
    if (!batch.empty() && batch_bytes + bytes > kMaxFromBatchBytes) send();
    batch.push_back(std::move(spec));
    batch_lines.push_back(number);
    batch_bytes += bytes;
    if (batch.size() >= static_cast<std::size_t>(fenceq::protocol::kMaxBatchItems)) send();
  }
  send();
  std::cout << json{{"created", created}, {"existed", existed}}.dump() << "\n";
  return created == 0 && existed > 0 ? kRefused : kTrue;
}

// A payload prints as text when it was sent as str, else as {"base64": ...}.
json payload_json(const std::optional<fenceq::Payload>& p) {
  if (!p) return nullptr;
  if (!p->binary) return p->bytes;
  static const char* kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  const auto& b = p->bytes;
  for (; i + 2 < b.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(b[i]) << 16) |
                 (static_cast<unsigned char>(b[i + 1]) << 8) | static_cast<unsigned char>(b[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (i < b.size()) {
    unsigned v = static_cast<unsigned char>(b[i]) << 16;
    if (i + 1 < b.size()) v |= static_cast<unsigned char>(b[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < b.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return json{{"base64", out}};
}

// A job's steps (C3.22): each name with its value as payload_json writes it
// (a str, {"base64": ...}, or null for nil).
json steps_json(const fenceq::Steps& steps) {
  json out = json::object();
  for (const auto& [name, value] : steps) out[name] = payload_json(value);
  return out;
}

// C3.23: a claimed job's or a record's "signal" (as payload_json writes a
// payload; null for nil) and a record's "suspended", each only when set, as
// on the wire.
void add_signal_json(json& out, bool signalled, const std::optional<fenceq::Payload>& signal) {
  if (signalled) out["signal"] = payload_json(signal);
}

// A job's row of `list`, as one JSON line.
json job_info_json(const fenceq::JobInfo& j) {
  json out{{"id", j.id},
              {"queue", j.queue},
              {"state", fenceq::protocol::status_name(j.status)},
              {"priority", j.priority},
              {"attempts", j.attempts},
              {"max_attempts", j.max_attempts},
              {"fence", j.fence},
              {"owner", opt_json(j.owner)},
              {"until", j.until},
              {"not_before", j.not_before},
              {"error", opt_json(j.error)},
              {"created", j.created}};
  if (j.progress) out["progress"] = *j.progress;  // only when a renew reported one
  if (j.key) out["key"] = *j.key;  // only when the job has a unique key
  if (j.group) out["group"] = *j.group;  // only when the job has a group
  return out;
}

json writes_json(const fenceq::WriteCounts& w) {
  return json{{"applied", w.applied}, {"refused", w.refused}};
}

json totals_json(const fenceq::QueueTotals& t) {
  json out{{"claimed", t.claimed}, {"completed", t.completed}, {"failed", t.failed},
           {"retried", t.retried}, {"dead", t.dead},           {"expired", t.expired},
           {"removed", t.removed},
           {"refused", json{{"renew", t.refused.renew},
                            {"complete", t.refused.complete},
                            {"release", t.refused.release},
                            {"fail", t.refused.fail}}}};
  if (t.deadline_passed > 0) out["deadline_passed"] = t.deadline_passed;  // as on the wire (C3.24)
  return out;
}

json stats_json(const fenceq::Stats& st) {
  json queues = json::object();
  for (const auto& q : st.queues) {
    queues[q.queue] = json{{"ready", q.ready},   {"delayed", q.delayed},
                           {"leased", q.leased}, {"done", q.done},
                           {"dead", q.dead},     {"cancelled", q.cancelled},
                           {"oldest_ready_age", q.oldest_ready_age},
                           {"totals", totals_json(q.totals)}};
    if (q.blocked > 0) queues[q.queue]["blocked"] = q.blocked;  // as on the wire (issue 32)
    if (q.suspended > 0) queues[q.queue]["suspended"] = q.suspended;  // as on the wire (C3.23)
    if (q.config) {
      auto& j = queues[q.queue];
      j["paused"] = q.config->paused;
      j["max_leased"] = q.config->max_leased;
      j["rate"] = q.config->rate;
      j["per"] = q.config->per;
      // As on the wire: only for a queue with group settings.
      if (q.config->group_limited()) {
        j["group_max_leased"] = q.config->group_max_leased;
        j["group_rate"] = q.config->group_rate;
        j["group_per"] = q.config->group_per;
      }
      if (q.config->group_overrides > 0) j["group_overrides"] = q.config->group_overrides;
    }
    // As on the wire (C3.25): the groups' own settings, each only when set.
    for (const auto& [group, o] : q.group_config) {
      auto& g = queues[q.queue]["group_config"][group];
      g = json::object();
      if (o.max_leased) g["max_leased"] = *o.max_leased;
      if (o.rate) g["rate"] = *o.rate;
      if (o.per) g["per"] = *o.per;
    }
    if (q.groups_waiting > 0) queues[q.queue]["groups_waiting"] = q.groups_waiting;
    // As on the wire: each only when set (issue 33).
    if (q.retention.keep_done) queues[q.queue]["keep_done"] = *q.retention.keep_done;
    if (q.retention.keep_dead) queues[q.queue]["keep_dead"] = *q.retention.keep_dead;
    if (q.retention.keep_cancelled) queues[q.queue]["keep_cancelled"] = *q.retention.keep_cancelled;
  }
  json out{{"queues", queues},
              {"requests", st.requests},
              {"commits", st.commits},
              {"batches", st.batches},
              {"failed_commits", st.failed_commits},
              {"mean_batch", st.mean_batch},
              {"waiting_claims", st.waiting_claims},
              {"uptime", st.uptime},
              {"writes", json{{"renew", writes_json(st.renew)},
                              {"complete", writes_json(st.complete)},
                              {"release", writes_json(st.release)},
                              {"fail", writes_json(st.fail)}}}};
  // As on the wire: each only with its daemon option.
  if (st.events_published) {
    out["events"] = {{"published", *st.events_published}, {"dropped", st.events_dropped.value_or(0)}};
  }
  if (st.outbox) {
    out["outbox"] = {{"pending", st.outbox->pending}, {"lag", st.outbox->lag},
                     {"drained", st.outbox->drained}, {"rejected", st.outbox->rejected},
                     {"high_water", st.outbox->high_water}};
  }
  return out;
}

// A refusal that has no value (a missing job, a lost claim): null, exit 1.
int print_null() {
  std::cout << "null\n";
  return kRefused;
}

// --- the subcommands ---------------------------------------------------------

// The values a subcommand's options fill. Every subcommand has an Args of its
// own and uses the fields its options name.
struct Args {
  std::string id, owner;
  std::int64_t fence = 0;
  double ttl = 0;
  std::optional<std::string> result;                 // complete
  std::optional<std::string> progress;               // renew
  std::string error;                                 // fail
  std::optional<double> retry_in;                    // fail
  double delay = 0;                                  // snooze
  std::string step;                                  // step-save
  std::optional<std::string> value;                  // step-save, signal
  double timeout = 0;                                // suspend
  std::string on_timeout = "retry";                  // suspend
  std::string token;                                 // signal
  std::optional<std::string> payload, payload_file;  // enqueue
  std::optional<std::string> enqueue_id, from;       // enqueue
  fenceq::EnqueueOptions enqueue;                    // enqueue
  std::string on_conflict;                           // enqueue --key
  std::string after_failure;                         // enqueue --after
  std::string queue;                                 // claim-next
  double wait = 0;                                   // claim-next
  std::optional<std::string> queue_filter;           // list, purge
  std::optional<std::string> state;                  // list
  std::optional<std::string> owner_filter;           // list
  fenceq::ListOptions list;                          // list
  std::string list_order = "id";                     // list --order
  fenceq::tool::TopOptions top;                      // top
  double older_than = 0;                             // purge
  fenceq::tool::WorkOptions work;                    // work
  fenceq::QueueSettings settings;                    // limit
  std::string action;                                // schedule
  std::vector<std::string> words;                    // schedule: NAME [CRON]
  std::vector<std::string> headers;                  // enqueue --header K=V
  fenceq::ScheduleOptions schedule;                  // schedule set
  fenceq::BulkFilter bulk;                           // retry, cancel, purge by filter
  std::optional<std::string> keep[3];                // retention: done, dead, cancelled
  std::string group;                                 // group-limit
  std::optional<std::string> own[3];                 // group-limit: max-leased, rate, per
  std::string events;                                // watch --events
  std::int64_t count = 0;                            // watch --count
  double for_seconds = 0;                            // watch --for
  fenceq::tool::BackupOptions backup;                // backup
  fenceq::tool::MigrateOptions migrate;              // migrate
};

// What a subcommand runs with: a client of the daemon, and the global options
// it was made from.
struct Call {
  fenceq::Client& client;
  std::optional<double> now;  // --now
  const std::string& endpoint;
  const fenceq::ClientOptions& options;
  bool human;  // tables and relative times (a terminal, no --json), else JSON
};

double now_of(const Call& c);

// The bulk options of retry, cancel and purge (issue 33): which jobs, and
// how many a request (the tool asks again while more are left).
void bulk_options(CLI::App& cmd, Args& a, const char* states) {
  cmd.add_option("-q,--queue", a.queue_filter, "act on the jobs of this queue (by filter)");
  cmd.add_option("-s,--state", a.state, states);
  cmd.add_option("-p,--prefix", a.bulk.prefix, "only the ids that start with this");
  cmd.add_option("--group", a.bulk.group, "only the jobs of this group");
  cmd.add_option("--page", a.bulk.limit, "jobs a request (1..10000, default 1000)")
      ->check(count_in(1, static_cast<long>(fenceq::protocol::kMaxBulkLimit)));
}

bool by_filter(const Args& a) {
  return a.queue_filter || a.state || !a.bulk.prefix.empty() || a.bulk.group;
}

// Runs `page` until no job that passes the filter is left; prints the count.
int run_bulk(const Args& a, const std::function<fenceq::BulkOutcome(const fenceq::BulkFilter&)>& page) {
  fenceq::BulkFilter f = a.bulk;
  if (a.state) {
    f.state = fenceq::protocol::status_from_name(*a.state);
    if (!f.state) throw UsageError("--state: unknown state " + *a.state);
  }
  std::int64_t total = 0;
  // Each page acts on at least one job or ends the loop; a bound all the same.
  for (int pages = 0; pages < 1000000; ++pages) {
    const auto r = page(f);
    total += r.count;
    if (!r.more) break;
  }
  std::cout << total << "\n";
  return kTrue;
}

// A job's whole record (show, await): a view on a terminal, else JSON.
int print_detail(const Call& c, const fenceq::JobDetail& d) {
  if (c.human) {
    // The states of its parents and blocked children (issue 32): one
    // `results` for each list (each holds at most 1000).
    fenceq::JobResults linked;
    for (const auto* ids : {&d.after, &d.blocked_children}) {
      if (ids->empty()) continue;
      auto got = c.client.results(*ids);
      linked.insert(linked.end(), got.begin(), got.end());
    }
    fenceq::tool::print_job(std::cout, d, now_of(c), linked);
    return kTrue;
  }
  json j = job_info_json(d.info);
  j["result"] = opt_json(d.result);
  j["payload"] = payload_json(d.payload);
  if (!d.after.empty()) j["after"] = d.after;
  if (!d.blocked_children.empty()) j["blocked_children"] = d.blocked_children;
  if (!d.headers.empty()) j["headers"] = d.headers;  // issue 33
  if (!d.steps.empty()) j["steps"] = steps_json(d.steps);  // C3.22
  add_signal_json(j, d.signalled, d.signal);               // C3.23
  if (d.suspend_timeout) {
    j["suspended"] =
        json{{"timeout", *d.suspend_timeout}, {"on_timeout", d.suspend_fails ? "fail" : "retry"}};
  }
  std::cout << j.dump() << "\n";
  return kTrue;
}

// The schedules: a table on a terminal, else JSON lines.
int print_schedules(const Call& c, const std::vector<fenceq::Schedule>& list) {
  auto when = [](double t) -> json {
    if (t <= 0) return nullptr;
    return t;
  };
  if (c.human) {
    fenceq::tool::print_schedules(std::cout, list, now_of(c));
    return kTrue;
  }
  for (const auto& s : list) {
    std::cout << json{{"name", s.name},
                      {"cron", s.cron},
                      {"tz", s.tz},
                      {"queue", s.queue},
                      {"payload", payload_json(s.payload)},
                      {"priority", s.priority},
                      {"max_attempts", s.max_attempts},
                      {"next", when(s.next)},
                      {"last", s.last ? json(*s.last) : json(nullptr)}}
                     .dump()
              << "\n";
  }
  return kTrue;
}

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The reference time for "in 12 s": --now for a daemon in client clock mode.
double now_of(const Call& c) { return c.now.value_or(epoch_now()); }

// The jobs of `lo`, only those whose owner is `owner` when given: pages of
// 1000 read until lo.limit of them are found (at most 100 pages).
std::vector<fenceq::JobInfo> list_jobs(fenceq::Client& client, fenceq::ListOptions lo,
                                       const std::optional<std::string>& owner) {
  if (!owner) return client.list(lo);
  std::vector<fenceq::JobInfo> found;
  const auto want = static_cast<std::size_t>(lo.limit);
  lo.limit = 1000;
  for (int page = 0; page < 100 && found.size() < want; ++page) {
    auto rows = client.list(lo);
    for (auto& r : rows) {
      if (r.owner == owner && found.size() < want) found.push_back(std::move(r));
    }
    if (rows.size() < 1000) break;
    lo.after = rows.back().id;
    if (lo.order != fenceq::ListOrder::id) lo.after_created = rows.back().created;
  }
  return found;
}

// Makes clients of the call's daemon, with its options but another timeout
// (work's renewals, top's refreshes).
std::function<fenceq::Client(std::chrono::milliseconds)> connector(const Call& c) {
  return [endpoint = c.endpoint, options = c.options](std::chrono::milliseconds t) {
    fenceq::ClientOptions quick = options;
    quick.timeout = t;
    return fenceq::Client(endpoint, quick);
  };
}

// One subcommand: its name and description as `fenceq --help` lists them,
// `options`, which declares its options and positionals on `cmd` into `a`,
// and `run`, which runs it once they are parsed and returns the exit status.
// What `run` throws is printed as one line, and the exit status is kError.
struct Subcommand {
  const char* name;
  const char* description;
  void (*options)(CLI::App& cmd, Args& a);
  int (*run)(const Call& call, const Args& a);
};

void no_options(CLI::App&, Args&) {}

// id owner fence: the lease that a write names.
void lease_options(CLI::App& cmd, Args& a) {
  cmd.add_option("id", a.id)->required();
  cmd.add_option("owner", a.owner)->required();
  cmd.add_option("fence", a.fence)->required();
}

// Every subcommand, in the order `fenceq --help` lists them. Adding one is
// adding a row (and the Args fields it needs, if no other subcommand has them).
const Subcommand kSubcommands[] = {
    {"ping", "check the daemon; prints its version and clock", no_options,
     [](const Call& c, const Args&) {
       auto info = c.client.ping();
       std::cout << json{{"protocol", info.protocol}, {"version", info.version},
                         {"clock", info.clock}}.dump()
                 << "\n";
       return kTrue;
     }},
    {"enqueue", "create a job (false if it exists), or many from JSON lines (--from)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("id", a.enqueue_id, "the job's id (not with --from)");
       cmd.add_option("--from", a.from,
                      "jobs as JSON lines from FILE (- for stdin), in batches (see below)");
       cmd.footer(
           "--from FILE: one job a line, a JSON object: \"id\" (required), and \"queue\",\n"
           "\"payload\" (a string), \"priority\", \"delay\", \"max_attempts\", \"group\" as\n"
           "the options above, which give the defaults for lines without them\n"
           "(\"group\": null: in no group); --deadline holds for every line. Blank lines\n"
           "are skipped. Read as it comes\n"
           "(a line of at most the payload limit + 64 KiB) and sent with enqueue_many\n"
           "in batches of up to 1000 jobs (fewer when their payloads are large, or\n"
           "when a pipe has nothing more ready). Prints {\"created\":N,\"existed\":M};\n"
           "exit 0, or 1 when nothing was created and some existed (all were there\n"
           "already). A bad line: exit 2 naming its line; the batches before it were\n"
           "enqueued, nothing of its own batch, nothing after. Enqueueing the same\n"
           "file again is safe: existing ids are kept.\n"
           "\n"
           "--group G: within one priority, claim_next serves the groups that have a\n"
           "claimable job in turn, the one served least recently first (jobs without\n"
           "a group are one group of their own), so a group with many jobs does not\n"
           "hold back one with few; `fenceq limit QUEUE --group-max-leased N\n"
           "--group-rate R --group-per S` limits each group of the queue.");
       cmd.add_option("-q,--queue", a.enqueue.queue, "queue (default: default)");
       cmd.add_option("-p,--payload", a.payload, "payload text");
       cmd.add_option("--payload-file", a.payload_file,
                      "payload bytes from a file (- for stdin), at most " +
                          std::to_string(fenceq::protocol::kMaxPayloadBytes) + " bytes");
       cmd.add_option("--priority", a.enqueue.priority, "higher is claimed first (default 0)");
       cmd.add_option("--delay", a.enqueue.delay, "seconds before it can be claimed")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--max-attempts", a.enqueue.max_attempts,
                      "claims before it is dead (default 25; 0: no limit)");
       cmd.add_option("--max-runtime", a.enqueue.max_runtime,
                      "seconds an attempt may run from its claim, renewals included; then it "
                      "fails with its fence raised")
           ->check(seconds_in(0, kMaxSeconds, true));
       cmd.add_option("--key", a.enqueue.key,
                      "unique key: no new job while a job of the queue and key is unfinished; "
                      "prints {\"id\",\"created\"}");
       cmd.add_option("--unique-for", a.enqueue.unique_for,
                      "with --key: jobs of the key enqueued within these seconds count too, "
                      "finished or not")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--on-conflict", a.on_conflict,
                      "with --key: skip (default), or replace: a waiting job of the key takes "
                      "this payload, priority, max attempts and delay")
           ->check(CLI::IsMember({"skip", "replace"}));
       cmd.add_option("--group", a.enqueue.group,
                      "the job's group (such as a customer): within a priority, workers take "
                      "the groups' jobs in turn, and `fenceq limit --group-*` limits each group");
       cmd.add_option("--after", a.enqueue.after,
                      "A,B,...: the jobs it waits for: blocked until each is done")
           ->delimiter(',');
       cmd.add_option("--header", a.headers,
                      "K=V (repeatable): a header the job carries, given back with its claims "
                      "(trace context: traceparent=...)");
       cmd.add_option("--after-failure", a.after_failure,
                      "with --after: cancel (default: cancelled when a parent is dead or "
                      "cancelled) or run (it runs anyway)")
           ->check(CLI::IsMember({"cancel", "run"}));
       cmd.add_option("--deadline", a.enqueue.deadline,
                      "Unix seconds: not claimed by then, it is never claimed (dead with the "
                      "error \"deadline passed\")")
           ->check(seconds_in(0, fenceq::protocol::kMaxDeadline, true));
     },
     [](const Call& c, const Args& a) {
       if (a.from) {
         if (a.enqueue_id) throw UsageError("enqueue: give an ID or --from FILE, not both");
         if (a.payload || a.payload_file) {
           throw UsageError("enqueue --from: each job's payload comes from its line, not from "
                            "--payload or --payload-file");
         }
         return enqueue_from(c.client, *a.from, a.enqueue, c.now);
       }
       if (!a.enqueue_id) throw UsageError("enqueue: give an ID, or --from FILE");
       fenceq::EnqueueOptions eo = a.enqueue;
       if (a.payload) eo.payload = fenceq::Payload{*a.payload, false};
       if (a.payload_file) {
         std::string bytes = read_bounded(*a.payload_file, fenceq::protocol::kMaxPayloadBytes,
                                          "--payload-file", true);
         // Text when it is UTF-8 (a worker gets a str back), else binary.
         eo.payload = fenceq::Payload{bytes, !fenceq::protocol::valid_utf8(bytes)};
       }
       eo.now = c.now;
       if (!a.after_failure.empty() && eo.after.empty()) {
         throw UsageError("enqueue: --after-failure needs --after");
       }
       eo.after_run = a.after_failure == "run";
       for (const auto& h : a.headers) {
         const auto eq = h.find('=');
         if (eq == std::string::npos || eq == 0) {
           throw UsageError("enqueue: --header takes KEY=VALUE, not " + h);
         }
         if (!eo.headers.emplace(h.substr(0, eq), h.substr(eq + 1)).second) {
           throw UsageError("enqueue: --header " + h.substr(0, eq) + " given twice");
         }
       }
       if (!eo.key) {
         if (eo.unique_for > 0 || !a.on_conflict.empty()) {
           throw UsageError("enqueue: --unique-for and --on-conflict need --key");
         }
         return print_bool(c.client.enqueue(*a.enqueue_id, eo));
       }
       eo.replace = a.on_conflict == "replace";
       // The job created, or the one that holds the key (or the id): exit 1
       // when none was created, as for an id that exists.
       const auto e = c.client.enqueue_unique(*a.enqueue_id, eo);
       std::cout << json{{"id", e.id}, {"created", e.created}}.dump() << "\n";
       return e.created ? kTrue : kRefused;
     }},
    {"state", "print a job's lease and result (null and exit 1 if missing)",
     [](CLI::App& cmd, Args& a) { cmd.add_option("id", a.id)->required(); },
     [](const Call& c, const Args& a) {
       auto s = c.client.state(a.id);
       if (!s) return print_null();
       if (c.human) {
         fenceq::tool::print_state(std::cout, *s, now_of(c));
         return kTrue;
       }
       json out{{"id", s->id},         {"owner", opt_json(s->owner)},
                {"until", s->until},   {"fence", s->fence},
                {"result", opt_json(s->result)}, {"done", s->done}};
       if (s->progress) out["progress"] = *s->progress;  // only when a renew reported one
       std::cout << out.dump() << "\n";
       return kTrue;
     }},
    {"claim", "take the lease; prints the new fence",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("id", a.id)->required();
       cmd.add_option("owner", a.owner)->required();
       // A ttl of 0 gets through to the client's own refusal
       // (invalid_argument: ttl must be > 0).
       cmd.add_option("ttl", a.ttl, "lease length in seconds")
           ->required()
           ->check(seconds_in(0, kMaxSeconds));
     },
     [](const Call& c, const Args& a) {
       auto f = c.client.claim(a.id, a.owner, a.ttl, c.now);
       if (!f) {
         // A refusal gives no reason. A job that is not there at all is most
         // often the arguments in another order: said on stderr, while stdout
         // keeps its null for scripts.
         if (!c.client.state(a.id)) {
           std::cerr << "fenceq: no job '" << fenceq::tool::escape_for_log(a.id)
                     << "' (usage: fenceq claim ID OWNER TTL)\n";
         }
         return print_null();
       }
       std::cout << *f << "\n";
       return kTrue;
     }},
    {"claim-next", "claim the next job of a queue; prints it as JSON",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("queue", a.queue)->required();
       cmd.add_option("owner", a.owner)->required();
       cmd.add_option("ttl", a.ttl)->required()->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("-w,--wait", a.wait, "seconds to wait for a job (long-poll)")
           ->check(seconds_in(0, fenceq::protocol::kMaxWaitSeconds));
     },
     [](const Call& c, const Args& a) {
       auto job = c.client.claim_next(a.queue, a.owner, a.ttl, a.wait, c.now);
       if (!job) return print_null();
       json out{{"id", job->id}, {"fence", job->fence},
                {"payload", payload_json(job->payload)}, {"attempts", job->attempts}};
       if (!job->after.empty()) out["after"] = job->after;
       if (!job->headers.empty()) out["headers"] = job->headers;  // issue 33
       if (!job->steps.empty()) out["steps"] = steps_json(job->steps);  // C3.22
       add_signal_json(out, job->signalled, job->signal);               // C3.23
       std::cout << out.dump() << "\n";
       return kTrue;
     }},
    {"renew", "extend the current lease",
     [](CLI::App& cmd, Args& a) {
       lease_options(cmd, a);
       cmd.add_option("ttl", a.ttl)->required()->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--progress", a.progress,
                      "kept with the lease, shown by state, show and list (<= 4 KiB)");
     },
     [](const Call& c, const Args& a) {
       std::optional<std::string_view> p;
       if (a.progress) p = *a.progress;
       return print_bool(c.client.renew(a.id, a.owner, a.fence, a.ttl, c.now, p));
     }},
    {"complete", "store the result under the current lease",
     [](CLI::App& cmd, Args& a) {
       lease_options(cmd, a);
       cmd.add_option("result", a.result, "the result text (omitted: null)");
     },
     [](const Call& c, const Args& a) {
       std::optional<std::string_view> r;
       if (a.result) r = *a.result;
       return print_bool(c.client.complete(a.id, a.owner, a.fence, r, c.now));
     }},
    {"release", "give the lease back, keeping the fence", lease_options,
     [](const Call& c, const Args& a) {
       return print_bool(c.client.release(a.id, a.owner, a.fence));
     }},
    {"fail", "report a failure under the current lease",
     [](CLI::App& cmd, Args& a) {
       lease_options(cmd, a);
       cmd.add_option("error", a.error)->required();
       cmd.add_option("--retry-in", a.retry_in, "seconds before it can be claimed again")
           ->check(seconds_in(0, kMaxSeconds));
     },
     [](const Call& c, const Args& a) {
       return print_bool(c.client.fail(a.id, a.owner, a.fence, a.error, a.retry_in, c.now));
     }},
    {"snooze", "give the current lease back with its attempt: claimable again in DELAY s",
     [](CLI::App& cmd, Args& a) {
       lease_options(cmd, a);
       cmd.add_option("delay", a.delay, "seconds before it can be claimed again")
           ->required()
           ->check(seconds_in(0, kMaxSeconds));
     },
     [](const Call& c, const Args& a) {
       return print_bool(c.client.snooze(a.id, a.owner, a.fence, a.delay, c.now));
     }},
    {"step-save", "save a step's result under the current lease, once per job (false: not saved)",
     [](CLI::App& cmd, Args& a) {
       lease_options(cmd, a);
       cmd.add_option("step", a.step, "the step's name (1..256 bytes)")->required();
       cmd.add_option("value", a.value, "its result, as text (omitted: null)");
       cmd.footer(
           "A saved step is never overwritten, not even by the lease that saved it:\n"
           "false (exit 1) then, as for a lease that is no longer current. Every later\n"
           "claim of the job carries its steps (claim-next prints them as \"steps\"), and\n"
           "`fenceq show ID` lists them, so that a retried job's next attempt skips the\n"
           "steps an earlier one finished. A job holds at most 64 steps, 256 KiB of\n"
           "values in all.");
     },
     [](const Call& c, const Args& a) {
       std::optional<fenceq::Payload> v;
       if (a.value) v = fenceq::Payload{*a.value, false};
       return print_bool(c.client.step_save(a.id, a.owner, a.fence, a.step, v, c.now));
     }},
    {"suspend", "end the current lease and wait for a signal; prints the signal's token",
     [](CLI::App& cmd, Args& a) {
       lease_options(cmd, a);
       cmd.add_option("timeout", a.timeout,
                      "seconds to wait for the signal (1 to 2592000: 30 days)")
           ->required()
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--on-timeout", a.on_timeout,
                      "retry (default: ready again, error \"suspend timed out\") or fail (dead)")
           ->check(CLI::IsMember({"retry", "fail"}));
       cmd.footer(
           "The job waits, held by no worker, until `fenceq signal TOKEN [VALUE]` wakes\n"
           "it (ready at once; its claims then carry the value as \"signal\") or TIMEOUT\n"
           "seconds pass. The attempt is given back and the fence kept; the lease is\n"
           "gone, so nothing is completed after a suspend. Prints null (exit 1) when the\n"
           "lease is not current: nothing changed. `fenceq show ID` says when the wait\n"
           "ends.");
     },
     [](const Call& c, const Args& a) {
       const auto how = a.on_timeout == "fail" ? fenceq::OnTimeout::fail : fenceq::OnTimeout::retry;
       auto token = c.client.suspend(a.id, a.owner, a.fence, a.timeout, how, c.now);
       if (!token) return print_null();
       std::cout << *token << "\n";
       return kTrue;
     }},
    {"signal", "wake the job suspended with TOKEN, once (false: used, unknown or timed out)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("token", a.token, "the token `fenceq suspend` printed")->required();
       cmd.add_option("value", a.value,
                      "what the job's claims carry as \"signal\", as text (omitted: null)");
     },
     [](const Call& c, const Args& a) {
       std::optional<fenceq::Payload> v;
       if (a.value) v = fenceq::Payload{*a.value, false};
       return print_bool(c.client.signal(a.token, v, c.now));
     }},
    {"check", "is this lease current? (exit 0 yes, 1 no)", lease_options,
     [](const Call& c, const Args& a) {
       return print_bool(c.client.check(a.id, a.owner, a.fence, c.now));
     }},
    {"retry", "revive a dead or cancelled job, or all of a queue's (--queue; prints how many)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("id", a.id);
       bulk_options(cmd, a, "dead or cancelled (default: both)");
     },
     [](const Call& c, const Args& a) {
       if (!by_filter(a)) {
         if (a.id.empty()) throw UsageError("retry: give an ID, or --queue Q [--state S]");
         return print_bool(c.client.retry(a.id));
       }
       if (!a.id.empty() || !a.queue_filter) throw UsageError("retry: an ID, or --queue Q, not both");
       return run_bulk(a, [&](const auto& f) { return c.client.retry_many(*a.queue_filter, f); });
     }},
    {"cancel", "cancel a job not done (fenced), or all of a queue's (--queue; prints how many)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("id", a.id);
       bulk_options(cmd, a, "ready, delayed, leased, blocked, suspended or dead (default: all)");
     },
     [](const Call& c, const Args& a) {
       if (!by_filter(a)) {
         if (a.id.empty()) throw UsageError("cancel: give an ID, or --queue Q [--state S]");
         return print_bool(c.client.cancel(a.id));
       }
       if (!a.id.empty() || !a.queue_filter) throw UsageError("cancel: an ID, or --queue Q, not both");
       return run_bulk(a, [&](const auto& f) { return c.client.cancel_many(*a.queue_filter, f); });
     }},
    {"await", "wait until a job is finished (done, dead or cancelled); print its record",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("id", a.id)->required();
       cmd.add_option("-w,--wait", a.wait, "seconds to wait at most (default 30)")
           ->check(seconds_in(0, fenceq::protocol::kMaxWaitSeconds));
       a.wait = 30;
     },
     [](const Call& c, const Args& a) {
       auto d = c.client.await_job(a.id, a.wait);
       if (!d) return print_null();  // still not finished
       return print_detail(c, *d);
     }},
    {"pause", "hand out no job of a queue until resume (claims wait, nothing is lost)",
     [](CLI::App& cmd, Args& a) { cmd.add_option("queue", a.queue)->required(); },
     [](const Call& c, const Args& a) { return print_bool(c.client.pause(a.queue)); }},
    {"resume", "hand out a paused queue's jobs again",
     [](CLI::App& cmd, Args& a) { cmd.add_option("queue", a.queue)->required(); },
     [](const Call& c, const Args& a) { return print_bool(c.client.resume(a.queue)); }},
    {"limit",
     "set a queue's limits: jobs leased at once, claims per period, the same for each group "
     "(0: none)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("queue", a.queue)->required();
       cmd.add_option("--max-leased", a.settings.max_leased,
                      "at most this many jobs of the queue leased at once, by all workers");
       cmd.add_option("--rate", a.settings.rate, "at most this many claims per --per seconds");
       cmd.add_option("--per", a.settings.per, "the rate's period in seconds (default 1)")
           ->check(seconds_in(0, fenceq::protocol::kMaxRatePer));
       cmd.add_option("--group-max-leased", a.settings.group_max_leased,
                      "at most this many jobs of any one group (enqueue --group) leased at once");
       cmd.add_option("--group-rate", a.settings.group_rate,
                      "at most this many claims of any one group per --group-per seconds");
       cmd.add_option("--group-per", a.settings.group_per,
                      "the group rate's period in seconds (default 1)")
           ->check(seconds_in(0, fenceq::protocol::kMaxRatePer));
       cmd.footer(
           "Each setting left out keeps its value; 0 lifts a limit. The --group-*\n"
           "limits hold for each group of the queue alike (jobs enqueued with --group);\n"
           "jobs without a group are limited by none of them. `fenceq stats` shows\n"
           "the settings, and how many groups have a job waiting.");
     },
     [](const Call& c, const Args& a) {
       const auto& s = a.settings;
       if (!s.max_leased && !s.rate && !s.per && !s.group_max_leased && !s.group_rate &&
           !s.group_per) {
         throw UsageError(
             "limit: give --max-leased, --rate, --per, --group-max-leased, --group-rate or "
             "--group-per");
       }
       return print_bool(c.client.queue_config(a.queue, a.settings));
     }},
    {"group-limit",
     "set one group's own limits over the queue's group limits (a tenant's plan); "
     "'inherit' gives it the queue's again",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("queue", a.queue)->required();
       cmd.add_option("group", a.group)->required();
       cmd.add_option("--max-leased", a.own[0],
                      "at most this many of the group's jobs leased at once (0: no cap), or "
                      "inherit");
       cmd.add_option("--rate", a.own[1],
                      "at most this many claims of the group per --per seconds (0: none), or "
                      "inherit");
       cmd.add_option("--per", a.own[2], "the group rate's period in seconds, or inherit");
       cmd.footer(
           "Each setting left out keeps the group's own value. `fenceq stats` lists\n"
           "the queue's groups that have limits of their own.");
     },
     [](const Call& c, const Args& a) {
       if (!a.own[0] && !a.own[1] && !a.own[2]) {
         throw UsageError("group-limit: give --max-leased, --rate or --per");
       }
       const auto number = [](const std::string& v, const char* what) {
         char* end = nullptr;
         const double n = std::strtod(v.c_str(), &end);
         if (v.empty() || *end != '\0') {
           throw UsageError(std::string("group-limit: ") + what + " is a number or 'inherit', not " + v);
         }
         return n;
       };
       fenceq::GroupSettings s;
       for (int i = 0; i < 2; ++i) {
         auto& to = i == 0 ? s.max_leased : s.rate;
         if (!a.own[i]) continue;
         if (*a.own[i] == "inherit") {
           to = fenceq::kInherit;
         } else {
           const double n = number(*a.own[i], i == 0 ? "--max-leased" : "--rate");
           if (n != static_cast<double>(static_cast<std::int64_t>(n))) {
             throw UsageError("group-limit: a whole number or 'inherit', not " + *a.own[i]);
           }
           to = static_cast<std::int64_t>(n);
         }
       }
       if (a.own[2]) {
         if (*a.own[2] == "inherit") {
           s.per = fenceq::kInherit;
         } else {
           s.per = number(*a.own[2], "--per");
         }
       }
       return print_bool(c.client.group_config(a.queue, a.group, s));
     }},
    {"schedule", "periodic jobs: schedule set NAME CRON | delete NAME | list",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("action", a.action, "set, delete or list")
           ->required()
           ->check(CLI::IsMember({"set", "delete", "list"}));
       cmd.add_option("args", a.words, "set: NAME 'CRON'; delete: NAME");
       cmd.add_option("--tz", a.schedule.tz, "set: the IANA time zone CRON is read in (UTC)");
       cmd.add_option("-q,--queue", a.schedule.queue, "set: the jobs' queue (default)");
       cmd.add_option("--payload", a.payload, "set: each job's payload (text)");
       cmd.add_option("--priority", a.schedule.priority, "set: the jobs' priority");
       cmd.add_option("--max-attempts", a.schedule.max_attempts, "set: claims before dead");
       cmd.footer(
           "CRON has 5 fields: minute hour day-of-month month day-of-week, each *, N,\n"
           "N-M, a list of those with commas, any of them /STEP; months JAN-DEC and\n"
           "days SUN-SAT by name too; or @hourly @daily @weekly @monthly @yearly.\n"
           "Each tick enqueues one job NAME@YYYY-MM-DDTHH:MMZ (its time in UTC), once,\n"
           "whatever restarts or sidecars; after downtime only the latest missed tick.");
     },
     [](const Call& c, const Args& a) {
       if (a.action == "list") {
         if (!a.words.empty()) throw UsageError("schedule list takes no arguments");
         return print_schedules(c, c.client.schedule_list());
       }
       if (a.action == "delete") {
         if (a.words.size() != 1) throw UsageError("schedule delete NAME");
         return print_bool(c.client.schedule_delete(a.words[0]));
       }
       if (a.words.size() != 2) throw UsageError("schedule set NAME 'CRON' (quote the fields)");
       fenceq::ScheduleOptions o = a.schedule;
       if (a.payload) o.payload = fenceq::Payload{*a.payload, false};
       return print_bool(c.client.schedule_set(a.words[0], a.words[1], o));
     }},
    {"show", "print a job's whole record: queue, state, attempts, lease, error, result, payload",
     [](CLI::App& cmd, Args& a) { cmd.add_option("id", a.id)->required(); },
     [](const Call& c, const Args& a) {
       auto d = c.client.job(a.id);
       if (!d) return print_null();
       return print_detail(c, *d);
     }},
    {"results", "print the state and result of jobs (1 to 1000 ids): a fan-in's parents",
     [](CLI::App& cmd, Args& a) { cmd.add_option("ids", a.words, "job ids")->required(); },
     [](const Call& c, const Args& a) {
       if (a.words.size() > fenceq::protocol::kMaxResultIds) {
         throw UsageError("results takes at most 1000 ids");
       }
       const auto res = c.client.results(a.words);
       if (c.human) {
         fenceq::tool::print_results(std::cout, res);
         return kTrue;
       }
       json out = json::object();
       for (const auto& [id, o] : res) {
         out[id] = o ? json{{"state", fenceq::protocol::status_name(o->status)},
                            {"result", opt_json(o->result)}}
                     : json(nullptr);
       }
       std::cout << out.dump() << "\n";
       return kTrue;
     }},
    {"stats", "counts per queue and state, and the daemon's figures", no_options,
     [](const Call& c, const Args&) {
       auto st = c.client.stats();
       if (c.human) {
         fenceq::tool::print_stats(std::cout, st);
       } else {
         std::cout << stats_json(st).dump() << "\n";
       }
       return kTrue;
     }},
    {"top", "a live view of the queues and of the leases that end soonest (q quits)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("-i,--interval", a.top.interval, "seconds between refreshes (default 1)")
           ->check(seconds_in(0.1, 3600));
       cmd.add_flag("--once", a.top.once,
                    "print one frame (rates over --interval) and exit; also when stdout is "
                    "not a terminal");
       cmd.add_option("--leases", a.top.leases, "leases to show (default 10)")
           ->check(count_in(0, 1000));
     },
     [](const Call& c, const Args& a) {
       fenceq::tool::TopOptions to = a.top;
       to.call_timeout = c.options.timeout;
       to.connect = connector(c);
       return fenceq::tool::run_top(c.client, to);
     }},
    {"list", "jobs in id order or by age (a table on a terminal, else JSON lines)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("-q,--queue", a.queue_filter);
       cmd.add_option("-s,--state", a.state,
                      "ready, delayed, leased, blocked, suspended, done, dead or cancelled");
       cmd.add_option("-o,--owner", a.owner_filter,
                      "only the jobs whose owner (current or last lease) is this one");
       cmd.add_option("-n,--limit", a.list.limit, "at most this many (1..1000)");
       cmd.add_option("-p,--prefix", a.list.prefix, "only the ids that start with this");
       cmd.add_option("--key", a.list.key, "only the jobs of this unique key");
       cmd.add_option("--group", a.list.group, "only the jobs of this group (enqueue --group)");
       cmd.add_option("--order", a.list_order,
                      "id (default), created (oldest first) or -created (newest first)")
           ->check(CLI::IsMember({"id", "created", "-created"}));
       cmd.add_option("--after", a.list.after,
                      "the next page: the last row's id (with --after-created in created order)");
       cmd.add_option("--after-created", a.list.after_created,
                      "in created order, the last row's created (with --after)");
     },
     [](const Call& c, const Args& a) {
       fenceq::ListOptions lo = a.list;
       lo.queue = a.queue_filter;
       lo.order = *fenceq::protocol::order_from_name(a.list_order);
       if (a.state) {
         lo.status = fenceq::protocol::status_from_name(*a.state);
         if (!lo.status) {
           std::cerr << "fenceq: --state must be ready, delayed, leased, done, dead or cancelled\n";
           return kError;
         }
       }
       const auto jobs = list_jobs(c.client, lo, a.owner_filter);
       if (c.human) {
         fenceq::tool::print_job_table(std::cout, jobs, now_of(c));
       } else {
         for (const auto& j : jobs) std::cout << job_info_json(j).dump() << "\n";
       }
       return kTrue;
     }},
    {"purge", "remove done, dead and cancelled jobs finished long enough ago (prints how many)",
     [](CLI::App& cmd, Args& a) {
       // The daemon's own bound for older_than.
       cmd.add_option("older_than", a.older_than, "seconds (default 0 with a filter)")
           ->check(seconds_in(0, 1e12));
       bulk_options(cmd, a, "done, dead or cancelled (default: all three)");
     },
     [](const Call& c, const Args& a) {
       if (a.state || !a.bulk.prefix.empty() || a.bulk.group) {
         return run_bulk(a, [&](const auto& f) {
           return c.client.purge_many(a.queue_filter, f, a.older_than);
         });
       }
       std::cout << c.client.purge(a.older_than, a.queue_filter) << "\n";
       return kTrue;
     }},
    {"retention", "how long a queue keeps its finished jobs (the daemon removes them)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("queue", a.queue)->required();
       cmd.add_option("--done", a.keep[0], "seconds done jobs are kept, or 'forever'");
       cmd.add_option("--dead", a.keep[1], "seconds dead jobs are kept, or 'forever'");
       cmd.add_option("--cancelled", a.keep[2], "seconds cancelled jobs are kept, or 'forever'");
       cmd.footer(
           "Counted from when each job finished. Each one left out keeps its value;\n"
           "'forever' (the default) keeps the jobs until purged. `fenceq stats --json`\n"
           "shows the retentions and how many jobs each queue's removed.");
     },
     [](const Call& c, const Args& a) {
       fenceq::QueueSettings s;
       std::optional<double>* to[3] = {&s.keep_done, &s.keep_dead, &s.keep_cancelled};
       for (int i = 0; i < 3; ++i) {
         if (!a.keep[i]) continue;
         if (*a.keep[i] == "forever") {
           *to[i] = fenceq::kKeepForever;
           continue;
         }
         char* end = nullptr;
         const double v = std::strtod(a.keep[i]->c_str(), &end);
         if (a.keep[i]->empty() || *end != '\0' || !(v >= 0) || v > fenceq::protocol::kMaxKeepSeconds) {
           throw UsageError("retention: a number of seconds (0..1e10) or 'forever', not " + *a.keep[i]);
         }
         *to[i] = v;
       }
       if (!a.keep[0] && !a.keep[1] && !a.keep[2]) {
         throw UsageError("retention: give --done, --dead or --cancelled");
       }
       return print_bool(c.client.queue_config(a.queue, s));
     }},
    {"watch", "print the daemon's job events as they commit (fenceqd --events), one line each",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("-q,--queue", a.queue_filter, "only the events of this queue");
       cmd.add_option("--events", a.events,
                      "the daemon's --events endpoint (default ipc://var/fenceqd-events.sock)")
           ->envname("FENCEQ_EVENTS");
       cmd.add_option("-n,--count", a.count, "exit 0 after this many events")
           ->check(count_in(1, 1000000000));
       cmd.add_option("--for", a.for_seconds, "exit 0 after this many seconds")
           ->check(seconds_in(0, kMaxSeconds));
     },
     [](const Call& c, const Args& a) {
       const std::string endpoint = a.events.empty() ? "ipc://var/fenceqd-events.sock" : a.events;
       fenceq::Subscriber sub(endpoint, a.queue_filter, c.options.curve);
       const auto end = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(a.for_seconds > 0 ? a.for_seconds : 1e9));
       std::int64_t seen = 0;
       while (std::chrono::steady_clock::now() < end && (a.count == 0 || seen < a.count)) {
         auto e = sub.next(std::chrono::milliseconds(200));
         if (!e) continue;
         ++seen;
         if (c.human) {
           std::cout << "#" << e->seq << " " << e->event << " " << e->queue << " " << e->id
                     << " fence " << e->fence << (e->owner ? " owner " + *e->owner : "")
                     << (e->group ? " group " + *e->group : "") << std::endl;
           continue;
         }
         json j{{"seq", e->seq}, {"t", e->t},         {"event", e->event},
                {"id", e->id},   {"queue", e->queue}, {"fence", e->fence}};
         if (e->owner) j["owner"] = *e->owner;
         if (e->group) j["group"] = *e->group;
         std::cout << j.dump() << std::endl;
       }
       if (sub.missed() > 0) {
         std::cerr << "fenceq watch: " << sub.missed()
                   << " events were dropped for this subscriber (gaps in seq)\n";
       }
       return kTrue;
     }},
    {"backup", "copy the daemon's SQLite file (on its host, while it serves) to FILE, marked "
               "as a backup",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("file", a.backup.file, "the copy (refused if it exists, unless --force)")
           ->required();
       cmd.add_option("--db", a.backup.db, "the daemon's --db file (default var/fenceq.db)");
       cmd.add_flag("--force", a.backup.force, "overwrite FILE if it exists");
       cmd.add_option("--pages", a.backup.pages, "pages copied a step (default 1000)")
           ->check(CLI::Range(1, 1000000));
       cmd.add_option("--pause", a.backup.pause_ms, "milliseconds between steps (default 5)")
           ->check(CLI::Range(0, 10000));
       cmd.footer(
           "Reads the file itself, read only, in one read transaction (SQLite's online\n"
           "backup API, a step at a time): the copy is the database as of one commit,\n"
           "and the daemon serves on. The copy is marked (fenceq_meta's backup_taken):\n"
           "fenceqd started on it raises every fence to a new epoch and ends every\n"
           "lease, so no fence is handed out twice (docs/operating.md, \"Backup, restore\n"
           "and moving to PostgreSQL\"). Progress on stderr when it is a terminal; the\n"
           "copy and its folder are fsynced before the last line, one JSON object:\n"
           "{\"backup\",\"of\",\"taken\",\"bytes\",\"seconds\",\"mb_per_s\"}.");
     },
     [](const Call&, const Args& a) { return fenceq::tool::run_backup(a.backup); }},
    {"migrate", "move a stopped daemon's SQLite store into PostgreSQL (fences in a new epoch)",
     [](CLI::App& cmd, Args& a) {
       cmd.add_option("--to", a.migrate.to, "the PostgreSQL database: a postgresql:// URI")
           ->required();
       cmd.add_option("--db", a.migrate.db,
                      "the stopped daemon's --db file (default var/fenceq.db)");
       cmd.add_option("--fenceqd", a.migrate.fenceqd,
                      "the fenceqd to run (default: the one beside this tool, else on PATH)");
       cmd.footer(
           "Runs fenceqd --db FILE --migrate-to URI. Every job (state, attempts, payload,\n"
           "headers, result, error, key, group, edges), schedule (with its last tick),\n"
           "queue and group setting and retention moves in ONE PostgreSQL transaction:\n"
           "a run killed at any point leaves nothing, and running it again starts over.\n"
           "Fences move to a new epoch and every lease ends (C1.5): a worker still\n"
           "holding one is refused. The target's fenceq schema must be empty. Before it\n"
           "commits, both stores' counts are compared. Prints one JSON line: the rows\n"
           "moved per table, the jobs by state, \"fence_epoch\", \"check\":\"agree\".\n"
           "Then start the sidecars on the URI (docs/operating.md, \"Backup, restore\n"
           "and moving to PostgreSQL\").");
     },
     [](const Call&, const Args& a) { return fenceq::tool::run_migrate(a.migrate); }},
    {"metrics", "the daemon's figures, Prometheus text format", no_options,
     [](const Call& c, const Args&) {
       std::cout << c.client.metrics();
       return kTrue;
     }},
    {"work", "run COMMAND for each job of a queue: payload on stdin, stdout the result",
     [](CLI::App& cmd, Args& a) {
       auto& wo = a.work;
       cmd.add_option("-q,--queue", wo.queue, "queue (default: default)");
       cmd.add_option("--ttl", wo.ttl, "lease seconds, renewed while COMMAND runs (default 30)")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--owner", wo.owner, "owner name (default: HOST:PID)");
       cmd.add_option("-w,--wait", wo.wait, "seconds to wait for a job (default 30)")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--max-jobs", wo.max_jobs, "stop after this many jobs")
           ->check(CLI::NonNegativeNumber);
       cmd.add_flag("--exit-when-empty", wo.exit_when_empty, "stop when a wait finds no job");
       cmd.add_option("--prefetch", wo.prefetch,
                      "jobs held at once, 1 to 1000 (default 1: one at a time; see below)")
           ->check(count_in(1, static_cast<long>(fenceq::protocol::kMaxBatchItems)));
       cmd.add_option("--retry-in", wo.retry_in, "on failure, seconds before a retry")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--snooze", wo.snooze,
                      "when COMMAND exits 75 (EX_TEMPFAIL): seconds before its job can be "
                      "claimed again, its attempt given back (default 60)")
           ->check(seconds_in(0, kMaxSeconds));
       cmd.add_option("--kill-after", wo.kill_after,
                      "when COMMAND must stop (SIGTERM or SIGINT to fenceq, lease lost): seconds "
                      "from SIGTERM to SIGKILL to its process group (default 10)")
           ->check(seconds_in(0, kMaxKillAfter));
       cmd.add_option("command", wo.command, "the command and its arguments (after --)")
           ->required();
       cmd.footer(
           "--prefetch N (N > 1) claims up to N jobs in one request and runs them one\n"
           "after the other; all the leases it holds (waiting, running, finished) are\n"
           "renewed in one request, failures reported at once, and the successes\n"
           "completed together with the claim of the next ones. Use it for many short\n"
           "commands, where the round trips cost more than the work. Not for long\n"
           "commands: the jobs taken wait leased (renewed, their payloads in memory)\n"
           "while one runs, and no other worker can take them meanwhile. A job whose\n"
           "lease is lost while it waits is dropped without running its command.\n"
           "\n"
           "COMMAND runs in a process group of its own, the job's payload on its stdin,\n"
           "with these in its environment:\n"
           "  FENCEQ_JOB_ID    the job's id\n"
           "  FENCEQ_FENCE     the fence of this lease: pass it to anything it writes\n"
           "                   outside fenceq, so a stale write can be refused there too\n"
           "  FENCEQ_ATTEMPTS  the claims of this job so far, this one included\n"
           "  FENCEQ_QUEUE     the queue\n"
           "  FENCEQ_OWNER     this worker's owner name\n"
           "Exit 0: its stdout is stored as the result. Exit 75 (EX_TEMPFAIL, \"try again\n"
           "later\": a rate limit, a resource not there yet): the job is snoozed, claimable\n"
           "again after --snooze seconds with its attempt given back and no error kept,\n"
           "however often that happens. Otherwise the job fails with its stderr as the\n"
           "error (retried after --retry-in or the backoff, dead when its attempts are\n"
           "used up). From a job's 10th attempt on, a --retry-in shorter than the\n"
           "daemon's backoff (512 s at the 10th) is raised to it.\n"
           "While COMMAND runs, its job's state is read every second: a cancel (or any\n"
           "loss of the lease) stops it within about a second, as SIGTERM does.");
     },
     [](const Call& c, const Args& a) {
       // A reader gone (a command that does not read its stdin, a closed
       // stdout or stderr pipe) is an EPIPE error, never the worker's death:
       // killed, it would leave its job leased and its command running. (The
       // other subcommands die of SIGPIPE as any filter does: `| head -1`.)
       ::signal(SIGPIPE, SIG_IGN);
       fenceq::tool::WorkOptions wo = a.work;
       wo.call_timeout = c.options.timeout;
       wo.connect = connector(c);
       return fenceq::tool::run_worker(c.client, wo);
     }},
};

// The edit distance between two words: insertions, deletions, substitutions
// and swaps of two neighbours count one each ("wrok" is 1 from "work").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// What to say of a word in the subcommand's place that names none: the
// nearest subcommands when one is close enough to be what was meant (about
// one typo in three letters, at most three), else where the list is.
std::string unknown_subcommand(const std::string& word) {
  const std::size_t close = std::clamp<std::size_t>(word.size() / 3, 1, 3);
  std::size_t best = close + 1;
  std::vector<std::string> nearest;
  // A word much longer than any subcommand is no typo of one (and costs
  // nothing to measure).
  if (word.size() <= 64) {
    for (const auto& s : kSubcommands) {
      const std::size_t d = edit_distance(word, s.name);
      if (d < best) {
        best = d;
        nearest.clear();
      }
      if (d == best) nearest.emplace_back(s.name);
    }
  }
  std::string text = "unknown subcommand '" + fenceq::tool::escape_for_log(word) + "'";
  if (nearest.empty()) return text + " (fenceq --help lists them)";
  text += "; did you mean ";
  for (std::size_t i = 0; i < nearest.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == nearest.size() ? " or " : ", ") + ("'" + nearest[i] + "'");
  }
  return text + "?";
}

// A word as a shell reads it back: as it is when it has nothing special to a
// shell, else in single quotes.
std::string shell_word(const std::string& w) {
  const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("-_./:=,+@%", ch) != nullptr;
  });
  if (plain) return w;
  std::string quoted = "'";
  for (char ch : w) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

// `fenceq work --queue q grep -q z`: without `--` before it, the command's
// own options are taken for fenceq's (-q is --queue) or refused as unknown.
// When a word after the command's first one looks like an option and no `--`
// was given, the usage error to give instead: the same line with `--` where
// it belongs. `args`: the command line after the program's name; `command`:
// what work's COMMAND positional took (also after a failed parse).
std::optional<std::string> work_without_dashes(const std::vector<std::string>& args,
                                               const std::vector<std::string>& command) {
  if (command.empty() || std::find(args.begin(), args.end(), "--") != args.end()) {
    return std::nullopt;
  }
  const auto work = std::find(args.begin(), args.end(), "work");
  if (work == args.end()) return std::nullopt;
  const auto first = std::find(work + 1, args.end(), command.front());
  if (first == args.end()) return std::nullopt;
  const bool option_like = std::any_of(
      first + 1, args.end(), [](const std::string& w) { return w.size() > 1 && w[0] == '-'; });
  if (!option_like) return std::nullopt;
  std::string line = "fenceq";
  for (auto it = args.begin(); it != args.end(); ++it) {
    if (it == first) line += " --";
    line += " " + shell_word(*it);
  }
  return "work: put the command after --, or its options are taken for fenceq's own: " +
         fenceq::tool::escape_for_log(line);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fenceq: command-line client for fenceqd (exit 0: success, 1: refused, 2: error)",
               "fenceq"};
  app.require_subcommand(1);
  // The global options are taken after the subcommand too (`fenceq show ID
  // --json`): what a subcommand does not know goes up to them. Set before the
  // subcommands are added, which inherit it.
  app.fallthrough();
  std::string endpoint;  // empty: the C++ client's order (fenceq::resolve_endpoint)
  double timeout = 5.0;
  std::optional<double> now;
  bool as_json = false;
  app.add_flag("--json", as_json,
               "JSON even on a terminal (the default when stdout is not one: pipes, files)");
  app.add_option("-e,--endpoint", endpoint,
                 "daemon endpoint (default: $FENCEQ_ENDPOINT, else the service's "
                 "ipc:///run/fenceq/fenceqd.sock if there, else ipc://var/fenceqd.sock)");
  app.add_option("-t,--timeout", timeout, "seconds to wait for a reply (default 5)")
      ->check(seconds_in(0, kMaxTimeout, true));
  app.add_option("--now", now, "the request's time, for a daemon in client clock mode")
      ->check(seconds_in(-std::numeric_limits<double>::max(), std::numeric_limits<double>::max()));
  std::optional<std::string> curve_key, curve_server_key;
  auto* key_opt = app.add_option("--curve-key", curve_key,
                                 "tcp:// with CURVE: this client's key file (fenceqd "
                                 "--curve-keygen FILE)")
                      ->envname("FENCEQ_CURVE_KEY");
  auto* server_opt = app.add_option("--curve-server-key", curve_server_key,
                                    "tcp:// with CURVE: the daemon's public key (40 Z85 characters)")
                         ->envname("FENCEQ_CURVE_SERVER_KEY");
  key_opt->needs(server_opt);
  server_opt->needs(key_opt);

  constexpr std::size_t n = std::size(kSubcommands);
  std::vector<Args> args(n);
  std::vector<CLI::App*> commands(n);
  for (std::size_t i = 0; i < n; ++i) {
    commands[i] = app.add_subcommand(kSubcommands[i].name, kSubcommands[i].description);
    kSubcommands[i].options(*commands[i], args[i]);
  }

  // Usage errors the tool words itself, in place of CLI11's (parsed or not):
  // a typo of a subcommand, a work command without `--` before it.
  const std::vector<std::string> words(argv + std::min(argc, 1), argv + argc);
  const auto own_usage_error = [&]() -> std::optional<std::string> {
    if (app.get_subcommands().empty()) {
      for (const auto& w : app.remaining()) {
        if (!w.empty() && w[0] != '-') return unknown_subcommand(w);
      }
      return std::nullopt;
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (std::string_view(kSubcommands[i].name) != "work" || !commands[i]->parsed()) continue;
      if (const auto* command = commands[i]->get_option_no_throw("command")) {
        return work_without_dashes(words, command->results());
      }
    }
    return std::nullopt;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (auto why = own_usage_error()) {
      std::cerr << "fenceq: " << *why << "\n";
      return kError;
    }
    if (dynamic_cast<const CLI::ValidationError*>(&e)) {
      // One line naming the option; CLI11's own exit adds a second.
      std::cerr << "fenceq: " << fenceq::tool::escape_for_log(e.what()) << "\n";
      return kError;
    }
    int rc = app.exit(e);
    return rc == 0 ? 0 : kError;
  }
  if (auto why = own_usage_error()) {
    std::cerr << "fenceq: " << *why << "\n";
    return kError;
  }

  if (const auto chosen = fenceq::resolve_endpoint(endpoint).endpoint;
      chosen.rfind("tcp://", 0) == 0 && !curve_key) {
    std::cerr << "fenceq: " << chosen
              << ": fenceqd serves tcp:// only with CURVE: give --curve-key FILE and "
                 "--curve-server-key KEY (or FENCEQ_CURVE_KEY and FENCEQ_CURVE_SERVER_KEY)\n";
    return kError;
  }
  try {
    fenceq::ClientOptions options;
    // At least 1 ms: a positive timeout that rounds to 0 would never wait.
    options.timeout = std::chrono::milliseconds(std::max(1LL, std::llround(timeout * 1000)));
    options.choose_endpoint = "give --endpoint";
    if (curve_key) options.curve = bounded_curve_keys(*curve_key, *curve_server_key);
    fenceq::Client client(endpoint, options);
    for (std::size_t i = 0; i < n; ++i) {
      if (commands[i]->parsed()) {
        const bool human = !as_json && ::isatty(1);
        return kSubcommands[i].run(Call{client, now, endpoint, options, human}, args[i]);
      }
    }
  } catch (const std::exception& e) {
    // Error texts may quote an id or other input: one line, escaped.
    std::cerr << "fenceq: " << fenceq::tool::escape_for_log(e.what()) << "\n";
    return kError;
  }
  return kError;
}
