#include "pg_store.hpp"

#include <endian.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace fenceq::daemon {
namespace {

using Kind = StoreError::Kind;

// Type OIDs of the built-in types we send and read (pg_type.dat).
constexpr Oid kBool = 16, kBytea = 17, kInt8 = 20, kInt2 = 21, kInt4 = 23, kText = 25,
              kFloat4 = 700, kFloat8 = 701;

// fenceq_schema_version: the migrations applied, one row each. This build
// knows version 1 and refuses a database marked with a later one.
constexpr int kSchemaVersion = 1;

// A COMMIT notifies the other sidecars of at most this many queues by name;
// beyond, one notification without a name wakes all their parked claims.
constexpr std::size_t kMaxNotifyQueues = 16;

// Version 1. The contract's columns (C1.1) in PostgreSQL's types (TEXT ->
// text, REAL -> double precision, INTEGER -> bigint for fences and counters,
// integer for the 0/1 flags); later columns have defaults so that a plain
// INSERT INTO jobs(id) works. id and queue compare bytewise (COLLATE "C"),
// as SQLite does: list pages and stats sort the same on every database.
// ADD COLUMN IF NOT EXISTS upgrades a jobs table of the contract's six
// columns in place. The payload keeps whether it was sent as msgpack bin
// (payload_binary) or str, as SQLite keeps BLOB or TEXT. seq comes from a
// sequence: enqueue order across every sidecar, for FIFO among equal
// priorities.
constexpr const char* kSchemaV1 = R"sql(
CREATE SEQUENCE IF NOT EXISTS jobs_seq;
CREATE TABLE IF NOT EXISTS jobs(
  id     text COLLATE "C" PRIMARY KEY,
  owner  text,
  until  double precision NOT NULL DEFAULT 0,
  fence  bigint NOT NULL DEFAULT 0,
  result text,
  done   integer NOT NULL DEFAULT 0
);
ALTER TABLE jobs
  ADD COLUMN IF NOT EXISTS queue          text COLLATE "C" NOT NULL DEFAULT 'default',
  ADD COLUMN IF NOT EXISTS payload        bytea,
  ADD COLUMN IF NOT EXISTS payload_binary boolean NOT NULL DEFAULT true,
  ADD COLUMN IF NOT EXISTS priority       bigint NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS not_before     double precision NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS attempts       bigint NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS max_attempts   bigint NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS dead           integer NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS error          text,
  ADD COLUMN IF NOT EXISTS seq            bigint NOT NULL DEFAULT nextval('jobs_seq'),
  ADD COLUMN IF NOT EXISTS created        double precision NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS finished       double precision NOT NULL DEFAULT 0;
ALTER SEQUENCE jobs_seq OWNED BY jobs.seq;
-- claim_next: the open jobs of a queue, most urgent first. Leased and delayed
-- jobs stay in it and are stepped over; done and dead ones leave it.
-- `queue IS NOT NULL` (always true) is in the predicate so that only a query
-- naming the queue can use this index: the statements on one id (complete,
-- renew, ...) say `done = 0 AND dead = 0` too, and a generic plan chose to
-- walk this whole index for them rather than look the id up (3-6 ms a
-- complete with 20,000 jobs, before the table had statistics).
CREATE INDEX IF NOT EXISTS jobs_next ON jobs(queue, priority DESC, seq)
  WHERE done = 0 AND dead = 0 AND queue IS NOT NULL;
-- Jobs on their last allowed attempt, by lease end, for reap_exhausted().
CREATE INDEX IF NOT EXISTS jobs_last_attempt ON jobs(until)
  WHERE done = 0 AND dead = 0 AND max_attempts > 0 AND attempts >= max_attempts;
-- Finished jobs by finishing time, for purge.
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs(finished) WHERE done = 1 OR dead = 1;
-- The fences of purged ids (C1.2): an id enqueued again continues from here.
CREATE TABLE IF NOT EXISTS purged_fences(
  id    text COLLATE "C" PRIMARY KEY,
  fence bigint NOT NULL
);
-- The server clock's high-water mark (C2.3), and later keys.
CREATE TABLE IF NOT EXISTS fenceq_meta(
  key   text PRIMARY KEY,
  value double precision
);
INSERT INTO fenceq_schema_version(version) VALUES (1);
)sql";

// Claimable at `now`: open, lease ended (C3.3), delay passed, attempts left;
// the guard on the fence's maximum keeps fence + 1 from overflowing.
std::string claimable(const char* now) {
  return std::string("done = 0 AND dead = 0 AND until <= ") + now + " AND not_before <= " + now +
         " AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807";
}

// A job's state at `now`, as list and stats report it.
std::string status_of(const char* now) {
  return std::string(
             "CASE WHEN done = 1 THEN 'done' "
             "WHEN dead = 1 OR (max_attempts > 0 AND attempts >= max_attempts AND until <= ") +
         now + ") THEN 'dead' WHEN until > " + now + " THEN 'leased' WHEN not_before > " + now +
         " THEN 'delayed' ELSE 'ready' END";
}

// A lease that is current at $4 (C3.4, C3.5): ($1 id, $2 owner, $3 fence).
#define FENCEQ_PG_CURRENT \
  "id = $1 AND owner = $2 AND fence = $3 AND done = 0 AND dead = 0 AND until > $4"
#define FENCEQ_PG_CURRENT_J                                                              \
  "j.id = $1 AND j.owner = $2 AND j.fence = $3 AND j.done = 0 AND j.dead = 0 AND j.until > $4"

// claim_next ($1 queue, $2 owner, $3 until, $4 now): claim as claim does the
// most urgent claimable job of the queue, found through jobs_next. SKIP
// LOCKED steps over a job another sidecar's open transaction holds, so two
// sidecars never wait on (or take) the same job.
std::string claim_next_sql() {
  return "UPDATE jobs SET owner = $2, until = $3, fence = fence + 1, attempts = attempts + 1 "
         "WHERE id = (SELECT id FROM jobs WHERE queue = $1 AND " +
         claimable("$4") +
         " ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED) "
         "RETURNING id, fence, payload, payload_binary, attempts";
}
const Oid kClaimNextTypes[] = {kText, kText, kFloat8, kFloat8};

enum Stmt : int {
  kEnqueue, kUnpurge, kState, kClaim, kClaimNext, kRenew, kComplete, kRelease, kFail, kCheck,
  kUnclaim, kRetry, kReap, kPurge, kList, kStats, kGetMeta, kSetMeta, kNextClaimable, kStmtCount
};

struct StmtDef {
  Stmt id;
  std::string sql;
  std::vector<Oid> types;
};

