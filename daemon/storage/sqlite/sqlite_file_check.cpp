#include "storage/sqlite/sqlite_file_check.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "storage/job_rules.hpp"
#include "storage/store_error.hpp"

namespace fenceq::daemon {
namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw StoreError("cannot open database " + path + ": " + why);
}

std::uint32_t big_endian(const unsigned char* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Whether part of the database may be in a file beside it: a -wal (kill -9
// leaves one, and the read-write open recovers from it) or a hot -journal.
// Then the file alone need not be whole, nor as long as its header says.
bool has_log(const std::string& path) {
  return exists(path + "-wal") || exists(path + "-journal");
}

std::string folder_of(const std::string& path) {
  auto dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// A file: URI of `path` (absolute, every byte but the safe ones escaped).
std::string file_uri(const std::string& path) {
  const std::string abs = std::filesystem::absolute(path).string();
  std::string uri = "file://";
  static const char* hex = "0123456789ABCDEF";
  for (const unsigned char c : abs) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_' || c == '~') {
      uri += static_cast<char>(c);
    } else {
      uri += '%';
      uri += hex[c >> 4];
      uri += hex[c & 15];
    }
  }
  return uri;
}

struct Closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct Finalizer {
  void operator()(sqlite3_stmt* st) const { sqlite3_finalize(st); }
};

// The rows of `sql`'s first column as text; refuses the file with SQLite's
// message when the statement fails (a file that is not a database, or is
// corrupt, fails here).
std::vector<std::string> column(sqlite3* db, const std::string& path, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr);
  std::unique_ptr<sqlite3_stmt, Finalizer> st(raw);
  std::vector<std::string> out;
  while (rc == SQLITE_OK || rc == SQLITE_ROW) {
    rc = sqlite3_step(st.get());
    if (rc == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(st.get(), 0);
      out.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
    }
  }
  if (rc != SQLITE_DONE) {
    const int primary = sqlite3_errcode(db) & 0xff;
    const std::string said = sqlite3_errmsg(db);
    if (primary == SQLITE_NOTADB) refuse(path, "not an SQLite database (SQLite: " + said + ")");
    if (primary == SQLITE_CORRUPT) refuse(path, "corrupt (SQLite: " + said + ")");
    refuse(path, "SQLite cannot read it: " + said);
  }
  return out;
}

std::string joined(const std::vector<std::string>& items, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > most) out += ", ... (" + std::to_string(items.size()) + " in all)";
  return out;
}

// The contract's columns, in order (C1.1; kSchemaV1 in sqlite_schema.cpp).
const std::vector<std::string> kContractColumns{"id", "owner", "until", "fence", "result", "done"};

// How the start checks the file's pages: quick_check, not integrity_check,
// which also matches every index entry to its row and took several times as
// long on a store of 10^6 jobs (docs/operating.md, "What fenceqd refuses to
// open", has the figures). The first few problems are enough to name.
constexpr const char* kSoundnessCheck = "quick_check";
constexpr int kProblemsNamed = 3;

}  // namespace

void check_db_file(const std::string& path) {
  if (path.empty() || path == ":memory:") return;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // a new database: SQLite says why when it cannot make it
    refuse(path, std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) refuse(path, "not a regular file");
  if (::access(path.c_str(), R_OK | W_OK) != 0) {
    const int err = errno;
    refuse(path, err == EROFS ? "it is on a read-only file system, and fenceqd writes it"
                              : "the file is read-only to this user (uid " +
                                    std::to_string(::geteuid()) + ": " + std::strerror(err) +
                                    "), and fenceqd writes it");
  }
  const std::string dir = folder_of(path);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    refuse(path, "its folder " + dir + " is read-only to this user (uid " +
                     std::to_string(::geteuid()) + ": " + std::strerror(err) +
                     "), and fenceqd creates its -wal and -shm files there");
  }
  if (st.st_size == 0) return;  // a new database

  unsigned char header[100] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) refuse(path, std::strerror(errno));
  const ssize_t n = ::pread(fd, header, sizeof header, 0);
  ::close(fd);
  if (n < 0) refuse(path, std::strerror(errno));
  static constexpr char kMagic[] = "SQLite format 3";  // and its 0 byte: 16 bytes
  if (n < 16 || std::memcmp(header, kMagic, 16) != 0) {
    refuse(path, "not an SQLite database (it does not start with SQLite's header, \"SQLite "
                 "format 3\")");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (n < 100) {
    refuse(path, "truncated: " + std::to_string(size) +
                     " bytes, shorter than SQLite's 100-byte header");
  }
  std::uint64_t page = big_endian(header + 16, 2);
  if (page == 1) page = 65536;
  if (page < 512 || page > 65536 || (page & (page - 1)) != 0) {
    refuse(path, "corrupt: its header gives a page size of " + std::to_string(page) + " bytes");
  }
  if (has_log(path)) return;  // the file alone may be short of what its -wal holds
  if (size % page != 0) {
    refuse(path, "truncated: " + std::to_string(size) + " bytes is not a whole number of its " +
                     std::to_string(page) + "-byte pages");
  }
  // The page count of the header is valid while the version-valid-for number
  // matches the change counter (SQLite's file format, 1.3.7).
  const std::uint64_t pages = big_endian(header + 28, 4);
  if (big_endian(header + 24, 4) == big_endian(header + 92, 4) && pages * page > size) {
    refuse(path, "truncated: " + std::to_string(size) + " bytes, but its header says " +
                     std::to_string(pages) + " pages of " + std::to_string(page) + " (" +
                     std::to_string(pages * page) + " bytes)");
  }
}

