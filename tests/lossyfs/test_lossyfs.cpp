// Tests of fenceq-lossyfs against the real mount: every case mounts its own
// instance over a fresh /tmp directory, acts through the mount with plain
// system calls (or SQLite in a child process killed with SIGKILL, as a crash
// would), cuts the power with SIGUSR1 and looks at what is left.
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lossy_mount.hpp"

namespace fs = std::filesystem;

namespace {

// prefix + number, by append (GCC 12 warns falsely on "literal" + std::string
// at -O2, bug 105329).
std::string numbered(std::string prefix, long long n) { return prefix.append(std::to_string(n)); }

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

using fenceq::test::mounted;

// fenceq-lossyfs on a fresh directory (tests/support/lossy_mount.hpp):
// BACKING is <dir>/backing, MOUNT is <dir>/mnt, `setup` runs on BACKING
// before mounting (the durable state to start from). The destructor stops
// it, unmounts whatever is left (even when the test failed or the process
// hung) and removes the directory. Dead mounts of killed runs of these tests
// are reaped as fenceq-history's are: the same /tmp/fql-* prefix.
class Lossy : public fenceq::test::LossyMount {
 public:
  explicit Lossy(std::vector<std::string> flags = {},
                 const std::function<void(const std::string&)>& setup = nullptr)
      : LossyMount(LOSSYFS_BIN, std::move(flags), setup) {}
};

// --- file helpers (plain system calls, so the test says which ones run) ------

class File {
 public:
  File(const std::string& path, int flags, mode_t mode = 0644)
      : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) throw std::runtime_error(sys_error("open " + path));
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd() const { return fd_; }
  void pwrite(const std::string& data, off_t off) {
    if (::pwrite(fd_, data.data(), data.size(), off) != static_cast<ssize_t>(data.size())) {
      throw std::runtime_error(sys_error("pwrite"));
    }
  }
  void truncate(off_t size) {
    if (::ftruncate(fd_, size) != 0) throw std::runtime_error(sys_error("ftruncate"));
  }
  void fsync() {
    if (::fsync(fd_) != 0) throw std::runtime_error(sys_error("fsync"));
  }
  void fdatasync() {
    if (::fdatasync(fd_) != 0) throw std::runtime_error(sys_error("fdatasync"));
  }

 private:
  int fd_;
};

void write_file(const std::string& path, const std::string& data, bool sync) {
  File f(path, O_WRONLY | O_CREAT | O_TRUNC);
  f.pwrite(data, 0);
  if (sync) f.fsync();
}

std::optional<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// fsync on a directory handle: FUSE's fsyncdir.
void fsync_dir(const std::string& path) {
  File d(path, O_RDONLY | O_DIRECTORY);
  d.fsync();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Every path below `root` (relative) with its content ("<dir>" for
// directories, "-> target" for symlinks, "<special>" for the rest), hidden
// orphans excluded.
std::map<std::string, std::string> tree(const std::string& root) {
  std::map<std::string, std::string> out;
  for (auto& e : fs::recursive_directory_iterator(root)) {
    std::string rel = fs::relative(e.path(), root).string();
    if (rel.rfind(".lossyfs-orphans", 0) == 0) continue;
    if (e.is_symlink()) {
      out[rel] = "-> " + fs::read_symlink(e.path()).string();
    } else if (e.is_directory()) {
      out[rel] = "<dir>";
    } else if (e.is_regular_file()) {
      out[rel] = read_file(e.path().string()).value_or("<unreadable>");
    } else {
      out[rel] = "<special>";  // never opened: a FIFO would block
    }
  }
  return out;
}

std::string pattern(char c, std::size_t n) { return std::string(n, c); }

// --- SQLite in a child process, killed like a crashed program ----------------

void sql(sqlite3* db, const std::string& stmt) {
  char* err = nullptr;
  if (sqlite3_exec(db, stmt.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    throw std::runtime_error(stmt + ": " + msg);
  }
}

std::string sql_value(sqlite3* db, const std::string& stmt) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, stmt.c_str(), -1, &s, nullptr) != SQLITE_OK) {
    throw std::runtime_error(stmt + ": " + sqlite3_errmsg(db));
  }
  std::string v;
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(s, 0);
    v = t ? reinterpret_cast<const char*>(t) : "";
  } else if (rc != SQLITE_DONE) {
    std::string msg = sqlite3_errmsg(db);
    sqlite3_finalize(s);
    throw std::runtime_error(stmt + ": " + msg);
  }
  sqlite3_finalize(s);
  return v;
}

