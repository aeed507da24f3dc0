#include "lossy_mount.hpp"

#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace fs = std::filesystem;

namespace fenceq::test {
namespace {

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};

// integrity_check's rows joined by "; " ("ok" when it found nothing).
std::string integrity(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  std::unique_ptr<sqlite3, DbCloser> db(raw);  // a handle comes back even on failure
  if (rc != SQLITE_OK) return "cannot open " + path + ": " + sqlite3_errmsg(raw);
  sqlite3_busy_timeout(raw, 5000);
  sqlite3_stmt* raw_stmt = nullptr;
  if (sqlite3_prepare_v2(raw, "PRAGMA integrity_check", -1, &raw_stmt, nullptr) != SQLITE_OK) {
    return std::string("integrity_check: ") + sqlite3_errmsg(raw);
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw_stmt, sqlite3_finalize);
  std::string out;
  while ((rc = sqlite3_step(raw_stmt)) == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(raw_stmt, 0);
    if (!out.empty()) out += "; ";
    out += t ? reinterpret_cast<const char*>(t) : "";
  }
  if (rc != SQLITE_DONE) return std::string("integrity_check: ") + sqlite3_errmsg(raw);
  return out;
}

}  // namespace

bool mounted(const std::string& path) {
  std::ifstream in("/proc/mounts");
  std::string dev, mnt, rest;
  while (in >> dev >> mnt && std::getline(in, rest)) {
    if (mnt == path) return true;
  }
  return false;
}

void reap_dead_lossy_mounts() {
  std::ifstream in("/proc/mounts");
  std::string dev, mnt, type, rest;
  std::vector<std::string> dead;
  while (in >> dev >> mnt >> type && std::getline(in, rest)) {
    struct stat st {};
    if (type == "fuse.lossyfs" && mnt.rfind("/tmp/fql-", 0) == 0 && ::stat(mnt.c_str(), &st) != 0 &&
        errno == ENOTCONN) {
      dead.push_back(mnt);
    }
  }
  for (auto& mnt : dead) {
    if (::umount2(mnt.c_str(), MNT_DETACH) == 0) {
      std::error_code ec;
      fs::remove_all(fs::path(mnt).parent_path(), ec);
    }
  }
}

LossyMount::LossyMount(const std::string& binary, std::vector<std::string> flags,
                       const std::function<void(const std::string&)>& setup)
    : binary_(binary), flags_(std::move(flags)) {
  reap_dead_lossy_mounts();
  char tmpl[] = "/tmp/fql-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(sys_error("mkdtemp"));
  dir_ = tmpl;
  backing_ = dir_ + "/backing";
  mnt_ = dir_ + "/mnt";
  // No destructor runs for an object whose constructor throws: tear down here.
  try {
    std::error_code ec;
    if (!fs::create_directory(backing_, ec) || !fs::create_directory(mnt_, ec)) {
      throw std::runtime_error("cannot set up " + dir_ + ": " + ec.message());
    }
    if (setup) setup(backing_);
    start();
  } catch (...) {
    teardown();
    throw;
  }
}

LossyMount::~LossyMount() { teardown(); }

void LossyMount::start() {
  std::vector<std::string> argv{binary_};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  argv.push_back(backing_);
  argv.push_back(mnt_);
  // Should this process die without its destructor (a crash, ctest's
  // timeout), fenceq-lossyfs still gets SIGTERM and unmounts.
  proc_.emplace(
      Command{.argv = std::move(argv), .output = Command::Output::pipe, .term_with_parent = true});
  cuts_ = 0;
  if (!wait_for("lossyfs: mounted", std::chrono::seconds(10))) {
    throw std::runtime_error("fenceq-lossyfs " + binary_ + " did not mount; output:\n" + output());
  }
}

int LossyMount::stop(int sig) { return proc_ ? proc_->stop(sig) : -1; }

const std::string& LossyMount::output() const {
  static const std::string none;
  return proc_ ? proc_->output() : none;
}

void LossyMount::teardown() {
  // SIGTERM is a clean unmount (pending changes written to BACKING, which
  // nobody reads any more); SIGKILL after 10 s.
  if (proc_ && proc_->running()) proc_->stop(SIGTERM);
  if (!mnt_.empty() && mounted(mnt_)) ::umount2(mnt_.c_str(), MNT_DETACH);
  proc_.reset();
  std::error_code ec;
  // Never while mounted: remove_all would walk into the mount.
  if (!dir_.empty() && !mounted(mnt_)) fs::remove_all(dir_, ec);
  dir_.clear();
}

std::string LossyMount::cut(std::chrono::milliseconds timeout) {
  ++cuts_;
  if (!proc_ || !proc_->running()) throw std::runtime_error("fenceq-lossyfs is not running");
  proc_->signal(SIGUSR1);
  const std::string needle = "power cut " + std::to_string(cuts_) + ":";
  if (!wait_for(needle, timeout)) {
    throw std::runtime_error("fenceq-lossyfs printed no '" + needle + "' line; output:\n" +
                             output());
  }
  const auto& log = output();
  const auto pos = log.find(needle);
  return log.substr(pos, log.find('\n', pos) - pos);
}

bool LossyMount::wait_for(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (output().find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline || !proc_->read_output(50)) {
      return output().find(needle) != std::string::npos;
    }
  }
  return true;
}

std::string sqlite_integrity(const std::string& path) {
  return integrity(path, SQLITE_OPEN_READONLY);
}

std::string sqlite_integrity_of_copy(const std::string& path) {
  char tmpl[] = "/tmp/fqi-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(sys_error("mkdtemp"));
  const fs::path dir = tmpl;
  std::string result;
  try {
    const fs::path copy = dir / "copy.db";
    fs::copy_file(path, copy);
    // The WAL, and a rollback journal a cut may bring back (SQLite writes one
    // when it switches a new file to WAL, and its unlink may not be durable):
    // a hot journal is rolled back at the next open. The -shm is rebuilt.
    for (const char* suffix : {"-wal", "-journal"}) {
      if (fs::exists(path + suffix)) fs::copy_file(path + suffix, copy.string() + suffix);
    }
    result = integrity(copy.string(), SQLITE_OPEN_READWRITE);
  } catch (const std::exception& e) {
    result = std::string("cannot copy: ") + e.what();
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return result;
}

}  // namespace fenceq::test
