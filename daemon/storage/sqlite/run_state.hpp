// The SQLite store's state file, `<db>.fenceq-state` (C1.5): which run of
// the daemon last opened the database, how far it got (its beats) and the
// highest fence epoch ever used, kept outside the database so that an older
// copy of the database put in its place is told apart from the database
// itself. And the beat: the thread that records, about once a second while
// the database changes, how far the run got, first in the database, then in
// the state file.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace fenceq::daemon {

struct RunState {
  std::int64_t run = 0;    // starts of the daemon on this database
  std::int64_t beat = 0;   // beats of that run
  std::int64_t epoch = 0;  // the highest fence epoch ever used

  // Whether `db` (the database's own) is behind this one: an older copy.
  bool ahead_of(const RunState& db) const {
    return run > db.run || (run == db.run && beat > db.beat);
  }
};

// The state file's name for the database at `db_path`.
std::string run_state_path(const std::string& db_path);
// The file's contents; nullopt when it is missing or unreadable (a file
// system that lost it: then the database is taken as it is).
std::optional<RunState> read_run_state(const std::string& path);
// Writes it atomically and durably: a temporary file, fsync, rename, fsync
// of the folder. Throws std::runtime_error.
void write_run_state(const std::string& path, const RunState& s);

// The beat's thread, on a connection of its own to the database at
// `db_path`: every `period`, if another connection committed since the last
// beat, adds 1 to fenceq_meta's `beat` (synchronous=FULL, so it is on disk),
// then writes the state file. A copy taken before a beat is then behind the
// state file once the beat is written, however the copy was made.
class RunBeat {
 public:
  RunBeat(const std::string& db_path, RunState state, std::chrono::milliseconds period);
  RunBeat(const RunBeat&) = delete;
  RunBeat& operator=(const RunBeat&) = delete;
  ~RunBeat();

 private:
  void run();
  bool beat();

  std::string db_path_, state_path_;
  RunState state_;
  std::chrono::milliseconds period_;
  sqlite3* db_ = nullptr;
  std::int64_t data_version_ = -1;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace fenceq::daemon