const std::vector<StmtDef>& statements() {
  static const std::vector<StmtDef> defs = [] {
    std::vector<StmtDef> d = {
        // C3.1: ON CONFLICT DO NOTHING, so a repeated enqueue never touches a
        // lease. An id purged before continues from its kept fence (C1.2);
        // kUnpurge then takes the kept fence out (see enqueue()).
        {kEnqueue,
         "INSERT INTO jobs(id, queue, payload, payload_binary, priority, not_before, "
         "max_attempts, created, fence) VALUES($1, $2, $3, $4, $5, $6, $7, $8, "
         "COALESCE((SELECT fence FROM purged_fences WHERE id = $1), 0)) "
         "ON CONFLICT (id) DO NOTHING RETURNING fence",
         {kText, kText, kBytea, kBool, kInt8, kFloat8, kInt8, kFloat8}},
        {kUnpurge,
         "WITH p AS (DELETE FROM purged_fences WHERE id = $1 RETURNING fence) "
         "UPDATE jobs SET fence = p.fence FROM p WHERE jobs.id = $1 AND jobs.fence < p.fence",
         {kText}},
        {kState, "SELECT id, owner, until, fence, result, done FROM jobs WHERE id = $1", {kText}},
        // C3.3: claimable when not done and the lease ended (until <= now: at
        // the boundary now == until it can be claimed again). One UPDATE: a
        // concurrent claim by another sidecar waits for this row, then finds
        // it leased (READ COMMITTED re-checks the condition on the new row).
        {kClaim,
         "UPDATE jobs SET owner = $2, until = $3, fence = fence + 1, attempts = attempts + 1 "
         "WHERE id = $1 AND " + claimable("$4") + " RETURNING fence",
         {kText, kText, kFloat8, kFloat8}},
        {kClaimNext, claim_next_sql(), {kText, kText, kFloat8, kFloat8}},
        // C3.4: only the current, unexpired lease; an expired lease is never revived.
        // The lease end before, to tell the other sidecars when it came
        // sooner (their parked claims may wait for it).
        {kRenew,
         "UPDATE jobs j SET until = $5 FROM (SELECT until AS before FROM jobs WHERE id = $1) o "
         "WHERE " FENCEQ_PG_CURRENT_J " RETURNING j.queue, o.before > $5",
         {kText, kText, kInt8, kFloat8, kFloat8}},
        // C3.5: same guard as renew; the stored result is kept otherwise.
        {kComplete, "UPDATE jobs SET result = $5, done = 1, finished = $4 WHERE " FENCEQ_PG_CURRENT,
         {kText, kText, kInt8, kFloat8, kText}},
        // C3.6: the fence is kept, never reset (C1.2).
        {kRelease,
         "UPDATE jobs SET owner = NULL, until = 0 "
         "WHERE id = $1 AND owner = $2 AND fence = $3 AND done = 0 AND dead = 0 RETURNING queue",
         {kText, kText, kInt8}},
        // Same guard as complete. Out of attempts: dead; else claimable after
        // the backoff ($6, or 2^(attempts-1) s capped at an hour).
        {kFail,
         "UPDATE jobs SET error = $5, owner = NULL, until = 0, "
         "dead = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN 1 ELSE 0 END, "
         "finished = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN $4 "
         "ELSE finished END, "
         "not_before = $4 + COALESCE($6, LEAST(3600::float8, "
         "(1::bigint << LEAST(GREATEST(attempts - 1, 0), 12)::integer)::float8)) "
         "WHERE " FENCEQ_PG_CURRENT " RETURNING dead, queue",
         {kText, kText, kInt8, kFloat8, kText, kFloat8}},
        {kCheck, "SELECT 1 FROM jobs WHERE " FENCEQ_PG_CURRENT, {kText, kText, kInt8, kFloat8}},
        {kUnclaim,
         "UPDATE jobs SET owner = NULL, until = 0, attempts = GREATEST(attempts - 1, 0) "
         "WHERE id = $1 AND owner = $2 AND fence = $3 AND done = 0 AND dead = 0 RETURNING queue",
         {kText, kText, kInt8}},
        {kRetry,
         "UPDATE jobs SET dead = 0, attempts = 0, not_before = 0, finished = 0, owner = NULL, "
         "until = 0 WHERE id = $1 AND done = 0 AND (dead = 1 OR (max_attempts > 0 AND "
         "attempts >= max_attempts AND until <= $2)) RETURNING queue",
         {kText, kFloat8}},
        {kReap,
         "UPDATE jobs SET dead = 1, finished = $1, "
         "error = COALESCE(error, 'the last allowed attempt ended without a complete') "
         "WHERE done = 0 AND dead = 0 AND max_attempts > 0 AND attempts >= max_attempts "
         "AND until <= $1",
         {kFloat8}},
        // One statement: the rows deleted are exactly the rows whose fences are
        // kept, whatever other sidecars commit meanwhile (C1.2).
        {kPurge,
         "WITH del AS (DELETE FROM jobs WHERE (done = 1 OR dead = 1) AND finished <= $1 "
         "AND ($2::text IS NULL OR queue = $2) RETURNING id, fence), "
         "keep AS (INSERT INTO purged_fences(id, fence) SELECT id, fence FROM del "
         "ON CONFLICT (id) DO UPDATE SET fence = GREATEST(purged_fences.fence, excluded.fence)) "
         "SELECT count(*) FROM del",
         {kFloat8, kText}},
        {kList,
         "SELECT id, queue, st, priority, attempts, max_attempts, fence, owner, until, "
         "not_before, error FROM (SELECT id, queue, " + status_of("$2") +
             " AS st, priority, attempts, max_attempts, fence, owner, until, not_before, error "
             "FROM jobs WHERE id > $1 AND ($3::text IS NULL OR queue = $3)) j "
             "WHERE ($4::text IS NULL OR st = $4) ORDER BY id LIMIT $5",
         {kText, kFloat8, kText, kText, kInt8}},
        {kStats,
         "SELECT queue, st, count(*), min(ready_since) FROM (SELECT queue, " + status_of("$1") +
             " AS st, GREATEST(created, not_before) AS ready_since FROM jobs) j "
             "GROUP BY queue, st ORDER BY queue",
         {kFloat8}},
        {kGetMeta, "SELECT value FROM fenceq_meta WHERE key = $1", {kText}},
        // Never lowers a mark: another sidecar may have stored a higher one.
        {kSetMeta,
         "INSERT INTO fenceq_meta(key, value) VALUES($1, $2) ON CONFLICT (key) "
         "DO UPDATE SET value = GREATEST(fenceq_meta.value, excluded.value)",
         {kText, kFloat8}},
        // When a job of the queue becomes claimable by time alone (its lease
        // or delay ends), through jobs_next: the queue's open jobs only.
        {kNextClaimable,
         "SELECT min(GREATEST(until, not_before)) FROM jobs WHERE queue = $1 AND done = 0 AND "
         "dead = 0 AND queue IS NOT NULL AND (max_attempts = 0 OR attempts < max_attempts) AND "
         "GREATEST(until, not_before) > $2",
         {kText, kFloat8}},
    };
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (d[i].id != static_cast<Stmt>(i)) std::abort();  // the table is out of order
    }
    return d;
  }();
  return defs;
}

