// The unique keys of a SQLite store's jobs, in memory (C3.10, schema
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
// (SqliteStore::load_keys: 400,000 keys added 0.34 s to a start) and holds
// each key with jobs kept (done ones too, until purged): 48 bytes, its
// queue's and its own bytes, and 8 to 16 bytes of index (400,000 keys of
// ~20 bytes: 42 MiB more peak RSS, growth included).
//
// A transaction's changes are undone with it: every change notes what it
// replaced (undo_to(), at ROLLBACK and ROLLBACK TO a savepoint).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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
  };

  // A copy of the key's entry, or none when the table holds no job of it.
  std::optional<Entry> find(std::string_view queue, std::string_view key);
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
  // Loading at open: the table's keyed jobs in the order of their kseq
  // (nothing to undo).
  void load(std::string_view queue, std::string_view key, std::int64_t rowid, double created);

  // The changes since the last settle() (a transaction's begin and
  // commit) can be undone: all (undo_to(0), ROLLBACK) or those since a
  // mark() (ROLLBACK TO a savepoint).
  void settle();
  std::size_t mark() const { return undo_.size(); }
  void undo_to(std::size_t mark);
  void clear();
  std::size_t size() const { return used_; }

 private:
  // Every byte a key takes is memory a fresh fenceqd touches for the first
  // time, and on this project's VMs a first touch of a 4 KiB page costs
  // ~11 us (a page fault the hypervisor sees): a std::unordered_map of
  // strings (~150 bytes a key) and a flat table of 56-byte slots growing by
  // copies each cost keyed enqueue_many a fifth of its throughput. So:
  // an index of 8-byte slots (open addressing, linear probing, at most
  // half full), each the top 32 bits of the key's hash (its home too) and
  // the number of its record; records of 48 bytes and the keys' bytes in
  // chunks that never move; a record erased is reused after the
  // transaction settles.
  struct Record {
    Entry e;
    std::uint64_t off = 0;  // the key's bytes (the queue's length in 2 bytes, queue, key) in chunks_
    std::uint32_t len = 0;
  };
  struct Undo {
    std::uint32_t rec = 0;
    bool had = false;  // false: made in the transaction
    Entry before;
  };
  static constexpr std::size_t kRecordsPerChunk = 1024;
  static constexpr std::size_t kByteChunk = 64 * 1024;

  void name(std::string_view queue, std::string_view key);  // into name_, tag_
  // The slot of name_, or of the empty one it would take (`found` says).
  std::size_t probe(bool& found) const;
  Record& record(std::uint32_t rec) { return records_[rec / kRecordsPerChunk][rec % kRecordsPerChunk]; }
  const Record& record(std::uint32_t rec) const {
    return records_[rec / kRecordsPerChunk][rec % kRecordsPerChunk];
  }
  const char* bytes(const Record& r) const { return bytes_[r.off / kByteChunk].get() + r.off % kByteChunk; }
  // The key's entry, made when absent; noted for undo_to() unless loading.
  Entry& change(std::string_view queue, std::string_view key, bool noted = true);
  std::uint32_t new_record();  // name_'s bytes stored
  std::uint64_t store_bytes();  // name_'s, where they start
  void insert_slot(std::uint64_t slot);
  void erase_slot(std::size_t i);
  void grow();
  void compact();  // the keys' bytes without those erased

  std::vector<std::uint64_t> slots_;  // 0: empty
  std::size_t used_ = 0;
  std::vector<std::unique_ptr<Record[]>> records_;
  std::uint32_t records_made_ = 0;
  std::vector<std::uint32_t> free_, freed_;  // reusable; erased in the open transaction
  std::vector<std::unique_ptr<char[]>> bytes_;
  std::uint64_t bytes_end_ = 0, dead_bytes_ = 0;
  std::vector<Undo> undo_;
  std::string name_;
  std::uint32_t tag_ = 0;  // the top 32 bits of name_'s hash
};

}  // namespace fenceq::daemon
