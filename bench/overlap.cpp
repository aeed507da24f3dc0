// fenceq-overlap: would fenceqd gain from running the next batch's statements
// while the last batch's WAL flush is under way? (issue 29; bench/README.md,
// "Statements during the flush".) It measures the design before building it:
// the durable echo of `fenceq-bench --target echo-durable`, where every
// request costs --work µs of CPU (the statements) and every commit writes
// --pages WAL frames (two pwrites each, as SQLite's) and fdatasyncs them.
//
//   serial  take what is waiting, --work for each, write, fdatasync, answer:
//           fenceqd's chain today.
//   thread  a thread fdatasyncs; the serving thread gives every request that
//           arrives meanwhile its --work at once, into the open batch, and
//           writes and hands over that batch when the flush before returns.
//   uring   the same with io_uring's fsync (IORING_FSYNC_DATASYNC) and its
//           completion eventfd in the loop's poll: no thread of ours.
//
// K DEALER clients, one request in flight each, as fenceq-bench's. Prints one
// line: mode, round trips/s, p50, p99, requests a commit.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#ifdef FENCEQ_HAVE_URING
#include <liburing.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
using Frames = std::vector<zmq::message_t>;

// CPU work, as a statement's: the core is busy for `us`.
void work(double us) {
  const auto end = Clock::now() + std::chrono::nanoseconds(static_cast<long>(us * 1000));
  unsigned x = 0;
  while (Clock::now() < end) {
    for (unsigned i = 0; i < 50; ++i) x = x * 31 + i;
    asm volatile("" : : "r"(x));
  }
}

// A WAL reused round and round (as after a checkpoint): frames of a 24-byte
// header and a 4 KiB page, written in place.
class Wal {
 public:
  explicit Wal(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) throw std::runtime_error("cannot open " + path);
    const std::string zeros(kFrames * kFrame, 'z');
    if (::pwrite(fd_, zeros.data(), zeros.size(), 0) < 0 || ::fsync(fd_) != 0) {
      throw std::runtime_error("cannot write " + path);
    }
  }
  ~Wal() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  void write(int pages) {
    for (int i = 0; i < pages; ++i) {
      const off_t at = static_cast<off_t>(next_++ % kFrames) * kFrame;
      if (::pwrite(fd_, frame_.data(), 24, at) < 0 ||
          ::pwrite(fd_, frame_.data() + 24, 4096, at + 24) < 0) {
        throw std::runtime_error("cannot write " + path_);
      }
    }
  }
  void sync() {
    if (::fdatasync(fd_) != 0) throw std::runtime_error("cannot fdatasync " + path_);
  }

 private:
  static constexpr long kFrames = 1000;
  static constexpr long kFrame = 24 + 4096;
  std::string path_;
  std::string frame_ = std::string(kFrame, 'w');
  int fd_ = -1;
  long next_ = 0;
};

// A flush under way, and how its end is seen: readable() becomes readable.
class Flusher {
 public:
  virtual ~Flusher() = default;
  virtual void start() = 0;
  virtual int readable() const = 0;
  virtual bool finished() = 0;  // after readable() polled readable
};

class ThreadFlusher final : public Flusher {
 public:
  explicit ThreadFlusher(Wal& wal) : wal_(wal), thread_([this] { run(); }) {}
  ~ThreadFlusher() override {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
    ::close(done_);
  }
  void start() override {
    {
      std::lock_guard l(mu_);
      due_ = true;
    }
    cv_.notify_one();
  }
  int readable() const override { return done_; }
  bool finished() override {
    std::uint64_t n;
    return ::read(done_, &n, sizeof n) == sizeof n;
  }

 private:
  void run() {
    std::unique_lock l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return due_ || stop_; });
      if (stop_) return;
      due_ = false;
      l.unlock();
      wal_.sync();
      const std::uint64_t one = 1;
      if (::write(done_, &one, sizeof one) != sizeof one) throw std::runtime_error("eventfd");
      l.lock();
    }
  }
  Wal& wal_;
  int done_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::mutex mu_;
  std::condition_variable cv_;
  bool due_ = false, stop_ = false;
  std::thread thread_;
};

#ifdef FENCEQ_HAVE_URING
class UringFlusher final : public Flusher {
 public:
  explicit UringFlusher(Wal& wal) : wal_(wal) {
    if (io_uring_queue_init(8, &ring_, 0) != 0) throw std::runtime_error("io_uring_queue_init");
    if (io_uring_register_eventfd(&ring_, done_) != 0) throw std::runtime_error("io_uring eventfd");
  }
  ~UringFlusher() override {
    io_uring_queue_exit(&ring_);
    ::close(done_);
  }
  void start() override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_fsync(sqe, wal_.fd(), IORING_FSYNC_DATASYNC);
    if (io_uring_submit(&ring_) != 1) throw std::runtime_error("io_uring_submit");
  }
  int readable() const override { return done_; }
  bool finished() override {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_peek_cqe(&ring_, &cqe) != 0) return false;
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    std::uint64_t n;
    (void)!::read(done_, &n, sizeof n);
    if (res < 0) throw std::runtime_error("io_uring fsync failed");
    return true;
  }

 private:
  Wal& wal_;
  io_uring ring_{};
  int done_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
};
#endif

struct Options {
  std::string mode = "serial";
  double work_us = 0;
  int pages = 4;
  int clients = 8;
  int requests = 20000;
  std::string file = "/tmp/fenceq-overlap.wal";
};