const char* stmt_name(int s) {
  static const auto names = [] {
    std::array<std::string, kStmtCount> n;
    for (int i = 0; i < kStmtCount; ++i) n[i] = "fenceq_" + std::to_string(i);
    return n;
  }();
  return names[static_cast<std::size_t>(s)].c_str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// PostgreSQL's text cannot hold U+0000, which strict UTF-8 (the codec's)
// allows. Such a string cannot be stored: refused before anything is sent,
// so the transaction stays usable.
[[noreturn]] void refuse_nul(const char* field) {
  throw StoreError(std::string("PostgreSQL text cannot hold U+0000: field '") + field +
                       "' contains a NUL character; nothing was applied",
                   0, Kind::internal);
}

}  // namespace

std::optional<std::string> PgStore::unstorable(const protocol::Request& r) const {
  using protocol::Op;
  switch (r.op) {
    case Op::enqueue:
      if (has_nul(r.id)) return "id";
      if (has_nul(r.queue)) return "queue";
      return std::nullopt;
    case Op::claim:
    case Op::claim_next:
      if (has_nul(r.owner)) return "owner";
      return std::nullopt;
    case Op::complete:
    case Op::complete_next:
      if (has_nul(r.owner)) return "owner";
      if (r.result && has_nul(*r.result)) return "result";
      return std::nullopt;
    case Op::fail:
      if (has_nul(r.error)) return "error";
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

namespace {

Kind classify(const std::string& sqlstate, bool connection_lost) {
  if (connection_lost) return Kind::unavailable;
  if (sqlstate.size() == 5) {
    // 08: connection exceptions. 57P01-03: admin / crash shutdown, cannot
    // connect now. 25006: a read-only transaction, i.e. we are on a standby
    // after a failover. 53300: too many connections.
    if (sqlstate.starts_with("08") || sqlstate == "57P01" || sqlstate == "57P02" ||
        sqlstate == "57P03" || sqlstate == "25006" || sqlstate == "53300") {
      return Kind::unavailable;
    }
    // lock_timeout, statement_timeout: another session held a row too long
    // (a stalled sidecar) or the server is overloaded; the connection is fine.
    if (sqlstate == "55P03" || sqlstate == "57014") return Kind::unavailable;
    if (sqlstate == "40001" || sqlstate == "40P01") return Kind::retry;
  }
  return Kind::internal;
}

// A failed first connection that a retry will not cure: the daemon should
// stop with the server's message rather than serve `unavailable` forever.
bool config_error(PGconn* c, const std::string& msg) {
  if (PQconnectionNeedsPassword(c)) return true;
  for (const char* m : {"authentication failed", "does not exist", "pg_hba.conf",
                        "no password supplied", "permission denied", "not permitted to log in",
                        "unrecognized configuration parameter", "invalid value for parameter"}) {
    if (msg.find(m) != std::string::npos) return true;
  }
  return false;
}

void log_notice(void*, const char* message) {
  spdlog::debug("postgresql: {}", trim(message ? message : ""));
}

double wall_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// The URI (or key=value string) without its password.
std::string mask_password(const std::string& s) {
  std::string out = s;
  if (out.starts_with("postgresql://") || out.starts_with("postgres://")) {
    std::size_t start = out.find("://") + 3;
    std::size_t end = out.find_first_of("/?", start);
    if (end == std::string::npos) end = out.size();
    std::size_t at = out.rfind('@', end - 1);
    if (end > start && at != std::string::npos && at >= start) {
      std::size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
    std::size_t q = out.find('?');
    while (q != std::string::npos) {
      std::size_t key = q + 1;
      std::size_t amp = out.find('&', key);
      std::size_t stop = amp == std::string::npos ? out.size() : amp;
      if (out.compare(key, 9, "password=") == 0 && key + 9 <= stop) {
        out.replace(key + 9, stop - key - 9, "***");
        stop = key + 12;
      }
      q = stop < out.size() ? stop : std::string::npos;
    }
    return out;
  }
  // key = value pairs; a value may be single-quoted with \ escapes.
  std::size_t i = 0;
  while ((i = out.find("password", i)) != std::string::npos) {
    bool word_start = i == 0 || out[i - 1] == ' ' || out[i - 1] == '\t';
    std::size_t j = i + 8;
    while (j < out.size() && (out[j] == ' ' || out[j] == '\t')) ++j;
    if (!word_start || j >= out.size() || out[j] != '=') {
      i += 8;
      continue;
    }
    ++j;
    while (j < out.size() && (out[j] == ' ' || out[j] == '\t')) ++j;
    std::size_t v = j;
    if (j < out.size() && out[j] == '\'') {
      ++j;
      while (j < out.size() && out[j] != '\'') j += out[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, out.size());
    } else {
      while (j < out.size() && out[j] != ' ' && out[j] != '\t') ++j;
    }
    out.replace(v, j - v, "***");
    i = v + 3;
  }
  return out;
}

// Binary columns of a result.
std::string_view bytes_at(const PGresult* r, int row, int col) {
  return {PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col))};
}

std::optional<std::string> text_at(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return std::nullopt;
  return std::string(bytes_at(r, row, col));
}

[[noreturn]] void bad_column(const PGresult* r, int col) {
  throw StoreError(std::string("postgresql: unexpected type ") + std::to_string(PQftype(r, col)) +
                       " of column '" + (PQfname(r, col) ? PQfname(r, col) : "?") + "'",
                   0, Kind::internal);
}

template <typename U>
U be_at(std::string_view b) {
  U v;
  std::memcpy(&v, b.data(), sizeof v);
  if constexpr (sizeof(U) == 8) return be64toh(v);
  if constexpr (sizeof(U) == 4) return be32toh(v);
  if constexpr (sizeof(U) == 2) return be16toh(v);
  return v;
}

std::int64_t int_at(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  auto b = bytes_at(r, row, col);
  switch (PQftype(r, col)) {
    case kInt8:
      if (b.size() == 8) return static_cast<std::int64_t>(be_at<std::uint64_t>(b));
      break;
    case kInt4:
      if (b.size() == 4) return static_cast<std::int32_t>(be_at<std::uint32_t>(b));
      break;
    case kInt2:
      if (b.size() == 2) return static_cast<std::int16_t>(be_at<std::uint16_t>(b));
      break;
    case kBool:
      if (b.size() == 1) return b[0] != 0;
      break;
  }
  bad_column(r, col);
}

double double_at(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  auto b = bytes_at(r, row, col);
  switch (PQftype(r, col)) {
    case kFloat8:
      if (b.size() == 8) {
        std::uint64_t bits = be_at<std::uint64_t>(b);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return d;
      }
      break;
    case kFloat4:
      if (b.size() == 4) {
        std::uint32_t bits = be_at<std::uint32_t>(b);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
      }
      break;
    case kInt8:
    case kInt4:
    case kInt2: return static_cast<double>(int_at(r, row, col));
  }
  bad_column(r, col);
}

bool ok(const PGresult* r) {
  if (!r) return false;
  auto st = PQresultStatus(r);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

}  // namespace

// Parameters of one statement, all in binary format: strings as their bytes
// (no terminator: a length is sent), numbers big-endian. Views must outlive
// the statement's execution; numbers are kept here.
class PgParams {
 public:
  static constexpr int kMax = 8;
  PgParams() = default;
  PgParams(const PgParams&) = delete;
  PgParams& operator=(const PgParams&) = delete;

  PgParams& text(std::string_view v) { return bytes(v.empty() ? "" : v.data(), v.size()); }
  PgParams& bytea(std::string_view v) { return text(v); }
  PgParams& opt_text(const std::optional<std::string>& v) { return v ? text(*v) : null(); }
  PgParams& null() { return bytes(nullptr, 0); }
  PgParams& i8(std::int64_t v) {
    std::uint64_t be = htobe64(static_cast<std::uint64_t>(v));
    std::memcpy(nums_[n_].data(), &be, 8);
    return bytes(nums_[n_].data(), 8);
  }
  PgParams& f8(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    bits = htobe64(bits);
    std::memcpy(nums_[n_].data(), &bits, 8);
    return bytes(nums_[n_].data(), 8);
  }
  PgParams& opt_f8(std::optional<double> v) { return v ? f8(*v) : null(); }
  PgParams& boolean(bool v) {
    nums_[n_][0] = v ? 1 : 0;
    return bytes(nums_[n_].data(), 1);
  }

  int size() const { return n_; }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  PgParams& bytes(const char* p, std::size_t n) {
    if (n_ >= kMax) throw StoreError("postgresql: too many parameters", 0);
    if (n > static_cast<std::size_t>(INT_MAX)) throw StoreError("postgresql: value too long", 0);
    values_[n_] = p;
    lengths_[n_] = static_cast<int>(n);
    formats_[n_] = 1;
    ++n_;
    return *this;
  }
  int n_ = 0;
  std::array<const char*, kMax> values_{};
  std::array<int, kMax> lengths_{}, formats_{};
  std::array<std::array<char, 8>, kMax> nums_{};
};

namespace {
void lease(PgParams& p, std::string_view id, std::string_view owner, std::int64_t fence,
           double now) {
  p.text(id).text(owner).i8(fence).f8(now);
}
}  // namespace

PgStore::PgStore(const std::string& uri, bool listen)
    : uri_(uri), described_(mask_password(uri)), listen_(listen) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(uri.c_str(), &err);
  if (!opts) {
    std::string msg = err ? trim(err) : "out of memory";
    if (err) PQfreemem(err);
    throw StoreError("invalid PostgreSQL URI " + described_ + ": " + msg, 0);
  }
  std::vector<std::string> given;
  for (auto* o = opts; o->keyword; ++o) {
    if (o->val) given.emplace_back(o->keyword);
  }
  PQconninfoFree(opts);
  auto has = [&](const char* k) { return std::find(given.begin(), given.end(), k) != given.end(); };
  // The URI first (expanded by libpq); our defaults only where it is silent.
  keys_.push_back("dbname");
  values_.push_back(uri);
  auto fallback = [&](const char* k, const char* v) {
    if (!has(k)) {
      keys_.push_back(k);
      values_.push_back(v);
    }
  };
  // A connection attempt blocks the serving thread at most this long.
  fallback("connect_timeout", "2");
  // After a failover, reconnect to the primary only (a standby refuses writes).
  fallback("target_session_attrs", "read-write");
  // A peer that vanished is noticed within about half a minute.
  fallback("keepalives_idle", "10");
  fallback("keepalives_interval", "5");
  fallback("keepalives_count", "3");
  // ... and while a query's bytes wait for an acknowledgement (keepalives do
  // not run then), within 10 s.
  fallback("tcp_user_timeout", "10000");
  keys_.push_back("fallback_application_name");
  values_.push_back("fenceqd");
  // Strings are UTF-8 on the wire whatever the URI says.
  keys_.push_back("client_encoding");
  values_.push_back("UTF8");

  bool connected = false;
  try {
    connected = try_connect(true);
  } catch (const StoreError& e) {
    throw StoreError(std::string("PostgreSQL ") + described_ + ": " + e.what(), 0, Kind::internal);
  }
  if (!connected) {
    next_attempt_ = SteadyClock::now() + backoff_;
    spdlog::warn("PostgreSQL {} unreachable, serving `unavailable` until it is back: {}",
                 described_, last_error_);
  }
}

PgStore::~PgStore() { rollback(); }

std::unique_ptr<Store> PgStore::open_reader() const {
  return std::make_unique<PgStore>(uri_, false);
}

bool PgStore::try_connect(bool first) {
  std::vector<const char*> k, v;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    k.push_back(keys_[i].c_str());
    v.push_back(values_[i].c_str());
  }
  k.push_back(nullptr);
  v.push_back(nullptr);
  PgConn c(PQconnectdbParams(k.data(), v.data(), 1));
  if (!c) {
    last_error_ = "out of memory";
    return false;
  }
  if (PQstatus(c.get()) != CONNECTION_OK) {
    last_error_ = trim(PQerrorMessage(c.get()));
    if (first && config_error(c.get(), last_error_)) throw StoreError(last_error_, 0);
    return false;
  }
  PQsetNoticeProcessor(c.get(), &log_notice, nullptr);
  conn_ = std::move(c);
  in_tx_ = false;
  queue_changes_ = {};
  notify_.clear();
  try {
    setup_session();
  } catch (const StoreError& e) {
    last_error_ = e.what();
    drop_connection(e.what());
    if (e.kind == Kind::unavailable) return false;
    throw;
  }
  ++epoch_;
  backoff_ = std::chrono::milliseconds(100);
  last_error_.clear();
  return true;
}