// Runs `work` on the database in a child process; once it has finished, the
// child is killed with SIGKILL (no close, no checkpoint: a crash). Returns
// the child's error message, empty on success.
std::string crash_after(const std::string& db_path, const std::function<void(sqlite3*)>& work) {
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error(sys_error("pipe"));
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    std::string msg = "ok";
    try {
      sqlite3* db = nullptr;
      if (sqlite3_open(db_path.c_str(), &db) != SQLITE_OK) throw std::runtime_error("open failed");
      sqlite3_busy_timeout(db, 10000);
      work(db);
    } catch (const std::exception& e) {
      msg = e.what();
    }
    msg += "\n";
    [[maybe_unused]] ssize_t w = ::write(p[1], msg.data(), msg.size());
    for (;;) ::pause();  // waits for SIGKILL with the database still open
  }
  ::close(p[1]);
  std::string msg;
  char c;
  while (::read(p[0], &c, 1) == 1 && c != '\n') msg += c;
  ::close(p[0]);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return msg == "ok" ? "" : (msg.empty() ? "child died" : msg);
}

struct DbCheck {
  long rows = -1;
  std::string integrity, journal_mode;
};

// Opens the database in this process after a cut, like a restarted program.
DbCheck check_db(const std::string& db_path) {
  sqlite3* db = nullptr;
  DbCheck out;
  if (sqlite3_open(db_path.c_str(), &db) != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db);
    sqlite3_close(db);
    throw std::runtime_error("reopen: " + msg);
  }
  try {
    out.integrity = sql_value(db, "PRAGMA integrity_check");
    out.journal_mode = sql_value(db, "PRAGMA journal_mode");
    out.rows = std::stol(sql_value(db, "SELECT count(*) FROM t"));
  } catch (...) {
    sqlite3_close(db);
    throw;
  }
  sqlite3_close(db);
  return out;
}

void insert_rows(sqlite3* db, int from, int count, int per_txn) {
  for (int i = 0; i < count; i += per_txn) {
    sql(db, "BEGIN");
    for (int j = i; j < std::min(count, i + per_txn); ++j) {
      sql(db, numbered("INSERT INTO t(id, body) VALUES(", from + j) + ", randomblob(300))");
    }
    sql(db, "COMMIT");
  }
}

}  // namespace

TEST_CASE("an unsynced write is lost at a power cut, an fsynced one stays") {
  Lossy m({}, [](const std::string& b) { write_file(b + "/a", "old contents", false); });
  {
    File f(m.at("a"), O_WRONLY);
    f.pwrite("NEW", 0);
    f.pwrite(" and more at the end", 12);  // grows the file too
  }
  CHECK(read_file(m.at("a")) == "NEW contents and more at the end");
  m.cut();
  CHECK(read_file(m.at("a")) == "old contents");

  {
    File f(m.at("a"), O_WRONLY);
    f.pwrite("NEW", 0);
    f.fdatasync();
    f.pwrite("LOST", 4);  // after the last fdatasync
  }
  CHECK(read_file(m.at("a")) == "NEW LOSTents");
  m.cut();
  CHECK(read_file(m.at("a")) == "NEW contents");
  CHECK(read_file(m.in_backing("a")) == "NEW contents");  // BACKING is the durable state

  // A file opened before the cut by a program that survived it reads the
  // durable state through the same descriptor.
  File keep(m.at("a"), O_RDWR);
  keep.pwrite("xyz", 0);
  m.cut();
  char buf[12];
  REQUIRE(::pread(keep.fd(), buf, sizeof buf, 0) == 12);
  CHECK(std::string(buf, 12) == "NEW contents");
}

