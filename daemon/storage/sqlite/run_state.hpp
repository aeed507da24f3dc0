// The SQLite store's state file, `<db>.fenceq-state` (C1.5): which run of
// the daemon last opened the database, how far it got (its beats) and the
// highest fence epoch ever used, kept outside the database so that an older
// copy of the database put in its place is told apart from the database
// itself. And the beat: the thread that records, about once a second while
// the database changes, how far the run got, first in the database, then in
// the state file.
#pragma once

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

// The run's beat. About once a second, the store's next commit also adds 1
// to fenceq_meta's `beat` (the serving connection's own transaction: no
// second writer on the file, no fsync of its own), and once that commit
// returned, this thread writes the state file (its fsyncs off the serving
// thread). A copy taken before a beat is then behind the state file once the
// beat is written, however the copy was made. The state file may lag the
// database (taken as normal), never lead it: it is written after the commit.
class RunBeat {
 public:
  RunBeat(const std::string& db_path, RunState state, std::chrono::milliseconds period);
  RunBeat(const RunBeat&) = delete;
  RunBeat& operator=(const RunBeat&) = delete;
  // Writes the last beat's state file, if not yet, and stops the thread.
  ~RunBeat();

  // The beat the commit now being made should store, or nullopt when the
  // last one is younger than the period.
  std::optional<std::int64_t> due();
  // The commit that stored `beat` returned: its state file is written next.
  void committed(std::int64_t beat);
  // A commit that stored no beat returned: the next beat is owed.
  void owed() { owed_ = true; }
  // When a beat is owed (commits since the last), its time; nullopt when
  // none is: the store's upkeep (Store::upkeep_due) commits it then, so that
  // the writes before a quiet spell are beaten too.
  std::optional<std::chrono::steady_clock::time_point> owed_at() const {
    if (!owed_) return std::nullopt;
    return last_ + period_;
  }

 private:
  void run();

  std::string state_path_;
  std::chrono::milliseconds period_;
  std::chrono::steady_clock::time_point last_;
  std::int64_t stored_beat_;  // the serving thread's: the last beat committed
  bool owed_ = false;         // the serving thread's: commits since that beat
  std::mutex mu_;
  std::condition_variable wake_;
  RunState state_;         // under mu_: what the file should say
  bool dirty_ = false;     // under mu_: state_ not written yet
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace fenceq::daemon
