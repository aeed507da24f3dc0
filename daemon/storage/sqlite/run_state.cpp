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
    : state_path_(run_state_path(db_path)),
      period_(period),
      last_(std::chrono::steady_clock::now()),
      stored_beat_(state.beat),
      state_(state) {
  thread_ = std::thread([this] { run(); });
}

RunBeat::~RunBeat() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

std::optional<std::int64_t> RunBeat::due() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < period_) return std::nullopt;
  return stored_beat_ + 1;
}

void RunBeat::committed(std::int64_t beat) {
  last_ = std::chrono::steady_clock::now();
  stored_beat_ = beat;
  owed_ = false;
  {
    std::lock_guard lock(mu_);
    state_.beat = beat;
    dirty_ = true;
  }
  wake_.notify_one();
}

void RunBeat::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || dirty_; });
    if (dirty_) {
      const RunState s = state_;
      dirty_ = false;
      lock.unlock();
      try {
        write_run_state(state_path_, s);
      } catch (const std::exception& e) {
        spdlog::warn("{}: the run's beat: {}", state_path_, e.what());
      }
      lock.lock();
      continue;  // written: look again (a later beat, or the stop)
    }
    if (stop_) break;
  }
}

}  // namespace fenceq::daemon
