// The PostgreSQL store's statements, for pg_store.cpp, pg_batch.cpp and
// pg_writes.cpp alone: their numbers, the schema's migration, and the binary
// arrays some of them take. The statements of the reads and of the batch's
// bookkeeping (Stmt) live in pg_statements.cpp; each write op's own, numbered
// from kStmtCount on, beside its prepare and read in pg_writes.cpp. Both are
// built from the rules in job_rules.hpp.
#pragma once

#include <endian.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fenceq/types.hpp"
#include "storage/migrations.hpp"
#include "storage/pg/pg_connection.hpp"

namespace fenceq::daemon::pg {

// The statements that are not one write op's (pg_statements.cpp); the write
// ops' come after them (pg_writes.cpp).
enum Stmt : int {
  kState, kPayload, kResults, kLinks,
  kKnownIds,  // of a batch's `after` (pg_batch.cpp)
  kList, kListLast = kList + 5,  // by ListOrder, and with an upper end of the ids
  kDeadList, kDeadListBounded,  // through jobs_dead (ListFilter::reaped)
  kStats, kGetMeta, kNextClaimable, kConfigs, kGroupedQueues, kSchedules, kRetentions,
  kGroupConfigs,
  kQueuesOf, kCompleteMany, kLockGroups, kWriteLock,  // the batch's (pg_batch.cpp)
  kStmtCount
};

inline Stmt list_statement(ListOrder order, bool bounded) {
  return static_cast<Stmt>(kList + 2 * static_cast<int>(order) + (bounded ? 1 : 0));
}

// Array types, for kCompleteMany's and kQueuesOf's parameters.
inline constexpr Oid kTextArray = 1009, kInt8Array = 1016, kFloat8Array = 1022;

// A one-dimensional array in PostgreSQL's binary format (array_recv): its
// header, then each element as a length (-1: NULL) and its binary form.
class BinaryArray {
 public:
  explicit BinaryArray(Oid element) : element_(element) {}
  void add(std::optional<std::string_view> v) {
    ++count_;
    if (!v) {
      has_null_ = true;
      be32(-1, body_);
      return;
    }
    be32(static_cast<std::int32_t>(v->size()), body_);
    body_.append(v->data(), v->size());
  }
  void add_i8(std::int64_t v) {
    char b[8];
    const std::uint64_t be = htobe64(static_cast<std::uint64_t>(v));
    std::memcpy(b, &be, 8);
    add(std::string_view(b, 8));
  }
  void add_f8(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    add_i8(static_cast<std::int64_t>(bits));
  }
  std::string bytes() const {
    std::string out;
    be32(1, out);  // dimensions
    be32(has_null_ ? 1 : 0, out);
    be32(static_cast<std::int32_t>(element_), out);
    be32(count_, out);  // length of the dimension
    be32(1, out);      // its lower bound
    return out + body_;
  }

 private:
  static void be32(std::int32_t v, std::string& to) {
    const std::uint32_t be = htobe32(static_cast<std::uint32_t>(v));
    to.append(reinterpret_cast<const char*>(&be), 4);
  }
  Oid element_;
  std::string body_;
  bool has_null_ = false;
  std::int32_t count_ = 0;
};

// One row of a binary result, for the shared row readers (store_rows.hpp).
struct PgRow {
  const PGresult* r;
  int row;
  bool null(int c) const { return PQgetisnull(r, row, c) != 0; }
  std::optional<std::string> text(int c) const { return text_at(r, row, c); }
  std::string_view bytes(int c) const { return bytes_at(r, row, c); }
  std::int64_t integer(int c) const { return int_at(r, row, c); }
  double real(int c) const { return double_at(r, row, c); }
  // payload (bytea) at c, whether it was sent as bin at c + 1.
  std::optional<Payload> payload(int c) const {
    if (null(c)) return std::nullopt;
    return Payload{std::string(bytes(c)), integer(c + 1) != 0};
  }
};

// Wakes the other sidecars' claims parked on `queue` (their LISTEN): sent
// with the statement that freed a job, delivered (and deduplicated) at COMMIT.
// The channel is the one PgConnection LISTENs on, of this database and
// schema; `by_trigger`, its second one, which the sidecar that sent it hears
// too (a job a trigger of pg_after.cpp made claimable).
std::string notify_sql(const std::string& queue, bool by_trigger = false);
// NOTIFY on the third channel, `_g`: a job of a group was enqueued or revived
// in `queue` (an SQL expression). A sidecar that hears it counts the queue as
// grouped at once (PgStore::grouped_), so that a claim parked there, woken by
// the same commit, claims through fenceq_claim_fair (it once did not, until
// the sidecar read the queue's groups again, and waited its whole wait).
std::string notify_grouped_sql(const std::string& queue);

// Every statement of the store, by number: Stmt's, then the write ops'.
std::vector<PgStatement> statements();
// The write ops' statements, each at its number (pg_writes.cpp): `d`, which
// holds Stmt's, grows to hold them too.
void add_write_statements(std::vector<PgStatement>& d);
// claim_next's full statement (pg_writes.cpp), for EXPLAIN.
PgStatement claim_next_statement();
// The ids of the parked jobs of no group of `queue` claimable at `now`
// whose lease or delay is over, soonest first, `limit` of them at most,
// through jobs_wake (schema 20; pg_writes.cpp): claim_next's and the fair
// claim's walk of them. `also` narrows it.
std::string parked_due_sql(std::string_view queue, std::string_view now, std::string_view limit,
                           std::string_view also = "");
// A claim's SET clause that parks its job (rules::kParkedKids).
std::string parks_sql();
// Creates or upgrades the schema (PgConnection::Migrate).
void migrate(PgConnection& c);
// C1.5, fenceqd --restored: the database is a restored copy (a dump, a base
// backup, a point in time recovery), whose jobs have forgotten the claims
// made after the copy was taken. The fence epoch goes up by one (fenceq_meta
// 'fence_epoch', past every fence kept), every fence and every purged id's
// kept fence is raised to its floor (epoch << 32), every lease ends, and
// every job inserted from then on starts at the floor (the trigger
// fenceq_fence_floor: an id enqueued again whose earlier claims the copy
// forgot). One transaction, under the schema's lock.
void raise_fence_epoch(PgConnection& c);
// raise_fence_epoch's parts, inside the caller's transaction (also fenceqd
// --migrate-to's): the next epoch, past the recorded one and every fence
// kept; and recording `epoch` with the trigger that starts every job
// inserted later at its floor.
long long fence_epoch_past_all(PgConnection& c, const char* what);
void keep_fence_floor(PgConnection& c, long long epoch, const char* what);
// migrate()'s parts for jobs that wait for jobs (pg_after.cpp): the schema
// versions of their tables (9 and 10, 15, 16), and the functions and
// triggers, made again by every start after the versions.
std::vector<Migration> after_migrations();
void create_after_functions(PgConnection& c);
// pg_groups.cpp: queue_groups' walk columns, the triggers that wake its
// groups, and fenceq_claim_fair (made again by every start).
void migrate_groups(PgConnection& c);
// fenceq_group_config (C3.25; pg_group_config.cpp), made by migrate_groups.
std::string group_config_function_sql();
// When the open job `id` (an SQL expression) is claimable by time alone, as
// a new group row's wake ('Infinity': by a write alone); 0 when it is not
// open or not there (the group walks).
std::string group_wake_sql(const std::string& id);
// pg_app.cpp: fenceq_enqueue(), for an application's own transaction (made again by every start).
void migrate_app(PgConnection& c);

}  // namespace fenceq::daemon::pg
