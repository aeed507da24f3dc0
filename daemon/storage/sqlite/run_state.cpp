#include "storage/sqlite/run_state.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fenceq::daemon {

std::string run_state_path(const std::string& db_path) { return db_path + ".fenceq-state"; }

std::optional<RunState> read_run_state(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  RunState s;
  bool any = false;
  std::string key;
  std::int64_t value = 0;
  while (in >> key >> value) {
    if (key == "run") s.run = value, any = true;
    else if (key == "beat") s.beat = value;
    else if (key == "epoch") s.epoch = value;
  }
  if (!any) return std::nullopt;
  return s;
}

namespace {

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error("cannot fsync " + path + ": " + std::strerror(err));
}

}  // namespace

void write_run_state(const std::string& path, const RunState& s) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "run " << s.run << "\nbeat " << s.beat << "\nepoch " << s.epoch << "\n";
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  fsync_path(tmp, O_RDONLY);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  auto dir = std::filesystem::path(path).parent_path();
  fsync_path(dir.empty() ? "." : dir.string(), O_RDONLY | O_DIRECTORY);
}

RunBeat::RunBeat(const std::string& db_path, RunState state, std::chrono::milliseconds period)
    : db_path_(db_path), state_path_(run_state_path(db_path)), state_(state), period_(period) {
  if (sqlite3_open_v2(db_path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close_v2(db_);
    throw std::runtime_error("cannot open " + db_path + " for the run's beat: " + why);
  }
  // The serving connection's commits wait for a beat's at most this long
  // (one row, one fsync); the beat waits for theirs.
  sqlite3_busy_timeout(db_, 2000);
  // Checkpoints stay the serving connection's and its checkpointer's.
  sqlite3_wal_autocheckpoint(db_, 0);
  sqlite3_exec(db_, "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
  thread_ = std::thread([this] { run(); });
}

RunBeat::~RunBeat() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
  sqlite3_close_v2(db_);
}

void RunBeat::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, period_, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    try {
      beat();
    } catch (const std::exception& e) {
      spdlog::warn("{}: the run's beat: {}", db_path_, e.what());
    }
    lock.lock();
  }
}

bool RunBeat::beat() {
  // PRAGMA data_version changes when another connection commits.
  sqlite3_stmt* st = nullptr;
  std::int64_t version = -1;
  if (sqlite3_prepare_v2(db_, "PRAGMA data_version", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    version = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  if (version == data_version_) return false;  // nothing new: a copy now is the same
  const std::string sql = "BEGIN IMMEDIATE; INSERT INTO fenceq_meta(key, value) VALUES('beat', " +
                          std::to_string(state_.beat + 1) +
                          ") ON CONFLICT(key) DO UPDATE SET value = excluded.value; COMMIT";
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "?";
    sqlite3_free(err);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw std::runtime_error(why);
  }
  data_version_ = version;
  ++state_.beat;
  // Only once the database's beat is on disk: the state file is never
  // ahead of the database it describes.
  write_run_state(state_path_, state_);
  return true;
}

}  // namespace fenceq::daemon