void PgStore::setup_session() {
  PGconn* c = conn_.get();
  const char* enc = PQparameterStatus(c, "server_encoding");
  if (!enc || std::string_view(enc) != "UTF8") {
    throw StoreError(std::string("the database's encoding is ") + (enc ? enc : "unknown") +
                         ", fenceq needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8')",
                     0);
  }
  if (PQserverVersion(c) < 90600) {
    throw StoreError("PostgreSQL " + std::to_string(PQserverVersion(c)) +
                         " is too old: fenceq needs 9.6 or later",
                     0);
  }
  // A sidecar that stalls inside a transaction (SIGSTOP, a frozen VM) would
  // hold its jobs' row locks and block every other sidecar that touches them;
  // unless the DBA chose otherwise, PostgreSQL ends such a session, and a
  // statement waits at most lock_timeout for a row another session holds
  // (then `unavailable`: nothing applied, try again) or runs at most
  // statement_timeout: the serving thread is never blocked for long.
  exec("SELECT set_config('idle_in_transaction_session_timeout', '10s', false) "
       "WHERE current_setting('idle_in_transaction_session_timeout') = '0'",
       "session setup");
  exec("SELECT set_config('lock_timeout', '5s', false) "
       "WHERE current_setting('lock_timeout') = '0'",
       "session setup");
  exec("SELECT set_config('statement_timeout', '10s', false) "
       "WHERE current_setting('statement_timeout') = '0'",
       "session setup");
  if (!schema_ready_) {
    migrate();
    schema_ready_ = true;
  }
  // One channel per database (NOTIFY's scope) and schema, a plain identifier.
  auto ch = exec("SELECT 'fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16)",
                 "session setup");
  channel_ = PQgetvalue(ch.get(), 0, 0);
  if (listen_) exec(("LISTEN " + channel_).c_str(), "listen");
  prepare_all();
  double t0 = wall_now();
  auto clock = exec("SELECT extract(epoch from clock_timestamp())::float8", "read the clock");
  double t1 = wall_now();
  clock_offset_ = std::strtod(PQgetvalue(clock.get(), 0, 0), nullptr) - (t0 + t1) / 2;
}

