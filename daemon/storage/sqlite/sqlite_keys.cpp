// The SQLite store's unique keys (docs/contract.md C3.10): a
// keyed enqueue looks its key up in keys_ (key_map.hpp says why in memory,
// not in an index), reading at most the rows it names by rowid; a retry
// of a keyed job asks it whether another job holds the key; every job
// deleted leaves it through a TEMP trigger (key_gone).
#include "storage/job_rules.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace fenceq::daemon {

using sqlite::Use;
using sqlite::kNoUndo;

void SqliteStore::prepare_key_statements() {
  // A job by rowid: its id, whether it is leased, whether it holds its key.
  key_row_.reset(prepare(std::string("SELECT id, until > ?2 AS leased, ") + rules::kKeyOpen +
                         " AS open FROM jobs WHERE rowid = ?1"));
  // The key's job enqueued last, when the one the map knew was purged: a
  // scan (no index by key), rare (key_taken).
  key_latest_.reset(prepare("SELECT rowid, created FROM jobs WHERE queue = ?1 AND ukey = ?2 "
                            "ORDER BY created DESC, rowid DESC LIMIT 1"));
  key_of_.reset(prepare("SELECT rowid, queue, ukey FROM jobs WHERE id = ?1 AND ukey IS NOT NULL"));
  // A blocked job (C3.13) stays blocked: its new delay waits in job_waits
  // (key_replace_wait_), counted from its unblocking.
  key_replace_.reset(prepare("UPDATE " + kNoUndo + "jobs SET payload = :payload, kids = (kids & ~" +
                             std::to_string(rules::kKidsPayload) + ") | :spilled, priority = "
                             ":priority, max_attempts = :max_attempts, not_before = CASE WHEN "
                             "not_before >= " + rules::kBlockedUntilSql + " THEN not_before "
                             "ELSE :not_before END WHERE id = :id"));
  key_replace_wait_.reset(prepare("UPDATE job_waits SET wait = ?2 WHERE child = ?1"));
}

// The map of keys from the table, once at open (a scan of the jobs), and
// the trigger that keeps it when jobs are deleted. seq_ is at least every
// kseq too: a revived job's kseq took a seq that no job has (retry), and
// must stay below every later one.
void SqliteStore::load_keys() {
  int rc = sqlite3_create_function_v2(db_.get(), "fenceq_key_gone", 3,
                                      SQLITE_UTF8 | SQLITE_DIRECTONLY, this,
                                      &SqliteStore::key_gone, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail_with("register fenceq_key_gone", rc);
  // TEMP: this connection's own, never in the file (another connection
  // deleting a job has no such function, and needs none).
  exec("CREATE TEMP TRIGGER fenceq_keys_gone AFTER DELETE ON main.jobs "
       "WHEN OLD.ukey IS NOT NULL BEGIN "
       "SELECT fenceq_key_gone(OLD.queue, OLD.ukey, OLD.rowid); END");
  keys_.clear();
  const auto started = std::chrono::steady_clock::now();
  Statement s(prepare("SELECT rowid, queue, ukey, COALESCE(kseq, 0), created FROM jobs "
                      "WHERE ukey IS NOT NULL ORDER BY kseq, rowid"));
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    keys_.load(column_view(s.get(), 1), column_view(s.get(), 2), sqlite3_column_int64(s.get(), 0),
               sqlite3_column_double(s.get(), 4));
    seq_ = std::max<std::int64_t>(seq_, sqlite3_column_int64(s.get(), 3));
  }
  if (rc != SQLITE_DONE) fail_with("read keys", rc);
  if (keys_.size() > 0) {
    // The start's share of the keys (docs/operating.md, memory policy).
    spdlog::info("{}: {} unique keys read in {} ms", path_, keys_.size(),
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started).count());
  }
}

void SqliteStore::key_gone(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto* self = static_cast<SqliteStore*>(sqlite3_user_data(ctx));
  auto text = [](sqlite3_value* v) {
    return std::string_view(reinterpret_cast<const char*>(sqlite3_value_text(v)),
                            static_cast<std::size_t>(sqlite3_value_bytes(v)));
  };
  self->keys_.removed(text(argv[0]), text(argv[1]), sqlite3_value_int64(argv[2]));
  sqlite3_result_null(ctx);
}

