// The unique keys of a SQLite store's jobs, in memory (key_map.hpp).
#include "storage/sqlite/key_map.hpp"

#include <cstring>
#include <functional>
#include <stdexcept>

#include "fenceq_protocol/limits.hpp"

namespace fenceq::daemon {
namespace {
using protocol::kMaxKeyBytes;
using protocol::kMaxQueueBytes;

std::uint32_t tag_of(std::uint64_t slot) { return static_cast<std::uint32_t>(slot >> 32); }
std::uint32_t record_of(std::uint64_t slot) { return static_cast<std::uint32_t>(slot) - 1; }
std::uint64_t slot_of(std::uint32_t tag, std::uint32_t rec) {
  return (std::uint64_t{tag} << 32) | (std::uint64_t{rec} + 1);
}
}  // namespace

void KeyMap::name(std::string_view queue, std::string_view key) {
  // The queue's length (2 bytes), the queue, the key: queue + '\0' + key was
  // ambiguous when either holds U+0000 ("payments", "acct\0123" and
  // "payments\0acct", "123" met; C3.10). In memory only: nothing stored.
  static_assert(kMaxQueueBytes <= 0xFFFF);
  const auto lo = static_cast<char>(queue.size() & 0xFF);
  const auto hi = static_cast<char>(queue.size() >> 8);
  // A keyed enqueue names its key twice (find, then added): hashed once.
  if (name_.size() == 2 + queue.size() + key.size() && name_[0] == lo && name_[1] == hi &&
      name_.compare(2, queue.size(), queue) == 0 &&
      name_.compare(2 + queue.size(), key.size(), key) == 0) {
    return;
  }
  name_.clear();
  name_.push_back(lo);
  name_.push_back(hi);
  name_.append(queue);
  name_.append(key);
  tag_ = static_cast<std::uint32_t>(std::hash<std::string_view>{}(name_) >> 32);
}

std::size_t KeyMap::probe(bool& found) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = tag_ & mask;; i = (i + 1) & mask) {
    const std::uint64_t s = slots_[i];
    found = s != 0;
    if (!found) return i;
    if (tag_of(s) == tag_) {
      const Record& r = record(record_of(s));
      if (r.len == name_.size() && std::memcmp(bytes(r), name_.data(), r.len) == 0) return i;
    }
  }
}

std::optional<KeyMap::Entry> KeyMap::find(std::string_view queue, std::string_view key) {
  if (used_ == 0) return std::nullopt;
  name(queue, key);
  bool found = false;
  const std::size_t i = probe(found);
  if (!found) return std::nullopt;
  return record(record_of(slots_[i])).e;
}

void KeyMap::insert_slot(std::uint64_t slot) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = tag_of(slot) & mask;
  while (slots_[i] != 0) i = (i + 1) & mask;
  slots_[i] = slot;
  ++used_;
}

void KeyMap::grow() {
  std::vector<std::uint64_t> old(slots_.empty() ? 1024 : slots_.size() * 2);
  old.swap(slots_);
  used_ = 0;
  for (std::uint64_t s : old) {
    if (s != 0) insert_slot(s);
  }
}

// Backward-shift deletion: the slots after i that probed past it move up.
void KeyMap::erase_slot(std::size_t i) {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t j = (i + 1) & mask; slots_[j] != 0; j = (j + 1) & mask) {
    const std::size_t home = tag_of(slots_[j]) & mask;
    // Slot j may fill i when its home is not in (i, j], cyclically.
    const bool between = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!between) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = 0;
  --used_;
}

std::uint32_t KeyMap::new_record() {
  std::uint32_t rec;
  if (!free_.empty()) {
    rec = free_.back();
    free_.pop_back();
  } else {
    rec = records_made_++;
    if (rec % kRecordsPerChunk == 0) records_.push_back(std::make_unique<Record[]>(kRecordsPerChunk));
  }
  record(rec) = Record{Entry{}, store_bytes(), static_cast<std::uint32_t>(name_.size())};
  return rec;
}

// name_'s bytes, after the last key's in its chunk if they fit, else at
// the start of a new one (kMaxQueueBytes + kMaxKeyBytes + 2 fit in one).
std::uint64_t KeyMap::store_bytes() {
  static_assert(kMaxQueueBytes + kMaxKeyBytes + 2 <= kByteChunk);
  const std::size_t len = name_.size();
  if (len > kByteChunk) throw std::length_error("a unique key longer than the protocol allows");
  std::uint64_t at = bytes_end_;
  if (at % kByteChunk == 0 || at % kByteChunk + len > kByteChunk) {
    at = std::uint64_t{bytes_.size()} * kByteChunk;
    bytes_.push_back(std::make_unique_for_overwrite<char[]>(kByteChunk));
  }
  std::memcpy(bytes_[at / kByteChunk].get() + at % kByteChunk, name_.data(), len);
  bytes_end_ = at + len;
  return at;
}