void PgStore::migrate() {
  // Several sidecars may start at once: the schema is created under a lock of
  // this database and schema, one at a time; each later one finds it there.
  exec("BEGIN ISOLATION LEVEL READ COMMITTED", "create the schema");
  try {
    exec("SELECT pg_advisory_xact_lock(hashtext('fenceq schema'), "
         "hashtext(COALESCE(current_schema()::text, '')))",
         "create the schema");
    exec("CREATE TABLE IF NOT EXISTS fenceq_schema_version(version integer PRIMARY KEY, "
         "applied timestamptz NOT NULL DEFAULT now())",
         "create the schema");
    auto v = exec("SELECT COALESCE(max(version), 0) FROM fenceq_schema_version",
                  "create the schema");
    int version = std::atoi(PQgetvalue(v.get(), 0, 0));
    if (version > kSchemaVersion) {
      throw StoreError("the database's fenceq schema is version " + std::to_string(version) +
                           ", newer than this fenceqd knows (" + std::to_string(kSchemaVersion) +
                           ")",
                       0);
    }
    if (version < 1) exec(kSchemaV1, "create the schema");
    exec("COMMIT", "create the schema");
  } catch (...) {
    if (conn_ && PQtransactionStatus(conn_.get()) != PQTRANS_IDLE) {
      PgResult(PQexec(conn_.get(), "ROLLBACK"));
    }
    throw;
  }
}

void PgStore::prepare_all() {
  for (const auto& s : statements()) {
    PgResult res(PQprepare(conn_.get(), stmt_name(s.id), s.sql.c_str(),
                           static_cast<int>(s.types.size()), s.types.data()));
    if (!ok(res.get())) fail_with(res.get(), "prepare");
  }
}

void PgStore::drop_connection(const std::string& why) noexcept {
  if (!conn_) return;
  try {
    spdlog::warn("PostgreSQL {}: connection lost: {}", described_, why);
    last_error_ = why;
  } catch (...) {
  }
  conn_.reset();
  // The first reconnection may be tried at once, then with backoff.
  next_attempt_ = SteadyClock::now();
}

void PgStore::ensure_connected() {
  if (conn_) return;
  if (SteadyClock::now() < next_attempt_) {
    throw StoreError("PostgreSQL unavailable: " + last_error_, 0, Kind::unavailable);
  }
  auto schedule_next = [&] {
    next_attempt_ = SteadyClock::now() + backoff_;
    backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(5000));
  };
  bool connected;
  try {
    connected = try_connect(false);
  } catch (...) {
    schedule_next();
    throw;
  }
  if (!connected) {
    schedule_next();
    throw StoreError("PostgreSQL unavailable: " + last_error_, 0, Kind::unavailable);
  }
  spdlog::info("PostgreSQL {}: connected (connection {})", described_, epoch_);
}

PGconn* PgStore::conn_for_op() {
  if (in_tx_) {
    if (!conn_) {
      throw StoreError("PostgreSQL connection lost during the transaction: " + last_error_, 0,
                       Kind::unavailable);
    }
    return conn_.get();
  }
  ensure_connected();
  return conn_.get();
}

void PgStore::fail_with(PGresult* res, const char* what) {
  std::string state;
  std::string msg;
  if (res) {
    if (const char* s = PQresultErrorField(res, PG_DIAG_SQLSTATE)) state = s;
    msg = trim(PQresultErrorMessage(res));
  }
  if (msg.empty() && conn_) msg = trim(PQerrorMessage(conn_.get()));
  if (msg.empty()) msg = "no connection";
  bool lost = !conn_ || PQstatus(conn_.get()) == CONNECTION_BAD;
  Kind kind = classify(state, lost);
  // A timeout leaves the connection usable; anything else unavailable means
  // it is gone or pointed at the wrong server (a standby).
  if (kind == Kind::unavailable && (lost || (state != "55P03" && state != "57014"))) {
    drop_connection(msg);
  }
  throw StoreError(std::string("postgresql ") + what + ": " + msg, 0, kind);
}

PgResult PgStore::run(int stmt, const PgParams& p, const char* what) {
  PGconn* c = conn_for_op();
  PgResult res(PQexecPrepared(c, stmt_name(stmt), p.size(), p.values(), p.lengths(), p.formats(),
                              1));
  if (!ok(res.get())) fail_with(res.get(), what);
  return res;
}

PgResult PgStore::exec(const char* sql, const char* what) {
  if (!conn_) fail_with(nullptr, what);
  PgResult res(PQexec(conn_.get(), sql));
  if (!ok(res.get())) fail_with(res.get(), what);
  return res;
}

void PgStore::count_changes(PGresult* res) {
  const char* n = PQcmdTuples(res);
  if (n && *n) changes_ += std::strtoll(n, nullptr, 10);
}

void PgStore::freed(std::string_view queue) {
  auto& f = queue_changes_.freed;
  if (std::find(f.begin(), f.end(), queue) == f.end()) f.emplace_back(queue);
  notify(queue);
}

void PgStore::notify(std::string_view queue) {
  if (std::find(notify_.begin(), notify_.end(), queue) == notify_.end()) notify_.emplace_back(queue);
}

Store::QueueChanges PgStore::take_queue_changes() { return std::exchange(queue_changes_, {}); }