TEST_CASE("a new file needs an fsync of its directory, its own fsync is not enough") {
  Lossy m;
  write_file(m.at("only-file-synced"), "data", true);
  write_file(m.at("both-synced"), "data", true);
  write_file(m.at("only-dir-synced"), "data", false);
  write_file(m.at("nothing-synced"), "data", false);
  fsync_dir(m.mnt());
  write_file(m.at("after-dir-sync"), "data", true);
  REQUIRE(exists(m.at("after-dir-sync")));
  m.cut();
  // Created before the directory fsync: the name survives, with the data
  // only when the file was fsynced too (an empty file otherwise).
  CHECK(read_file(m.at("both-synced")) == "data");
  CHECK(read_file(m.at("only-file-synced")) == "data");
  CHECK(read_file(m.at("only-dir-synced")) == "");
  CHECK(read_file(m.at("nothing-synced")) == "");
  CHECK_FALSE(exists(m.at("after-dir-sync")));

  // In a new directory, f's name needs d fsynced and d's name needs the
  // parent fsynced: each alone is not enough.
  auto make = [&] {
    fs::create_directory(m.at("d"));
    write_file(m.at("d/f"), "deep", true);
  };
  make();
  fsync_dir(m.at("d"));  // f is in d, durably, but d has no durable name
  m.cut();
  CHECK_FALSE(exists(m.at("d")));
  make();
  fsync_dir(m.mnt());  // d's name, but not f's
  m.cut();
  CHECK(fs::is_directory(m.at("d")));
  CHECK_FALSE(exists(m.at("d/f")));
  fs::remove(m.at("d"));
  make();
  fsync_dir(m.at("d"));
  fsync_dir(m.mnt());
  m.cut();
  CHECK(read_file(m.at("d/f")) == "deep");
  CHECK(tree(m.mnt()) == tree(m.backing()));
}

TEST_CASE("a rename without an fsync of its directory is undone, with one it is kept") {
  Lossy m({}, [](const std::string& b) {
    write_file(b + "/a", "A", false);
    write_file(b + "/x", "X", false);
    write_file(b + "/y", "Y", false);
    fs::create_directory(b + "/d1");
    fs::create_directory(b + "/d2");
    write_file(b + "/d1/f", "F", false);
  });
  fs::rename(m.at("a"), m.at("b"));
  fs::rename(m.at("x"), m.at("y"));  // replaces y
  CHECK(read_file(m.at("y")) == "X");
  CHECK_FALSE(exists(m.at("x")));
  m.cut();
  CHECK(read_file(m.at("a")) == "A");
  CHECK_FALSE(exists(m.at("b")));
  CHECK(read_file(m.at("x")) == "X");
  CHECK(read_file(m.at("y")) == "Y");

  fs::rename(m.at("a"), m.at("b"));
  fs::rename(m.at("x"), m.at("y"));
  fsync_dir(m.mnt());
  m.cut();
  CHECK_FALSE(exists(m.at("a")));
  CHECK(read_file(m.at("b")) == "A");
  CHECK_FALSE(exists(m.at("x")));
  CHECK(read_file(m.at("y")) == "X");

  // Across directories: an fsync of either one commits the whole rename.
  fs::rename(m.at("d1/f"), m.at("d2/g"));
  m.cut();
  CHECK(read_file(m.at("d1/f")) == "F");
  CHECK_FALSE(exists(m.at("d2/g")));
  fs::rename(m.at("d1/f"), m.at("d2/g"));
  fsync_dir(m.at("d2"));
  m.cut();
  CHECK_FALSE(exists(m.at("d1/f")));
  CHECK(read_file(m.at("d2/g")) == "F");
  CHECK(tree(m.mnt()) == tree(m.backing()));
}

TEST_CASE("an unlink or rmdir without an fsync of its directory is undone") {
  Lossy m({}, [](const std::string& b) {
    write_file(b + "/f", "keep me", false);
    fs::create_directory(b + "/empty");
  });
  fs::remove(m.at("f"));
  fs::remove(m.at("empty"));
  CHECK_FALSE(exists(m.at("f")));
  CHECK_FALSE(exists(m.at("empty")));
  m.cut();
  CHECK(read_file(m.at("f")) == "keep me");
  CHECK(fs::is_directory(m.at("empty")));

  // An unlinked file stays readable through an open descriptor.
  {
    File f(m.at("f"), O_RDONLY);
    fs::remove(m.at("f"));
    char buf[7];
    CHECK(::pread(f.fd(), buf, 7, 0) == 7);
    fsync_dir(m.mnt());
  }
  fs::remove(m.at("empty"));
  fsync_dir(m.mnt());
  m.cut();
  CHECK_FALSE(exists(m.at("f")));
  CHECK_FALSE(exists(m.at("empty")));
  CHECK(tree(m.mnt()) == tree(m.backing()));
}

