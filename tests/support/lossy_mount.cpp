#include "lossy_mount.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

using Clock = std::chrono::steady_clock;

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

bool mounted(const std::string& path) {
  std::ifstream in("/proc/mounts");
  std::string dev, mnt, rest;
  while (in >> dev >> mnt && std::getline(in, rest)) {
    if (mnt == path) return true;
  }
  return false;
}

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

LossyMount::LossyMount(const std::string& binary, std::vector<std::string> flags) {
  reap_dead_lossy_mounts();
  char tmpl[] = "/tmp/fql-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(sys_error("mkdtemp"));
  dir_ = tmpl;
  backing_ = dir_ + "/backing";
  mnt_ = dir_ + "/mnt";
  int p[2];
  std::error_code ec;
  if (!fs::create_directory(backing_, ec) || !fs::create_directory(mnt_, ec) ||
      ::pipe2(p, O_CLOEXEC) != 0) {
    const std::string why = ec ? ec.message() : std::strerror(errno);
    teardown();
    throw std::runtime_error("cannot set up " + dir_ + ": " + why);
  }
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(backing_);
  argv.push_back(mnt_);
  pid_ = ::fork();
  if (pid_ < 0) {
    const std::string why = sys_error("fork");
    ::close(p[0]);
    ::close(p[1]);
    teardown();
    throw std::runtime_error(why);
  }
  if (pid_ == 0) {
    // Should this process die without its destructor (a crash, ctest's
    // timeout), fenceq-lossyfs still gets SIGTERM and unmounts.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(p[1]);
  out_ = p[0];
  if (!wait_for("lossyfs: mounted", std::chrono::seconds(10))) {
    teardown();  // no destructor runs for an object whose constructor throws
    throw std::runtime_error("fenceq-lossyfs " + binary + " did not mount; output:\n" + log_);
  }
}

LossyMount::~LossyMount() { teardown(); }

void LossyMount::teardown() {
  if (pid_ > 0) {
    // SIGTERM is a clean unmount (pending changes written to BACKING, which
    // nobody reads any more); SIGKILL after 10 s.
    ::kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      drain(20);
    }
    pid_ = -1;
  }
  if (!mnt_.empty() && mounted(mnt_)) ::umount2(mnt_.c_str(), MNT_DETACH);
  if (out_ >= 0) {
    ::close(out_);
    out_ = -1;
  }
  std::error_code ec;
  // Never while mounted: remove_all would walk into the mount.
  if (!dir_.empty() && !mounted(mnt_)) fs::remove_all(dir_, ec);
  dir_.clear();
}

std::string LossyMount::cut(std::chrono::milliseconds timeout) {
  ++cuts_;
  if (::kill(pid_, SIGUSR1) != 0) throw std::runtime_error(sys_error("kill fenceq-lossyfs"));
  const std::string needle = "power cut " + std::to_string(cuts_) + ":";
  if (!wait_for(needle, timeout)) {
    throw std::runtime_error("fenceq-lossyfs printed no '" + needle + "' line; output:\n" + log_);
  }
  const auto pos = log_.find(needle);
  return log_.substr(pos, log_.find('\n', pos) - pos);
}

bool LossyMount::drain(int ms) {
  pollfd pfd{out_, POLLIN, 0};
  if (::poll(&pfd, 1, ms) <= 0) return true;
  char buf[4096];
  ssize_t n = ::read(out_, buf, sizeof buf);
  if (n <= 0) return false;
  log_.append(buf, static_cast<std::size_t>(n));
  return true;
}

bool LossyMount::wait_for(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (log_.find(needle) == std::string::npos) {
    if (Clock::now() > deadline || !drain(50)) return log_.find(needle) != std::string::npos;
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