std::optional<double> PgStore::next_claimable_at(std::string_view queue, double now) {
  if (has_nul(queue)) return std::nullopt;
  PgParams p;
  p.text(queue).f8(now);
  auto res = run(kNextClaimable, p, "next_claimable_at");
  if (PQntuples(res.get()) == 0 || PQgetisnull(res.get(), 0, 0)) return std::nullopt;
  return double_at(res.get(), 0, 0);
}

void PgStore::begin() {
  if (in_tx_) throw StoreError("postgresql begin: a transaction is already open", 0);
  for (int attempt = 0;; ++attempt) {
    bool fresh = !conn_;
    ensure_connected();
    double t0 = wall_now();
    PgResult res(PQexec(conn_.get(),
                        "BEGIN ISOLATION LEVEL READ COMMITTED; "
                        "SELECT extract(epoch from clock_timestamp())::float8"));
    double t1 = wall_now();
    if (ok(res.get()) && PQntuples(res.get()) == 1) {
      in_tx_ = true;
      queue_changes_ = {};
      notify_.clear();
      clock_offset_ = std::strtod(PQgetvalue(res.get(), 0, 0), nullptr) - (t0 + t1) / 2;
      return;
    }
    if (PQstatus(conn_.get()) == CONNECTION_OK &&
        PQtransactionStatus(conn_.get()) != PQTRANS_IDLE) {
      PgResult(PQexec(conn_.get(), "ROLLBACK"));
    }
    try {
      fail_with(res.get(), "begin");
    } catch (const StoreError& e) {
      // A connection that died while idle (a restart, a failover, a proxy's
      // timeout): nothing of the batch ran yet, so connect again at once.
      if (e.kind == Kind::unavailable && !fresh && attempt == 0) continue;
      throw;
    }
  }
}

void PgStore::commit() {
  if (!in_tx_) throw StoreError("postgresql commit: no transaction is open", 0);
  in_tx_ = false;
  const auto notify = std::exchange(notify_, {});
  if (!conn_) {
    throw StoreError("postgresql commit: the connection was lost during the transaction: " +
                         last_error_,
                     0, Kind::unavailable);
  }
  PGconn* c = conn_.get();
  if (PQtransactionStatus(c) == PQTRANS_INERROR) {
    PgResult(PQexec(c, "ROLLBACK"));
    throw StoreError("postgresql commit: a statement of the transaction failed; rolled back", 0);
  }
  // NOTIFY is transactional: the other sidecars hear it when (and only if)
  // this commits.
  // The payload names the queue; with many queues, one empty payload means
  // all of them (a NOTIFY payload is at most 8000 bytes).
  std::string sql;
  if (notify.size() > kMaxNotifyQueues) {
    sql = "SELECT pg_notify('" + channel_ + "', '');";
  } else {
    for (const auto& q : notify) {
      char* literal = PQescapeLiteral(c, q.data(), q.size());
      if (!literal) continue;
      sql += "SELECT pg_notify('" + channel_ + "', " + literal + ");";
      PQfreemem(literal);
    }
  }
  sql += "COMMIT";
  PgResult res(PQexec(c, sql.c_str()));
  if (!ok(res.get())) {
    if (PQstatus(c) == CONNECTION_BAD) {
      // The connection died during COMMIT: PostgreSQL may or may not have
      // committed, nobody can tell from here. Not `unavailable` (which
      // promises nothing was applied): outcome_unknown.
      std::string msg = trim(res ? PQresultErrorMessage(res.get()) : PQerrorMessage(c));
      if (msg.empty()) msg = trim(PQerrorMessage(c));
      drop_connection(msg);
      throw StoreError("postgresql commit: the connection broke during COMMIT, outcome unknown: " +
                           msg,
                       0, Kind::outcome_unknown);
    }
    // Refused by the server (the connection is fine): rolled back.
    if (PQtransactionStatus(c) != PQTRANS_IDLE) PgResult(PQexec(c, "ROLLBACK"));
    fail_with(res.get(), "commit");
  }
  if (std::strcmp(PQcmdStatus(res.get()), "COMMIT") != 0) {
    throw StoreError(std::string("postgresql commit: the transaction was rolled back (") +
                         PQcmdStatus(res.get()) + ")",
                     0);
  }
}

void PgStore::rollback() noexcept {
  in_tx_ = false;
  queue_changes_ = {};
  notify_.clear();
  if (!conn_) return;
  PGconn* c = conn_.get();
  auto status = PQtransactionStatus(c);
  if (status == PQTRANS_IDLE) return;
  if (status == PQTRANS_INTRANS || status == PQTRANS_INERROR) {
    PgResult res(PQexec(c, "ROLLBACK"));
    if (ok(res.get()) && PQstatus(c) == CONNECTION_OK) return;
  }
  drop_connection("ROLLBACK failed");
}

bool PgStore::enqueue(const protocol::Request& r, double now) {
  if (has_nul(r.id)) refuse_nul("id");
  if (has_nul(r.queue)) refuse_nul("queue");
  PgParams p;
  p.text(r.id).text(r.queue);
  if (r.payload) {
    // bytea, with whether it was sent as bin or str, so claim_next gives back
    // the same msgpack type (SQLite keeps BLOB or TEXT).
    p.bytea(r.payload->bytes).boolean(r.payload->binary);
  } else {
    p.null().boolean(true);
  }
  p.i8(r.priority).f8(r.delay > 0 ? now + r.delay : 0.0).i8(r.max_attempts).f8(now);
  PgParams u;
  u.text(r.id);

  // Two statements in one round trip (a pipeline). The INSERT reads the kept
  // fence of a purged id from its snapshot; a purge by another sidecar that
  // committed after that snapshot (the INSERT may even have waited for it on
  // the id's index entry) is invisible to it. The second statement, with a
  // snapshot of its own, takes the kept fence out and raises the new row's
  // fence to it, so a fence never goes back (C1.2). It changes nothing when
  // the id was not purged, and is harmless when the INSERT found the id.
  PGconn* c = conn_for_op();
  std::array<PgResult, 2> res;
  bool sent = PQenterPipelineMode(c) == 1;
  if (sent) {
    sent = PQsendQueryPrepared(c, stmt_name(kEnqueue), p.size(), p.values(), p.lengths(),
                               p.formats(), 1) == 1 &&
           PQsendQueryPrepared(c, stmt_name(kUnpurge), u.size(), u.values(), u.lengths(),
                               u.formats(), 1) == 1 &&
           PQpipelineSync(c) == 1;
    if (sent) {
      // Each statement's result(s) up to a null (the second one's is
      // PGRES_PIPELINE_ABORTED when the first failed), then the sync point.
      for (auto& r1 : res) {
        while (PGresult* got = PQgetResult(c)) {
          if (!r1) {
            r1.reset(got);
          } else {
            PQclear(got);
          }
        }
        if (PQstatus(c) == CONNECTION_BAD) break;
      }
      if (PQstatus(c) == CONNECTION_OK) PQclear(PQgetResult(c));  // PGRES_PIPELINE_SYNC
    }
    if (PQexitPipelineMode(c) != 1 && PQstatus(c) == CONNECTION_OK) {
      // Results still pending: the connection's state is unknown. (A dead
      // connection is reported from the results below.)
      std::string why = "pipeline not finished: " + trim(PQerrorMessage(c));
      drop_connection(why);
      throw StoreError("postgresql enqueue: " + why, 0, Kind::unavailable);
    }
  }
  if (!sent || !res[0]) fail_with(res[0] ? res[0].get() : nullptr, "enqueue");
  if (!ok(res[0].get())) fail_with(res[0].get(), "enqueue");
  if (!res[1] || !ok(res[1].get())) fail_with(res[1] ? res[1].get() : nullptr, "enqueue");
  bool inserted = PQntuples(res[0].get()) == 1;
  count_changes(res[0].get());
  count_changes(res[1].get());
  if (inserted) freed(r.queue);
  return inserted;
}