TEST_CASE("hard links, symlinks and special files need a directory fsync like any name") {
  Lossy m({}, [](const std::string& b) { write_file(b + "/a", "shared", false); });
  auto make = [&] {
    fs::create_hard_link(m.at("a"), m.at("b"));
    fs::create_symlink("a", m.at("s"));
    REQUIRE(::mkfifo(m.at("p").c_str(), 0600) == 0);
    fs::create_directory(m.at("d"));
    fs::create_hard_link(m.at("a"), m.at("d/c"));  // in a new directory
  };
  make();
  CHECK(fs::hard_link_count(m.at("a")) == 3);
  m.cut();
  CHECK(fs::hard_link_count(m.at("a")) == 1);
  for (const char* gone : {"b", "s", "p", "d"}) CHECK_FALSE(exists(m.at(gone)));

  make();
  fsync_dir(m.at("d"));  // d/c, in a directory without a durable name: lost
  m.cut();
  CHECK(fs::hard_link_count(m.at("a")) == 1);
  for (const char* gone : {"b", "s", "p", "d"}) CHECK_FALSE(exists(m.at(gone)));
  make();
  fsync_dir(m.at("d"));
  fsync_dir(m.mnt());
  m.cut();
  CHECK(fs::hard_link_count(m.at("a")) == 3);
  CHECK(fs::read_symlink(m.at("s")) == "a");
  CHECK(fs::is_fifo(m.at("p")));
  struct stat sa {
  }, sb{};
  REQUIRE(::stat(m.at("a").c_str(), &sa) == 0);
  REQUIRE(::stat(m.at("b").c_str(), &sb) == 0);
  CHECK(sa.st_ino == sb.st_ino);  // still one inode
  {
    File f(m.at("b"), O_WRONLY);
    f.pwrite("SHARED", 0);
    f.fsync();
  }
  fs::remove(m.at("a"));
  fsync_dir(m.mnt());
  m.cut();
  CHECK_FALSE(exists(m.at("a")));
  CHECK(read_file(m.at("b")) == "SHARED");
  CHECK(read_file(m.at("d/c")) == "SHARED");
  CHECK(tree(m.mnt()) == tree(m.backing()));
}

TEST_CASE("an ftruncate without fsync is undone, with one it is kept") {
  std::string orig;
  for (int i = 0; i < 10000; ++i) orig += static_cast<char>('a' + i % 26);
  Lossy m({}, [&](const std::string& b) { write_file(b + "/f", orig, false); });
  {
    File f(m.at("f"), O_RDWR);
    f.truncate(100);
    CHECK(fs::file_size(m.at("f")) == 100);
    f.truncate(5000);  // the bytes past 100 now read as zeros
  }
  CHECK(read_file(m.at("f")) == orig.substr(0, 100) + std::string(4900, '\0'));
  m.cut();
  CHECK(read_file(m.at("f")) == orig);

  {
    File f(m.at("f"), O_RDWR);
    f.truncate(100);
    f.truncate(5000);
    f.pwrite("tail", 4996);
    f.fsync();
  }
  m.cut();
  CHECK(read_file(m.at("f")) == orig.substr(0, 100) + std::string(4896, '\0') + "tail");
  // O_TRUNC is a truncation like any other.
  { File f(m.at("f"), O_WRONLY | O_TRUNC); }
  CHECK(fs::file_size(m.at("f")) == 0);
  m.cut();
  CHECK(fs::file_size(m.at("f")) == 5000);
}

