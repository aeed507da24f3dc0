#include "service/open_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "storage/sqlite/db_lock.hpp"
#include "storage/sqlite/sqlite_file_check.hpp"
#include "base/options.hpp"
#include "storage/pg/pg_store.hpp"
#include "storage/sqlite/sqlite_store.hpp"

namespace fenceq::daemon {
namespace {

// A new SQLite file is created readable by its owner alone, or by the group
// too when --ipc-mode lets the group connect (backups, the sqlite3 shell);
// never by others, and never writable by anyone but the daemon. SQLite gives
// the -wal and -shm files the database file's mode. An existing file keeps
// its mode.
void create_db_file(const Options& o) {
  if (o.db == ":memory:" || std::filesystem::exists(o.db)) return;
  const mode_t mode = (o.ipc_mode & 0070) ? 0640 : 0600;
  const mode_t old = ::umask(0077 & ~mode);
  int fd = ::open(o.db.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  ::umask(old);
  if (fd < 0) return;  // SQLite says why when it opens the path
  ::fchmod(fd, mode);  // whatever the umask was
  ::fsync(fd);
  ::close(fd);
  sync_dir_of(o.db);
}

}  // namespace

void sync_dir_of(const std::string& path) {
  // A new name is on disk only once its directory is: without this, a power
  // cut could take the whole database file away, however well its commits
  // were synced.
  auto dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

OpenedStore::OpenedStore() = default;
OpenedStore::OpenedStore(OpenedStore&&) noexcept = default;
OpenedStore::~OpenedStore() = default;

OpenedStore open_store(const Options& o) {
  OpenedStore out;
  switch (o.store) {
    case StoreKind::sqlite:
      // A file fenceqd must not write (not SQLite, truncated, read-only) is
      // refused before the lock file is made beside it; the store's
      // constructor checks the rest (docs/operating.md, "What fenceqd
      // refuses to open").
      check_db_file(o.db);
      // A SQLite file has one writer (C1.3): a second daemon is refused
      // before any bind, so it never touches our sockets.
      out.locks.push_back(std::make_unique<DbLock>(o.db));
      create_db_file(o);
      try {
        // --sync full: every COMMIT fsyncs SQLite's WAL before it returns,
        // and a reply leaves only after its COMMIT (C1.4).
        out.store = std::make_unique<SqliteStore>(o.db, o.sync, false, o.restored);
      } catch (...) {
        out.locks.back()->discard();  // a refused file: nothing left beside it
        throw;
      }
      break;
    case StoreKind::postgres:
      // PostgreSQL is shared by design (it commits durably itself, as its
      // synchronous_commit says); sidecars sharing it lock their IPC socket
      // paths instead.
      for (const auto& e : o.listen) {
        if (e.starts_with("ipc://") && e.size() > 6 && e[6] != '@') {
          out.locks.push_back(std::make_unique<DbLock>(e.substr(6), "socket"));
        }
      }
      out.store = std::make_unique<PgStore>(o.pg_dsn, true, o.restored);
      break;
  }
  return out;
}

}  // namespace fenceq::daemon
