// The unique keys of a SQLite store's jobs, in memory (key_map.hpp).
#include "key_map.hpp"

namespace fenceq::daemon {

void KeyMap::name(std::string_view queue, std::string_view key) {
  name_.assign(queue);
  name_.push_back('\0');
  name_.append(key);
}

const KeyMap::Entry* KeyMap::find(std::string_view queue, std::string_view key) {
  name(queue, key);
  auto it = map_.find(name_);
  return it == map_.end() ? nullptr : &it->second;
}

KeyMap::Entry& KeyMap::change(std::string_view queue, std::string_view key) {
  name(queue, key);
  auto [it, inserted] = map_.try_emplace(name_);
  undo_.emplace_back(name_, inserted ? std::nullopt : std::optional<Entry>(it->second));
  return it->second;
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
  if (--e.jobs <= 0) map_.erase(name_);  // undo_ holds its value
}

void KeyMap::found_latest(std::string_view queue, std::string_view key, std::int64_t rowid,
                          double created) {
  Entry& e = change(queue, key);
  e.latest = rowid;
  e.latest_created = created;
}

void KeyMap::load(std::string_view queue, std::string_view key, std::int64_t rowid,
                  std::int64_t kseq, double created) {
  name(queue, key);
  Entry& e = map_[name_];
  std::int64_t& top = kseq_[name_];
  if (e.jobs == 0 || kseq > top || (kseq == top && rowid > e.newest)) {
    e.newest = rowid;
    top = kseq;
  }
  if (e.jobs == 0 || created > e.latest_created ||
      (created == e.latest_created && rowid > e.latest)) {
    e.latest = rowid;
    e.latest_created = created;
  }
  ++e.jobs;
}

void KeyMap::undo_to(std::size_t mark) {
  while (undo_.size() > mark) {
    auto& [key, before] = undo_.back();
    if (before) {
      map_.insert_or_assign(key, *before);
    } else {
      map_.erase(key);
    }
    undo_.pop_back();
  }
}

void KeyMap::clear() {
  map_.clear();
  kseq_.clear();
  undo_.clear();
}

}  // namespace fenceq::daemon