bool SqliteStore::key_row(std::int64_t rowid, double now, KeyRow& out, const char* what) {
  auto* s = key_row_.get();
  Use u(s);
  u.integer(1, rowid).real(2, now);
  if (!step_row(s, what)) return false;
  out = {std::string(column_view(s, 0)), sqlite3_column_int(s, 1) != 0,
         sqlite3_column_int(s, 2) != 0};
  end_row(s, what);
  return true;
}

// With unique_for: the key's job enqueued after `since`, if any. The map
// knows the last one enqueued, unless it was purged: then only a bound, and
// the table says which job is the last one now (a scan, once).
std::optional<std::string> SqliteStore::key_recent(const NewJob& job, const KeyMap::Entry& e,
                                                   double now, double since) {
  if (e.latest_created <= since) return std::nullopt;  // none enqueued after it
  std::int64_t latest = e.latest;
  if (latest == 0) {
    auto* s = key_latest_.get();
    Use u(s);
    u.text(1, job.queue).text(2, *job.key);
    if (!step_row(s, "enqueue")) return std::nullopt;
    latest = sqlite3_column_int64(s, 0);
    const double created = sqlite3_column_double(s, 1);
    end_row(s, "enqueue");
    keys_.found_latest(job.queue, *job.key, latest, created);
    if (created <= since) return std::nullopt;
  }
  KeyRow row;
  if (!key_row(latest, now, row, "enqueue")) return std::nullopt;
  return row.id;
}

// C3.10: a keyed enqueue creates a job only when neither its id (C3.1) nor
// its key is taken; a job found by key that is unfinished and not leased
// takes this one's fields with on_conflict "replace".
bool SqliteStore::key_taken(const EnqueueParams& p, CallResult& r) {
  const NewJob& job = p.job;
  const auto e = keys_.find(job.queue, *job.key);
  if (!e) return false;  // no job of the key in the table
  KeyRow newest;
  const bool open = e->newest != 0 && key_row(e->newest, p.now, newest, "enqueue") && newest.open;
  if (open) {
    r.id = newest.id;
  } else {
    // The key free: the insert decides, and an id taken (C3.1) inserts nothing.
    if (job.unique_for <= 0) return false;
    auto recent = key_recent(job, *e, p.now, p.now - job.unique_for);
    if (!recent) return false;
    r.id = std::move(*recent);
  }
  {
    // The id taken comes first (C3.1): nothing changes, the id is answered.
    Use u(id_exists_.get());
    u.text(1, job.id);
    if (step_row(id_exists_.get(), "enqueue")) {
      end_row(id_exists_.get(), "enqueue");
      r.id = std::string(job.id);
      return true;
    }
  }
  if (job.replace && open && !newest.leased) {
    auto* s = key_replace_.get();
    Use u(s);
    bind_job_fields(u, job, p.now);
    u.text(u.at(":id"), r.id).integer(u.at(":spilled"), spills(job.payload) ? rules::kKidsPayload : 0);
    step_done(s, "enqueue");
    spill_payload(r.id, job.payload);
    Use w(key_replace_wait_.get());
    w.text(1, r.id).real(2, job.delay);
    step_done(key_replace_wait_.get(), "enqueue");
    freed(job.queue);
  }
  return true;
}

// A retry of job `id`: false when it has a key that another unfinished job
// holds (C3.10); else true, and `key` says the job's key, if any, to note
// it as the key's newest once revived.
bool SqliteStore::key_allows_retry(std::string_view id, double now,
                                   std::optional<KeyOf>& key) {
  auto* s = key_of_.get();
  Use u(s);
  u.text(1, id);
  if (!step_row(s, "retry")) return true;  // no key (or no job)
  key = KeyOf{sqlite3_column_int64(s, 0), std::string(column_view(s, 1)),
               std::string(column_view(s, 2))};
  end_row(s, "retry");
  const auto e = keys_.find(key->queue, key->key);
  if (!e || e->newest == 0 || e->newest == key->rowid) return true;
  KeyRow newest;
  return !(key_row(e->newest, now, newest, "retry") && newest.open);
}

// A new job's payload (TEXT or BLOB as sent, so claim_next gives back the
// same msgpack type; NULL when it spills to job_payloads), priority,
// max_attempts and not_before.
void SqliteStore::bind_job_fields(Use& u, const NewJob& job, double now) {
  u.payload(u.at(":payload"), spills(job.payload) ? nullptr : job.payload)
      .integer(u.at(":priority"), job.priority)
      .real(u.at(":not_before"), job.delay > 0 ? now + job.delay : 0.0)
      .integer(u.at(":max_attempts"), job.max_attempts);
}

}  // namespace fenceq::daemon