KeyMap::Entry& KeyMap::change(std::string_view queue, std::string_view key, bool noted) {
  if ((used_ + 1) * 2 > slots_.size()) grow();
  name(queue, key);
  bool found = false;
  const std::size_t i = probe(found);
  std::uint32_t rec;
  if (found) {
    rec = record_of(slots_[i]);
  } else {
    rec = new_record();
    slots_[i] = slot_of(tag_, rec);
    ++used_;
  }
  if (noted) undo_.push_back(Undo{rec, found, record(rec).e});
  return record(rec).e;
}

void KeyMap::added(std::string_view queue, std::string_view key, std::int64_t rowid,
                   double created) {
  Entry& e = change(queue, key);
  e.newest = rowid;
  if (e.jobs == 0 || created >= e.latest_created) {
    e.latest = rowid;
    e.latest_created = created;
  }
  ++e.jobs;
}

void KeyMap::revived(std::string_view queue, std::string_view key, std::int64_t rowid) {
  change(queue, key).newest = rowid;
}

void KeyMap::removed(std::string_view queue, std::string_view key, std::int64_t rowid) {
  Entry& e = change(queue, key);
  if (e.newest == rowid) e.newest = 0;
  if (e.latest == rowid) e.latest = 0;
  if (--e.jobs > 0) return;
  bool found = false;
  const std::size_t i = probe(found);  // name_ is still the key's
  const std::uint32_t rec = record_of(slots_[i]);
  erase_slot(i);
  dead_bytes_ += record(rec).len;
  freed_.push_back(rec);  // reusable once settled: an undo may bring it back
}

void KeyMap::found_latest(std::string_view queue, std::string_view key, std::int64_t rowid,
                          double created) {
  Entry& e = change(queue, key);
  e.latest = rowid;
  e.latest_created = created;
}

void KeyMap::load(std::string_view queue, std::string_view key, std::int64_t rowid,
                  double created) {
  Entry& e = change(queue, key, false);
  e.newest = rowid;  // in the order of kseq: the last is the newest
  if (e.jobs == 0 || created >= e.latest_created) {
    e.latest = rowid;
    e.latest_created = created;
  }
  ++e.jobs;
}

void KeyMap::undo_to(std::size_t mark) {
  while (undo_.size() > mark) {
    const Undo u = undo_.back();
    undo_.pop_back();
    Record& r = record(u.rec);
    name_.assign(bytes(r), r.len);
    tag_ = static_cast<std::uint32_t>(std::hash<std::string_view>{}(name_) >> 32);
    bool found = false;
    const std::size_t i = probe(found);
    if (found && !u.had) {
      // Made in the transaction: gone again, with its record and bytes.
      erase_slot(i);
      dead_bytes_ += r.len;
      free_.push_back(u.rec);
      continue;
    }
    if (!found && u.had) {
      // Erased in the transaction: back, its record and bytes untouched.
      if ((used_ + 1) * 2 > slots_.size()) grow();
      insert_slot(slot_of(tag_, u.rec));
      dead_bytes_ -= r.len;
      std::erase(freed_, u.rec);
    }
    r.e = u.before;
  }
}

void KeyMap::settle() {
  undo_.clear();
  free_.insert(free_.end(), freed_.begin(), freed_.end());
  freed_.clear();
  if (dead_bytes_ > kByteChunk * 16 && dead_bytes_ * 2 > bytes_end_) compact();
}

void KeyMap::compact() {
  auto old = std::move(bytes_);
  bytes_.clear();
  bytes_end_ = 0;
  dead_bytes_ = 0;
  for (std::uint64_t s : slots_) {
    if (s == 0) continue;
    Record& r = record(record_of(s));
    name_.assign(old[r.off / kByteChunk].get() + r.off % kByteChunk, r.len);
    r.off = store_bytes();
  }
  name_.clear();  // tag_ is not its hash: the next name() hashes
}

void KeyMap::clear() {
  slots_.clear();
  used_ = 0;
  records_.clear();
  records_made_ = 0;
  free_.clear();
  freed_.clear();
  bytes_.clear();
  bytes_end_ = dead_bytes_ = 0;
  undo_.clear();
  name_.clear();
}

}  // namespace fenceq::daemon