TEST_CASE("overlapping writes read back right, and an fsync of one file keeps only that file") {
  Lossy m({}, [](const std::string& b) {
    write_file(b + "/p", pattern('.', 3000), false);
    write_file(b + "/q", pattern('.', 3000), false);
  });
  // A model of each file, updated like the file; random writes and
  // truncations that overlap, touch and leave holes.
  std::map<std::string, std::string> model{{"p", pattern('.', 3000)}, {"q", pattern('.', 3000)}};
  std::mt19937 rng(42);
  for (const char* name : {"p", "q"}) {
    File f(m.at(name), O_RDWR);
    std::string& mod = model[name];
    for (int i = 0; i < 300; ++i) {
      if (rng() % 10 == 0) {
        std::size_t size = rng() % 12000;
        f.truncate(static_cast<off_t>(size));
        mod.resize(size, '\0');
      } else {
        std::size_t off = rng() % 10000, len = 1 + rng() % 700;
        std::string data(len, static_cast<char>('A' + i % 26));
        f.pwrite(data, static_cast<off_t>(off));
        if (mod.size() < off + len) mod.resize(off + len, '\0');
        mod.replace(off, len, data);
      }
      if (i % 50 == 0) REQUIRE(read_file(m.at(name)) == mod);
    }
    REQUIRE(read_file(m.at(name)) == mod);
    if (std::string(name) == "p") f.fsync();
  }
  m.cut();
  CHECK(read_file(m.at("p")) == model["p"]);
  CHECK(read_file(m.at("q")) == pattern('.', 3000));
}

TEST_CASE("a shared mapping's writes are lost unless msync'd or fsynced") {
  Lossy m({}, [](const std::string& b) { write_file(b + "/m", pattern('0', 8192), false); });
  auto map_write = [&](char c, bool sync) {
    File f(m.at("m"), O_RDWR);
    void* p = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd(), 0);
    REQUIRE(p != MAP_FAILED);
    std::memset(static_cast<char*>(p) + 4096, c, 10);
    if (sync) REQUIRE(::msync(p, 8192, MS_SYNC) == 0);
    ::munmap(p, 8192);
  };
  map_write('1', false);
  CHECK(read_file(m.at("m"))->substr(4096, 10) == pattern('1', 10));
  m.cut();
  CHECK(read_file(m.at("m")) == pattern('0', 8192));
  map_write('2', true);
  m.cut();
  CHECK(read_file(m.at("m"))->substr(4096, 10) == pattern('2', 10));
}

TEST_CASE("SQLite in WAL mode, synchronous=FULL: every committed row survives power cuts") {
  Lossy m;
  const std::string db = m.at("t.db");
  int expected = 0;
  for (int cycle = 0; cycle < 3; ++cycle) {
    std::string err = crash_after(db, [&](sqlite3* h) {
      sql(h, "PRAGMA journal_mode=WAL");
      sql(h, "PRAGMA synchronous=FULL");
      sql(h, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, body BLOB)");
      insert_rows(h, expected, 60, 1);
      if (cycle == 1) sql(h, "PRAGMA wal_checkpoint(TRUNCATE)");
      insert_rows(h, expected + 60, 60, 3);
    });
    REQUIRE(err == "");
    expected += 120;
    INFO(m.cut());
    DbCheck c = check_db(db);  // a clean close here: checkpoint, -wal unlinked
    CHECK(c.integrity == "ok");
    CHECK(c.journal_mode == "wal");
    CHECK(c.rows == expected);
  }
  m.cut();  // the unlink of -wal/-shm at the last close was not durable
  DbCheck c = check_db(db);
  CHECK(c.integrity == "ok");
  CHECK(c.rows == expected);
}

TEST_CASE(
    "SQLite in WAL mode, synchronous=OFF: rows are lost at a cut, the database stays intact") {
  Lossy m;
  const std::string db = m.at("t.db");
  REQUIRE(crash_after(db, [](sqlite3* h) {
            sql(h, "PRAGMA journal_mode=WAL");
            sql(h, "PRAGMA synchronous=FULL");
            sql(h, "CREATE TABLE t(id INTEGER PRIMARY KEY, body BLOB)");
            insert_rows(h, 0, 10, 1);
          }) == "");
  m.cut();
  REQUIRE(check_db(db).rows == 10);
  for (int cycle = 0; cycle < 2; ++cycle) {
    REQUIRE(crash_after(db, [](sqlite3* h) {
              sql(h, "PRAGMA synchronous=OFF");
              insert_rows(h, 1000, 500, 10);
            }) == "");
    std::string line = m.cut();
    INFO(line);
    DbCheck c = check_db(db);
    CHECK(c.integrity == "ok");
    // Nothing of synchronous=OFF was fsynced: every one of those rows is gone.
    CHECK(c.rows == 10);
    CHECK(line.find("dropped 0 unsynced bytes") == std::string::npos);
  }
}