std::optional<JobState> PgStore::state(std::string_view id) {
  if (has_nul(id)) return std::nullopt;  // no stored id holds U+0000
  PgParams p;
  p.text(id);
  auto res = run(kState, p, "state");
  const PGresult* r = res.get();
  if (PQntuples(r) == 0) return std::nullopt;
  JobState row;
  row.id = text_at(r, 0, 0).value_or("");
  row.owner = text_at(r, 0, 1);
  row.until = double_at(r, 0, 2);
  row.fence = int_at(r, 0, 3);
  row.result = text_at(r, 0, 4);
  row.done = int_at(r, 0, 5) != 0;
  return row;
}

std::optional<std::int64_t> PgStore::claim(std::string_view id, std::string_view owner,
                                           double now, double ttl) {
  if (has_nul(id)) return std::nullopt;
  if (has_nul(owner)) refuse_nul("owner");
  PgParams p;
  p.text(id).text(owner).f8(now + ttl).f8(now);
  auto res = run(kClaim, p, "claim");
  count_changes(res.get());
  if (PQntuples(res.get()) == 0) return std::nullopt;
  return int_at(res.get(), 0, 0);
}

std::optional<ClaimedJob> PgStore::claim_next(std::string_view queue,
                                                     std::string_view owner, double now,
                                                     double ttl) {
  if (has_nul(queue)) return std::nullopt;
  if (has_nul(owner)) refuse_nul("owner");
  PgParams p;
  p.text(queue).text(owner).f8(now + ttl).f8(now);
  auto res = run(kClaimNext, p, "claim_next");
  count_changes(res.get());
  const PGresult* r = res.get();
  if (PQntuples(r) == 0) return std::nullopt;
  ClaimedJob job;
  job.id = text_at(r, 0, 0).value_or("");
  job.fence = int_at(r, 0, 1);
  if (!PQgetisnull(r, 0, 2)) {
    job.payload = protocol::Payload{std::string(bytes_at(r, 0, 2)), int_at(r, 0, 3) != 0};
  }
  job.attempts = int_at(r, 0, 4);
  return job;
}

bool PgStore::renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
                    double ttl) {
  if (has_nul(id) || has_nul(owner)) return false;  // no such lease can exist
  PgParams p;
  lease(p, id, owner, fence, now);
  p.f8(now + ttl);
  auto res = run(kRenew, p, "renew");
  count_changes(res.get());
  if (PQntuples(res.get()) == 0) return false;
  auto queue = text_at(res.get(), 0, 0).value_or("");
  if (int_at(res.get(), 0, 1) != 0) notify(queue);  // the lease ends sooner than it did
  queue_changes_.lease_ends.emplace_back(std::move(queue), now + ttl);
  return true;
}

bool PgStore::complete(std::string_view id, std::string_view owner, std::int64_t fence,
                       const std::optional<std::string>& result, double now) {
  if (has_nul(id) || has_nul(owner)) return false;
  if (result && has_nul(*result)) refuse_nul("result");
  PgParams p;
  lease(p, id, owner, fence, now);
  p.opt_text(result);
  auto res = run(kComplete, p, "complete");
  count_changes(res.get());
  return std::strcmp(PQcmdTuples(res.get()), "1") == 0;
}

bool PgStore::release(std::string_view id, std::string_view owner, std::int64_t fence) {
  if (has_nul(id) || has_nul(owner)) return false;
  PgParams p;
  p.text(id).text(owner).i8(fence);
  auto res = run(kRelease, p, "release");
  count_changes(res.get());
  if (PQntuples(res.get()) == 0) return false;
  freed(text_at(res.get(), 0, 0).value_or(""));
  return true;
}

bool PgStore::fail(std::string_view id, std::string_view owner, std::int64_t fence,
                   std::string_view error, std::optional<double> retry_in, double now) {
  if (has_nul(id) || has_nul(owner)) return false;
  if (has_nul(error)) refuse_nul("error");
  PgParams p;
  lease(p, id, owner, fence, now);
  p.text(error).opt_f8(retry_in);
  auto res = run(kFail, p, "fail");
  count_changes(res.get());
  if (PQntuples(res.get()) == 0) return false;
  // Claimable again after the backoff, unless out of attempts.
  if (int_at(res.get(), 0, 0) == 0) freed(text_at(res.get(), 0, 1).value_or(""));
  return true;
}

bool PgStore::unclaim(std::string_view id, std::string_view owner, std::int64_t fence) {
  if (has_nul(id) || has_nul(owner)) return false;
  PgParams p;
  p.text(id).text(owner).i8(fence);
  auto res = run(kUnclaim, p, "unclaim");
  count_changes(res.get());
  if (PQntuples(res.get()) == 0) return false;
  freed(text_at(res.get(), 0, 0).value_or(""));
  return true;
}

bool PgStore::check(std::string_view id, std::string_view owner, std::int64_t fence, double now) {
  if (has_nul(id) || has_nul(owner)) return false;
  PgParams p;
  lease(p, id, owner, fence, now);
  auto res = run(kCheck, p, "check");
  return PQntuples(res.get()) > 0;
}

bool PgStore::retry(std::string_view id, double now) {
  if (has_nul(id)) return false;
  PgParams p;
  p.text(id).f8(now);
  auto res = run(kRetry, p, "retry");
  count_changes(res.get());
  if (PQntuples(res.get()) == 0) return false;
  freed(text_at(res.get(), 0, 0).value_or(""));
  return true;
}

void PgStore::reap_exhausted(double now) {
  PgParams p;
  p.f8(now);
  auto res = run(kReap, p, "reap");
  count_changes(res.get());
}

std::int64_t PgStore::purge(const std::optional<std::string>& queue, double older_than,
                            double now) {
  if (queue && has_nul(*queue)) return 0;  // no such queue
  PgParams p;
  p.f8(now - older_than).opt_text(queue);
  auto res = run(kPurge, p, "purge");
  std::int64_t n = int_at(res.get(), 0, 0);
  changes_ += 2 * n;  // deleted, and their fences kept
  return n;
}

