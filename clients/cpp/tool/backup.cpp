#include "backup.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fenceq::tool {
namespace {

struct Closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using Db = std::unique_ptr<sqlite3, Closer>;

Db open_db(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) {
    throw std::runtime_error("cannot open " + path + ": " +
                             (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_busy_timeout(raw, 5000);
  return db;
}

void exec(sqlite3* db, const std::string& sql, const std::string& what) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw std::runtime_error(what + ": " + why);
  }
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error("cannot fsync " + path + ": " + std::strerror(err));
}

// The copy's bytes written so far go to disk in slices as the copy grows,
// rather than all at its end: on ext4 (data=ordered) every fsync of the
// daemon's WAL commits the file system's journal, which first writes out
// the data of every file with blocks allocated in it, the copy's too: a
// 300 MB copy flushed at once held the daemon's commits for the whole
// write. Here at most kFlushSlice bytes of the copy are waiting at any time.
class CopyFlusher {
 public:
  static constexpr off_t kFlushSlice = 4 << 20;

  explicit CopyFlusher(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  }
  ~CopyFlusher() { ::close(fd_); }
  CopyFlusher(const CopyFlusher&) = delete;
  CopyFlusher& operator=(const CopyFlusher&) = delete;

  // Writes out, and waits for, the bytes added since the last call, a slice
  // at a time, once at least a slice was added (`all`: whatever was added).
  void flush(bool all) {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return;
    while (st.st_size - done_ >= (all ? 1 : kFlushSlice)) {
      const off_t n = std::min<off_t>(kFlushSlice, st.st_size - done_);
      // A failure here only loses the pacing: the fsync at the end decides.
      ::sync_file_range(fd_, done_, n,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER);
      done_ += n;
    }
  }

 private:
  int fd_;
  off_t done_ = 0;
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int run_backup(const BackupOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(o.file, ec) && !o.force) {
    std::cerr << "fenceq: " << o.file << " exists: give --force to overwrite it\n";
    return 1;
  }
  if (!fs::exists(o.db, ec)) throw std::runtime_error("no database at " + o.db + " (give --db)");
  const auto started = std::chrono::steady_clock::now();

  // The daemon's file, read only; one read transaction for the whole copy:
  // in WAL mode it sees one commit and blocks no writer, and the backup is
  // not restarted by the daemon's commits (it would be, step after step,
  // were each step its own transaction).
  Db src = open_db(o.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
  exec(src.get(), "BEGIN", "begin a read of " + o.db);
  {
    sqlite3_stmt* st = nullptr;
    bool ok = sqlite3_prepare_v2(src.get(),
                                 "SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                 "name = 'fenceq_meta'",
                                 -1, &st, nullptr) == SQLITE_OK &&
              sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (!ok) throw std::runtime_error(o.db + " is not a fenceqd database (no fenceq_meta)");
  }

  // Into a file of its own beside FILE, renamed over it once complete.
  const std::string part = o.file + ".part-" + std::to_string(::getpid());
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) fs::remove(part + suffix, ec);
  Db dst = open_db(part, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
  // A file nobody else reads until it is complete, fsynced and renamed: no
  // rollback journal and no fsync of SQLite's own while it is written
  // (CopyFlusher paces its writes), and a small page cache, so that the
  // pages reach the file step by step rather than at the end.
  exec(dst.get(), "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-2048",
       "set up the copy");
  CopyFlusher flusher(part);
  sqlite3_backup* b = sqlite3_backup_init(dst.get(), "main", src.get(), "main");
  if (!b) throw std::runtime_error("cannot start the backup: " + std::string(sqlite3_errmsg(dst.get())));
  const bool tty = ::isatty(2);
  int last_percent = -1;
  int rc = SQLITE_OK;
  while (true) {
    rc = sqlite3_backup_step(b, o.pages);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
    const int total = sqlite3_backup_pagecount(b);
    const int left = sqlite3_backup_remaining(b);
    if (tty && total > 0) {
      const int percent = static_cast<int>(100.0 * (total - left) / total);
      if (percent != last_percent) {
        std::cerr << "\rfenceq backup: " << percent << "% (" << (total - left) << " of " << total
                  << " pages)" << std::flush;
        last_percent = percent;
      }
    }
    flusher.flush(false);
    // The copy's own work is short; the pause leaves the disk and a core to
    // the daemon between steps.
    std::this_thread::sleep_for(std::chrono::milliseconds(o.pause_ms));
  }
  const int pages = sqlite3_backup_pagecount(b);
  sqlite3_backup_finish(b);
  flusher.flush(true);  // what the backup's commit wrote last
  if (tty) std::cerr << "\r" << std::string(60, ' ') << "\r" << std::flush;
  if (rc != SQLITE_DONE) {
    const std::string why = sqlite3_errstr(rc);
    dst.reset();
    fs::remove(part, ec);
    throw std::runtime_error("the backup of " + o.db + " failed: " + why);
  }
  sqlite3_exec(src.get(), "COMMIT", nullptr, nullptr, nullptr);
  const int page_size = [&] {
    sqlite3_stmt* st = nullptr;
    int n = 0;
    if (sqlite3_prepare_v2(src.get(), "PRAGMA page_size", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return n;
  }();
  src.reset();

  // The copy stands alone (no -wal beside it) and says it is a backup:
  // fenceqd opening it raises every fence (C1.5).
  const std::string taken = utc_now();
  exec(dst.get(), "PRAGMA journal_mode=DELETE", "set the copy's journal");
  exec(dst.get(), "PRAGMA synchronous=FULL", "set the copy's sync");
  exec(dst.get(),
       "INSERT INTO fenceq_meta(key, value) VALUES('backup_taken', '" + taken +
           "') ON CONFLICT(key) DO UPDATE SET value = excluded.value",
       "mark the copy");
  dst.reset();
  fsync_path(part, O_RDONLY);
  if (o.force) {
    // A log left beside an old FILE would be replayed into the new one.
    for (const char* suffix : {"-journal", "-wal", "-shm"}) fs::remove(o.file + suffix, ec);
  }
  if (::rename(part.c_str(), o.file.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + part + " to " + o.file + ": " +
                             std::strerror(errno));
  }
  auto dir = fs::path(o.file).parent_path();
  fsync_path(dir.empty() ? "." : dir.string(), O_RDONLY | O_DIRECTORY);

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double bytes = static_cast<double>(pages) * page_size;
  std::cout << nlohmann::ordered_json{{"backup", o.file},
                                      {"of", o.db},
                                      {"taken", taken},
                                      {"bytes", static_cast<std::int64_t>(bytes)},
                                      {"seconds", std::round(seconds * 1000) / 1000},
                                      {"mb_per_s", std::round(bytes / 1e6 / std::max(seconds, 1e-6) * 10) / 10}}
                   .dump()
            << "\n";
  return 0;
}

int run_migrate(const MigrateOptions& o) {
  std::string daemon = o.fenceqd;
  if (daemon.empty()) {
    // The fenceqd installed beside this tool (the same package, the same
    // version), else the first on PATH.
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    auto beside = self.parent_path() / "fenceqd";
    daemon = !ec && std::filesystem::exists(beside) ? beside.string() : "fenceqd";
  }
  std::vector<std::string> args{daemon, "--db", o.db, "--migrate-to", o.to};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  ::execvp(argv[0], argv.data());
  std::cerr << "fenceq: migrate: cannot run " << daemon << ": " << std::strerror(errno)
            << " (give its path with --fenceqd)\n";
  return 1;
}

}  // namespace fenceq::tool