struct Totals {
  std::atomic<long> commits{0}, answered{0};
};

bool receive(zmq::socket_t& s, Frames& out) {
  zmq::message_t f;
  if (!s.recv(f, zmq::recv_flags::dontwait)) return false;
  out.push_back(std::move(f));
  while (out.back().more()) {
    zmq::message_t g;
    if (!s.recv(g)) break;
    out.push_back(std::move(g));
  }
  return true;
}

void answer(zmq::socket_t& s, std::vector<Frames>& batch, Totals& t) {
  for (auto& frames : batch) {
    for (std::size_t i = 0; i < frames.size(); ++i) {
      s.send(frames[i], i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  ++t.commits;
  t.answered += static_cast<long>(batch.size());
  batch.clear();
}

// Takes what is waiting, each request's work done as it is taken.
void take(zmq::socket_t& s, std::vector<Frames>& into, double work_us) {
  for (Frames f; receive(s, f); f.clear()) {
    work(work_us);
    into.push_back(std::move(f));
  }
}

void serve_serial(zmq::socket_t& s, Wal& wal, const Options& o, std::atomic<bool>& stop,
                  Totals& t) {
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  std::vector<Frames> batch;
  while (!stop) {
    if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) == 0) continue;
    take(s, batch, o.work_us);
    if (batch.empty()) continue;
    wal.write(o.pages);
    wal.sync();
    answer(s, batch, t);
  }
}

void serve_overlapped(zmq::socket_t& s, Wal& wal, Flusher& f, const Options& o,
                      std::atomic<bool>& stop, Totals& t) {
  std::vector<Frames> open, flushing;
  bool in_flight = false;
  zmq_pollitem_t items[2] = {{s.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, f.readable(), ZMQ_POLLIN, 0}};
  while (!stop) {
    zmq::poll(items, 2, std::chrono::milliseconds(50));
    if (in_flight && f.finished()) {
      in_flight = false;
      answer(s, flushing, t);
    }
    take(s, open, o.work_us);
    if (!in_flight && !open.empty()) {
      wal.write(o.pages);  // COMMIT at synchronous=OFF: the frames, no flush
      flushing.swap(open);
      f.start();
      in_flight = true;
    }
  }
}

void serve(zmq::context_t& ctx, const std::string& endpoint, const Options& o,
           std::atomic<bool>& ready, std::atomic<bool>& stop, Totals& t) {
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 0);
  s.bind(endpoint);
  Wal wal(o.file);
  ready = true;
  if (o.mode == "serial") return serve_serial(s, wal, o, stop, t);
  if (o.mode == "thread") {
    ThreadFlusher f(wal);
    return serve_overlapped(s, wal, f, o, stop, t);
  }
#ifdef FENCEQ_HAVE_URING
  UringFlusher f(wal);
  serve_overlapped(s, wal, f, o, stop, t);
#endif
}

void client(const std::string& endpoint, const Options& o, int c, std::vector<double>& lat) {
  zmq::context_t ctx(1);
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  d.connect(endpoint);
  const std::string body(80, 'q');  // about a request's size
  for (int n = c; n < o.requests; n += o.clients) {
    const auto a = Clock::now();
    d.send(zmq::message_t(), zmq::send_flags::sndmore);
    d.send(zmq::buffer(body));
    zmq::message_t m;
    do {
      if (!d.recv(m)) return;
    } while (m.more());
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"fenceq-overlap: statements during the WAL flush, measured before building it"};
  std::vector<std::string> modes{"serial", "thread"};
#ifdef FENCEQ_HAVE_URING
  modes.push_back("uring");
#endif
  app.add_option("--mode", o.mode, "serial, thread or uring")->check(CLI::IsMember(modes));
  app.add_option("--work", o.work_us, "µs of CPU each request costs");
  app.add_option("--pages", o.pages, "WAL frames a commit writes")->check(CLI::Range(1, 64));
  app.add_option("--clients", o.clients, "K")->check(CLI::Range(1, 256));
  app.add_option("--requests", o.requests, "round trips in all")->check(CLI::Range(1, 10000000));
  app.add_option("--file", o.file, "the WAL file (removed at the end); the socket is FILE.sock");
  CLI11_PARSE(app, argc, argv);

  const std::string endpoint = "ipc://" + o.file + ".sock";
  zmq::context_t ctx(1);
  std::atomic<bool> ready{false}, stop{false};
  Totals totals;
  std::thread server([&] { serve(ctx, endpoint, o, ready, stop, totals); });
  while (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(o.clients));
  const auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < o.clients; ++c) {
    clients.emplace_back([&, c] { client(endpoint, o, c, lat[static_cast<std::size_t>(c)]); });
  }
  for (auto& c : clients) c.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  server.join();
  std::vector<double> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  if (all.empty()) return 1;
  std::printf("{\"mode\": \"%s\", \"work_us\": %.0f, \"pages\": %d, \"clients\": %d, "
              "\"round_trips_per_s\": %.0f, \"p50_us\": %.0f, \"p99_us\": %.0f, "
              "\"per_commit\": %.2f}\n",
              o.mode.c_str(), o.work_us, o.pages, o.clients, static_cast<double>(all.size()) / secs,
              all[all.size() / 2], all[all.size() * 99 / 100],
              static_cast<double>(totals.answered) /
                  static_cast<double>(std::max(1L, totals.commits.load())));
}