TEST_CASE("SQLite: two processes share a WAL database through the mount (locks and -shm)") {
  Lossy m;
  const std::string db = m.at("t.db");
  REQUIRE(crash_after(db, [](sqlite3* h) {
            sql(h, "PRAGMA journal_mode=WAL");
            sql(h, "CREATE TABLE t(id INTEGER PRIMARY KEY, body BLOB)");
          }) == "");
  std::vector<pid_t> kids;
  for (int k = 0; k < 2; ++k) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 0;
      try {
        sqlite3* h = nullptr;
        sqlite3_open(db.c_str(), &h);
        sqlite3_busy_timeout(h, 10000);
        sql(h, "PRAGMA synchronous=FULL");
        for (int i = 0; i < 100; ++i) {
          sql(h, "BEGIN IMMEDIATE");
          long before = std::stol(sql_value(h, "SELECT count(*) FROM t"));
          sql(h, numbered("INSERT INTO t(id, body) VALUES(", k * 1000 + i) + ", " +
                     std::to_string(before) + ")");
          sql(h, "COMMIT");
        }
        sqlite3_close(h);
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  m.cut();
  DbCheck c = check_db(db);
  CHECK(c.integrity == "ok");
  CHECK(c.rows == 200);
}

TEST_CASE(
    "torn writes (--torn): of the last unsynced write only a sector-aligned prefix reaches the "
    "disk") {
  // The unit that tears is one write request as the kernel sends it: an
  // unaligned write(2) arrives as two (its first partial page, then the
  // rest), so this one starts on a page to arrive whole. 4096 + 60000 ends
  // inside a sector, so "the end of the write" differs from a sector.
  const std::string old = pattern('o', 70000), fresh = pattern('N', 60000);
  const uint64_t off = 4096;
  auto run = [&](const std::string& seed) {
    Lossy m({"--torn", "--seed", seed}, [&](const std::string& b) {
      for (int i = 0; i < 8; ++i) write_file(b + numbered("/f", i), old, false);
    });
    for (int i = 0; i < 8; ++i) {
      File f(m.at(numbered("f", i)), O_WRONLY);
      f.pwrite(pattern('E', 500), 0);  // an earlier unsynced write: all lost
      f.pwrite(fresh, static_cast<off_t>(off));
    }
    INFO(m.cut());
    std::vector<uint64_t> stops;
    for (int i = 0; i < 8; ++i) {
      std::string got = *read_file(m.at(numbered("f", i)));
      REQUIRE(got.size() == old.size());
      uint64_t stop = off;
      while (stop < off + fresh.size() && got[stop] == 'N') ++stop;
      INFO("file " << i << " kept " << stop - off << " bytes");
      CHECK(got.substr(0, off) == old.substr(0, off));
      CHECK(got.substr(stop) == old.substr(stop));
      CHECK((stop == off || stop == off + fresh.size() || stop % 512 == 0));
      stops.push_back(stop);
    }
    return stops;
  };
  auto a = run("7");
  int partial = 0;
  for (uint64_t s : a) partial += s > off && s < off + fresh.size();
  CHECK(partial > 0);
  // --seed replays the same tears. Which file gets which one follows the
  // order BACKING's directory lists them in, so compare them as a set.
  auto b = run("7");
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  CHECK(a == b);
}

TEST_CASE(
    "random operations: reads match, a full sync loses nothing, MOUNT equals BACKING after cuts") {
  Lossy m({}, [](const std::string& b) {
    fs::create_directory(b + "/d0");
    fs::create_directory(b + "/d1");
  });
  std::mt19937 rng(7);
  // What the mount must show: files (path -> content) and the directories
  // d0/s and d1/s, made and removed at random.
  std::map<std::string, std::string> live;
  std::set<std::string> subdirs;
  auto any_file = [&]() -> std::string {
    if (live.empty()) return "";
    auto it = live.begin();
    std::advance(it, rng() % live.size());
    return it->first;
  };
  auto empty_dir = [&](const std::string& d) {
    for (auto& [p, c] : live) {
      if (p.rfind(d + "/", 0) == 0) return false;
    }
    return true;
  };
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 200; ++i) {
      std::string dir = numbered("d", rng() % 2);
      if (rng() % 2 && subdirs.count(dir + "/s")) dir += "/s";
      std::string path = dir + numbered("/f", rng() % 6);
      switch (rng() % 10) {
        case 0:
        case 1: {  // write somewhere
          File f(m.at(path), O_RDWR | O_CREAT);
          std::string& c = live[path];
          std::size_t off = rng() % 5000, len = 1 + rng() % 3000;
          std::string data(len, static_cast<char>('a' + rng() % 26));
          f.pwrite(data, static_cast<off_t>(off));
          if (c.size() < off + len) c.resize(off + len, '\0');
          c.replace(off, len, data);
          if (rng() % 3 == 0) f.fsync();
          break;
        }
        case 2:
          if (auto p = any_file(); !p.empty()) {
            std::size_t size = rng() % 6000;
            File f(m.at(p), O_RDWR);
            f.truncate(static_cast<off_t>(size));
            live[p].resize(size, '\0');
          }
          break;
        case 3:
          if (auto p = any_file(); !p.empty() && p != path) {
            fs::rename(m.at(p), m.at(path));
            live[path] = live[p];
            live.erase(p);
          }
          break;
        case 4:
          if (auto p = any_file(); !p.empty()) {
            fs::remove(m.at(p));
            live.erase(p);
          }
          break;
        case 5:
          if (auto p = any_file(); !p.empty() && !live.count(path)) {
            // A rename by hand (link, then unlink the old name), so the
            // model never has two names for one inode.
            fs::create_hard_link(m.at(p), m.at(path));
            live[path] = live[p];
            fs::remove(m.at(p));
            live.erase(p);
          }
          break;
        case 6:
        case 7:
          fsync_dir(m.at(dir));
          break;
        case 8:
          if (auto p = any_file(); !p.empty()) File(m.at(p), O_RDONLY).fsync();
          break;
        case 9: {  // make or remove a subdirectory
          std::string sub = numbered("d", rng() % 2) + "/s";
          if (!subdirs.count(sub)) {
            fs::create_directory(m.at(sub));
            subdirs.insert(sub);
          } else if (empty_dir(sub)) {
            fs::remove(m.at(sub));
            subdirs.erase(sub);
          }
          break;
        }
      }
    }
    for (auto& [p, c] : live) REQUIRE(read_file(m.at(p)) == c);
    if (round % 2 == 0) {
      // Sync everything, inner directories first (so some are durable as
      // orphans before their names are): then a cut must lose nothing.
      for (auto& [p, c] : live) File(m.at(p), O_RDONLY).fsync();
      for (auto& d : subdirs) fsync_dir(m.at(d));
      fsync_dir(m.at("d0"));
      fsync_dir(m.at("d1"));
      m.cut();
      std::map<std::string, std::string> want{{"d0", "<dir>"}, {"d1", "<dir>"}};
      for (auto& d : subdirs) want[d] = "<dir>";
      for (auto& [p, c] : live) want[p] = c;
      REQUIRE(tree(m.mnt()) == want);
    } else {
      m.cut();
      REQUIRE(tree(m.mnt()) == tree(m.backing()));
      live.clear();
      subdirs.clear();
      for (auto& [p, c] : tree(m.mnt())) {
        if (c != "<dir>") {
          live[p] = c;
        } else if (p != "d0" && p != "d1") {
          subdirs.insert(p);
        }
      }
    }
  }
}

TEST_CASE("SIGTERM unmounts and exits 0, and a clean unmount writes everything to BACKING") {
  Lossy m;
  write_file(m.at("unsynced"), "written back at unmount", false);
  fs::create_directory(m.at("dir"));
  CHECK(mounted(m.mnt()));
  CHECK(m.stop(SIGTERM) == 0);
  CHECK_FALSE(mounted(m.mnt()));
  CHECK(read_file(m.in_backing("unsynced")) == "written back at unmount");
  CHECK(fs::is_directory(m.in_backing("dir")));
  CHECK_FALSE(exists(m.in_backing(".lossyfs-orphans")));
  // And it mounts again over the same BACKING.
  m.start();
  CHECK(read_file(m.at("unsynced")) == "written back at unmount");
  CHECK(m.stop(SIGINT) == 0);
  CHECK_FALSE(mounted(m.mnt()));
}
