// The unique keys of a SQLite store's jobs, in memory (issue 31, schema
// version 14): where a keyed enqueue looks its key up, in place of an index
// of the table.
//
// Why not an index: a key arrives in no order, so each new entry of an
// index by key lands on a leaf of its own, and once the index has more
// leaves than a commit has jobs every keyed job dirties a page that the WAL
// writes whole: keyed enqueue_many ran at 0.64 of unkeyed (bench/README.md,
// "Keys and groups"). The store is its file's only writer (C1.3), so it can
// keep what the index told it: for each key with jobs in the table, which
// one is the newest (the only one that can be unfinished) and which one was
// enqueued last (for unique_for). It reads the table once at open
// (SqliteStore::load_keys) and costs about 100 bytes and the key's length a
// key with jobs kept (done ones too, until purged).
//
// A transaction's changes are undone with it: every change notes what it
// replaced (undo_to(), at ROLLBACK and ROLLBACK TO a savepoint).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fenceq::daemon {

class KeyMap {
 public:
  // What the map knows of one key's jobs. Row ids are SQLite's rowid.
  struct Entry {
    // The job of the largest kseq (the newest enqueued or revived): the
    // key's unfinished job if it has one. 0 once it is purged: a purged job
    // was finished, and so the key has none unfinished until a new or
    // revived job.
    std::int64_t newest = 0;
    // The job enqueued last (the largest `created`), and its `created`. The
    // job 0 once it is purged; `latest_created` stays, a bound: no job of
    // the key kept was enqueued after it.
    std::int64_t latest = 0;
    double latest_created = 0;
    std::int64_t jobs = 0;  // the key's jobs in the table; at 0 the entry goes
    bool operator==(const Entry&) const = default;
  };

  // The key's entry, or nullptr when the table holds no job of it.
  const Entry* find(std::string_view queue, std::string_view key);
  // A job of the key inserted (rowid, its `created`): the newest, and the
  // latest unless one of a later `created` is kept.
  void added(std::string_view queue, std::string_view key, std::int64_t rowid, double created);
  // A job of the key revived (retry): the newest.
  void revived(std::string_view queue, std::string_view key, std::int64_t rowid);
  // A job of the key deleted (purge, retention).
  void removed(std::string_view queue, std::string_view key, std::int64_t rowid);
  // The latest job, found by reading the table after `latest` was purged.
  void found_latest(std::string_view queue, std::string_view key, std::int64_t rowid,
                    double created);
  // Loading at open: a job of the table with its kseq, in any order;
  // done_loading() after the last.
  void load(std::string_view queue, std::string_view key, std::int64_t rowid, std::int64_t kseq,
            double created);
  void done_loading() { kseq_.clear(); }

  // The changes since the last settle() (a transaction's begin and
  // commit) can be undone: all (undo_to(0), ROLLBACK) or those since a
  // mark() (ROLLBACK TO a savepoint).
  void settle() { undo_.clear(); }
  std::size_t mark() const { return undo_.size(); }
  void undo_to(std::size_t mark);
  void clear();
  std::size_t size() const { return map_.size(); }

 private:
  // The entry of a key, its previous value noted for undo_to(); created
  // empty when absent.
  Entry& change(std::string_view queue, std::string_view key);
  void name(std::string_view queue, std::string_view key);  // into name_
  std::unordered_map<std::string, Entry> map_;
  std::unordered_map<std::string, std::int64_t> kseq_;  // load()'s, cleared after
  std::vector<std::pair<std::string, std::optional<Entry>>> undo_;
  std::string name_;  // queue, a 0 byte, key: the map's key, built in place
};

}  // namespace fenceq::daemon