void check_db_contents(const std::string& path) {
  if (path.empty() || path == ":memory:") return;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || st.st_size == 0) return;  // a new database
  // A read-only connection to a file in WAL mode creates its -wal and -shm
  // when they are missing, and leaves them. `immutable` creates nothing and
  // takes no lock (this daemon holds the file's lock: no fenceqd writes it);
  // it reads the file alone, which is right only while no -wal or -journal
  // holds part of the database. With one, the connection opens as any reader
  // does, and reads what the -wal holds (kill -9 leaves a -wal, which the
  // read-write open then recovers; a read-only connection never checkpoints).
  const std::string uri = file_uri(path) + (has_log(path) ? "?mode=ro" : "?mode=ro&immutable=1");
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(uri.c_str(), &raw,
                                 SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  std::unique_ptr<sqlite3, Closer> db(raw);
  if (rc != SQLITE_OK) {
    refuse(path, std::string("SQLite cannot open it: ") +
                     (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_extended_result_codes(db.get(), 1);

  const auto tables = column(db.get(), path,
                             "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT "
                             "LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name");
  const auto version_text = column(db.get(), path, "PRAGMA user_version");
  const long version = version_text.empty() ? 0 : std::stol(version_text.front());
  const std::set<std::string> names(tables.begin(), tables.end());
  if (!names.empty()) {
    std::vector<std::string> jobs_columns;
    if (names.contains("jobs")) {
      jobs_columns = column(db.get(), path, "SELECT name FROM pragma_table_info('jobs')");
    }
    const bool contract_jobs =
        jobs_columns.size() >= kContractColumns.size() &&
        std::equal(kContractColumns.begin(), kContractColumns.end(), jobs_columns.begin());
    if (contract_jobs && version > rules::kSchemaVersion) {
      refuse(path, "its fenceq schema is version " + std::to_string(version) +
                       ", newer than this fenceqd knows (" +
                       std::to_string(rules::kSchemaVersion) + ")");
    }
    // user_version 0: the contract's own table, from before fenceq kept a
    // version (exactly its six columns); 1: schema version 1 (that table);
    // 2 and later: fenceq_meta too.
    const bool fenceq = contract_jobs && (version == 0   ? jobs_columns.size() == 6
                                          : version == 1 ? true
                                                         : names.contains("fenceq_meta"));
    if (!fenceq) {
      refuse(path, "not a fenceq database: its tables (" + joined(tables, 5) +
                       ") are neither fenceq's schema nor the contract's six-column jobs "
                       "table, and fenceqd would add its own among them (user_version " +
                       std::to_string(version) + "); give fenceqd a file of its own");
    }
  }
  const auto problems = column(db.get(), path, std::string("PRAGMA ") + kSoundnessCheck + "(" +
                                                    std::to_string(kProblemsNamed) + ")");
  if (problems.empty() || problems.front() != "ok") {
    std::string said;
    for (const auto& p : problems) {
      // Each row may hold several lines, the first naming the schema.
      std::istringstream lines(p);
      for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line.starts_with("*** in database")) continue;
        said += (said.empty() ? "" : "; ") + line;
      }
    }
    refuse(path, std::string("corrupt: PRAGMA ") + kSoundnessCheck + " says: " + said);
  }
}

}  // namespace fenceq::daemon