protocol::JobList PgStore::list(const protocol::Request& r, double now) {
  // Ids hold no U+0000, so "after a\0b" is exactly "after a".
  std::string_view after(r.after);
  after = after.substr(0, after.find('\0'));
  std::optional<std::string> queue, status;
  if (!r.all_queues) {
    if (has_nul(r.queue)) return {};
    queue = r.queue;
  }
  if (r.status) status = std::string(protocol::status_name(*r.status));
  PgParams p;
  p.text(after).f8(now).opt_text(queue).opt_text(status);
  if (r.limit >= 0) {
    p.i8(r.limit);
  } else {
    p.null();  // no limit, as SQLite reads a negative one
  }
  auto res = run(kList, p, "list");
  const PGresult* s = res.get();
  protocol::JobList out;
  for (int i = 0, n = PQntuples(s); i < n; ++i) {
    protocol::JobInfo j;
    j.id = text_at(s, i, 0).value_or("");
    j.queue = text_at(s, i, 1).value_or("");
    j.status = protocol::status_from_name(text_at(s, i, 2).value_or(""))
                   .value_or(protocol::JobStatus::ready);
    j.priority = int_at(s, i, 3);
    j.attempts = int_at(s, i, 4);
    j.max_attempts = int_at(s, i, 5);
    j.fence = int_at(s, i, 6);
    j.owner = text_at(s, i, 7);
    j.until = double_at(s, i, 8);
    j.not_before = double_at(s, i, 9);
    j.error = text_at(s, i, 10);
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<protocol::QueueStats> PgStore::queue_stats(double now) {
  PgParams p;
  p.f8(now);
  auto res = run(kStats, p, "stats");
  const PGresult* s = res.get();
  std::vector<protocol::QueueStats> out;
  for (int i = 0, n = PQntuples(s); i < n; ++i) {
    auto queue = text_at(s, i, 0).value_or("");
    if (out.empty() || out.back().queue != queue) out.push_back({queue});
    auto& q = out.back();
    auto count = int_at(s, i, 2);
    switch (protocol::status_from_name(text_at(s, i, 1).value_or(""))
                .value_or(protocol::JobStatus::ready)) {
      case protocol::JobStatus::ready:
        q.ready = count;
        q.oldest_ready_age = std::max(0.0, now - double_at(s, i, 3));
        break;
      case protocol::JobStatus::delayed: q.delayed = count; break;
      case protocol::JobStatus::leased: q.leased = count; break;
      case protocol::JobStatus::done: q.done = count; break;
      case protocol::JobStatus::dead: q.dead = count; break;
    }
  }
  return out;
}

std::optional<std::vector<protocol::QueueStats>> PgStore::queue_stats_within(double now,
                                                                             int budget_ms) {
  if (!conn_) return std::nullopt;  // no reconnection from here: begin() does that
  const std::string limit =
      "SET LOCAL statement_timeout = " + std::to_string(std::max(1, budget_ms));
  if (in_tx_) {
    // Inside a batch: under a savepoint, whose rollback also ends the SET LOCAL.
    try {
      exec("SAVEPOINT fenceq_stats", "stats");
    } catch (const StoreError&) {
      return std::nullopt;
    }
    std::optional<std::vector<protocol::QueueStats>> out;
    try {
      exec(limit.c_str(), "stats");
      out = queue_stats(now);
    } catch (const StoreError&) {
      // timed out (or failed): the batch goes on without the counts
    }
    try {
      exec("ROLLBACK TO SAVEPOINT fenceq_stats", "stats");
      exec("RELEASE SAVEPOINT fenceq_stats", "stats");
    } catch (const StoreError&) {
      return std::nullopt;
    }
    return out;
  }
  // Between batches: a short transaction of its own.
  std::optional<std::vector<protocol::QueueStats>> out;
  try {
    exec("BEGIN ISOLATION LEVEL READ COMMITTED", "stats");
  } catch (const StoreError&) {
    return std::nullopt;
  }
  in_tx_ = true;  // so that a lost connection is not replaced halfway
  try {
    exec(limit.c_str(), "stats");
    out = queue_stats(now);
  } catch (const StoreError&) {
    out.reset();
  }
  rollback();  // read only: nothing to commit
  return out;
}

std::string PgStore::claim_next_plan() {
  PGconn* c = conn_for_op();
  PgParams p;
  p.text("default").text("plan").f8(0).f8(0);
  PgResult res(PQexecParams(c, ("EXPLAIN " + claim_next_sql()).c_str(), p.size(), kClaimNextTypes,
                            p.values(), p.lengths(), p.formats(), 0));
  if (!ok(res.get())) fail_with(res.get(), "explain");
  std::string plan;
  for (int i = 0, n = PQntuples(res.get()); i < n; ++i) {
    plan += PQgetvalue(res.get(), i, 0);
    plan += "\n";
  }
  return plan;
}

double PgStore::clock_high_water() {
  PgParams p;
  p.text("clock_high_water");
  auto res = run(kGetMeta, p, "read clock");
  if (PQntuples(res.get()) == 0) return 0;
  return double_at(res.get(), 0, 0);
}

void PgStore::set_clock_high_water(double t) {
  PgParams p;
  p.text("clock_high_water").f8(t);
  auto res = run(kSetMeta, p, "write clock");
  count_changes(res.get());
}

int PgStore::wakeup_fd() { return conn_ ? PQsocket(conn_.get()) : -1; }

Store::Wakeups PgStore::take_wakeups() {
  Wakeups out;
  if (!conn_) return out;
  PGconn* c = conn_.get();
  // Read while the socket stays readable: a server that ends the session
  // sends its FATAL message (libpq hands it to the notice processor) and
  // then closes, and only a second read sees the end of the stream.
  for (int reads = 0; reads < 4; ++reads) {
    if (PQconsumeInput(c) != 1 || PQstatus(c) == CONNECTION_BAD) {
      // The server went away: stop watching the socket; the next begin()
      // reconnects or answers unavailable.
      drop_connection(trim(PQerrorMessage(c)));
      out.all = true;
      return out;
    }
    pollfd p{PQsocket(c), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) break;
  }
  const int self = PQbackendPID(c);
  while (PGnotify* n = PQnotifies(c)) {
    if (n->be_pid != self) {
      std::string_view queue = n->extra ? n->extra : "";
      if (queue.empty()) {
        out.all = true;
      } else if (std::find(out.queues.begin(), out.queues.end(), queue) == out.queues.end()) {
        out.queues.emplace_back(queue);
      }
    }
    PQfreemem(n);
  }
  return out;
}

std::unique_ptr<Store> open_pg_store(const std::string& uri) {
  return std::make_unique<PgStore>(uri);
}

}  // namespace fenceq::daemon
