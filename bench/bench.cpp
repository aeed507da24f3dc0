// fenceq-bench: the load generator for fenceqd and, with the same client
// costs, for beanstalkd (a small adapter for its text protocol).
//
//   fenceq-bench --target fenceq --endpoint ipc:///tmp/b/s --workload next --jobs 20000 --clients 8
//   fenceq-bench --target beanstalkd --addr 127.0.0.1:11300 --workload next ...
//   fenceq-bench --target echo-pg --endpoint ipc:///tmp/e/s
//                --pg-uri 'postgresql:///db?host=/tmp/pg'   (the ceiling of a sidecar:
//                one PostgreSQL commit a batch, no store)
//   fenceq-bench --target plain --endpoint ... --workload combined   (no fenceq library:
//                one shared ZeroMQ context, msgpack-c; plain_client.hpp)
//
// Workloads (N jobs are enqueued first, not measured; then K clients, one
// request in flight each unless said otherwise, take every job under a lease
// and complete it):
//   claim        claim by id + complete           (beanstalkd: reserve-job + delete)
//   next         claim_next + complete            (beanstalkd: reserve + delete)
//   combined     complete_next: one round trip a job (beanstalkd: as next)
//   pipeline     claim by id + complete, --depth requests in flight per client (fenceq only)
//   contended    all K clients race to claim every job; one wins, completes (beanstalkd:
//                reserve-job by all)
//   renew-heavy  next, then --renews renews (touch), then complete
//   step-heavy   next, then --renews step_saves (steps s0, s1, ...: a 16-byte
//                value each), then complete: renew-heavy with each renew a
//                step saved instead (issue 60: a step_save costs at most one
//                renew; fenceq only)
//   batch        claim_next of up to --batch jobs, then complete_many of them with
//                next: the following --batch (a prefetching worker; fenceq only)
//   enqueue      enqueue_many of --batch jobs a request, measured (fenceq only;
//                no jobs are processed)
//   fanin        next, over N parents of which --children jobs wait (issue 32's
//                budget; fenceq only): child c is enqueued, not measured, in a
//                queue of its own with `after` the c-th slice of the parents
//                (at most 1000 each: `after`'s limit), so every complete of a
//                parent unblocks one edge; the children stay unclaimed and must
//                all be ready at the end. --children 0: the same run without them
//
// Prints one JSON line (and a table line on stderr): jobs/s, request latency
// p50/p99/p99.9, and with --pid the server's CPU seconds and peak RSS; for
// fenceq also commits/s and the mean batch size (from its stats).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libpq-fe.h>

#include <fenceq/client.hpp>
#include <zmq.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fenceq_protocol/codec.hpp"
#include "echo_jobs.hpp"
#include "plain_client.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  std::string target = "fenceq";
  std::string endpoint = fenceq::default_endpoint();
  // All the fenceqd endpoints (--endpoint repeated: sidecars sharing one
  // PostgreSQL database); client c talks to endpoints[c % size].
  std::vector<std::string> endpoints;
  const std::string& endpoint_of(int c) const {
    return endpoints.empty() ? endpoint
                             : endpoints[static_cast<std::size_t>(c) % endpoints.size()];
  }
  std::string addr = "127.0.0.1:11300";
  std::string workload = "next";
  int jobs = 20000;
  int clients = 1;
  double ttl = 30;
  int payload = 0;
  int depth = 32;
  int renews = 5;
  int batch = 32;  // batch: jobs a claim takes; enqueue: jobs a request carries
  bool keyed = false;  // enqueue: each job with a unique key of its own (issue 31's cost)
  int groups = 0;      // > 0: job n is of group "g<n % groups>" (issue 31's fair turns)
  int pid = 0;
  std::string pg_uri;  // echo-pg: the database it commits to
  std::string echo_jobs;  // echo-pg: the schema of its complete_next (echo_jobs.hpp), or none
  bool skip_enqueue = false;  // the jobs are already there (--growth runs preload them)
  int limit = 0;              // next/combined: stop after this many jobs in all (0: all)
  int children = 0;           // fanin: jobs waiting for the N parents (0: none)
  std::string queue;          // next/combined: the queue (default: bench<run>)
  std::string label;
};

struct Latencies {
  std::vector<double> us;
  void add(Clock::time_point a, Clock::time_point b) {
    us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
};

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// CPU seconds (user + system) and peak RSS (KiB) of a process, from /proc.
std::pair<double, long> proc_usage(int pid) {
  if (pid <= 0) return {0, 0};
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  std::istringstream rest(close == std::string::npos ? "" : s.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  long hwm = 0;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::stol(line.substr(6));
  }
  return {ticks / static_cast<double>(sysconf(_SC_CLK_TCK)), hwm};
}

std::string job_id(const std::string& run, int n) { return "b" + run + "-" + std::to_string(n); }

// --- beanstalkd: its text protocol over one TCP connection per client ---

class Beanstalk {
 public:
  explicit Beanstalk(const std::string& addr) {
    auto colon = addr.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(colon + 1))));
    inet_pton(AF_INET, addr.substr(0, colon).c_str(), &sa.sin_addr);
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      throw std::runtime_error("cannot connect to beanstalkd at " + addr);
    }
  }
  ~Beanstalk() { ::close(fd_); }
  Beanstalk(const Beanstalk&) = delete;
  Beanstalk& operator=(const Beanstalk&) = delete;

  // Sends a command (and a body) and reads the reply line (and its body).
  std::string call(const std::string& cmd, const std::string* body = nullptr) {
    std::string out = cmd + "\r\n";
    if (body) out += *body + "\r\n";
    for (std::size_t sent = 0; sent < out.size();) {
      auto n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("beanstalkd: send failed");
      sent += static_cast<std::size_t>(n);
    }
    std::string line = read_line();
    if (line.rfind("RESERVED ", 0) == 0) {
      auto bytes = std::stoul(line.substr(line.rfind(' ') + 1));
      read_exact(bytes + 2);  // the body and its CRLF
    }
    return line;
  }

 private:
  std::string read_line() {
    for (;;) {
      auto pos = buf_.find("\r\n");
      if (pos != std::string::npos) {
        std::string line = buf_.substr(0, pos);
        buf_.erase(0, pos + 2);
        return line;
      }
      fill();
    }
  }
  void read_exact(std::size_t n) {
    while (buf_.size() < n) fill();
    buf_.erase(0, n);
  }
  void fill() {
    char tmp[65536];
    auto n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) throw std::runtime_error("beanstalkd: connection closed");
    buf_.append(tmp, static_cast<std::size_t>(n));
  }
  int fd_ = -1;
  std::string buf_;
};

// --- the workloads ---

struct Result {
  long completed = 0, refused = 0;
  Latencies lat;
};

void fenceq_worker(const Config& cfg, const std::string& run, int c, Result& r,
                   std::atomic<int>& next_contended) {
  fenceq::Client cl(cfg.endpoint_of(c), fenceq::ClientOptions{std::chrono::seconds(30)});
  const std::string owner = "bench-" + std::to_string(c);
  const std::string queue = cfg.queue.empty() ? "bench" + run : cfg.queue;
  const std::string payload(static_cast<std::size_t>(cfg.payload), 'r');
  // --limit: a shared budget of jobs, for runs over a large preloaded queue.
  auto take = [&] { return cfg.limit == 0 || next_contended.fetch_add(1) < cfg.limit; };
  auto timed = [&](auto&& f) {
    auto a = Clock::now();
    auto v = f();
    r.lat.add(a, Clock::now());
    return v;
  };
  if (cfg.workload == "claim") {
    for (int n = c; n < cfg.jobs; n += cfg.clients) {
      auto fence = timed([&] { return cl.claim(job_id(run, n), owner, cfg.ttl); });
      if (!fence) {
        ++r.refused;
        continue;
      }
      timed([&] { return cl.complete(job_id(run, n), owner, *fence, payload); }) ? ++r.completed
                                                                                : ++r.refused;
    }
  } else if (cfg.workload == "next" || cfg.workload == "renew-heavy" ||
             cfg.workload == "step-heavy" || cfg.workload == "fanin") {
    const std::optional<fenceq::Payload> step_value{fenceq::Payload{std::string(16, 's'), false}};
    while (take()) {
      auto job = timed([&] { return cl.claim_next(queue, owner, cfg.ttl); });
      if (!job) break;
      if (cfg.workload == "renew-heavy") {
        for (int i = 0; i < cfg.renews; ++i) {
          timed([&] { return cl.renew(job->id, owner, job->fence, cfg.ttl); });
        }
      }
      if (cfg.workload == "step-heavy") {
        for (int i = 0; i < cfg.renews; ++i) {
          const std::string step = "s" + std::to_string(i);
          timed([&] { return cl.step_save(job->id, owner, job->fence, step, step_value); });
        }
      }
      timed([&] { return cl.complete(job->id, owner, job->fence, payload); }) ? ++r.completed
                                                                            : ++r.refused;
    }
  } else if (cfg.workload == "combined") {
    std::optional<fenceq::ClaimedJob> job;
    if (take()) job = timed([&] { return cl.claim_next(queue, owner, cfg.ttl); });
    while (job) {
      if (!take()) {  // budget spent: complete the last one alone
        timed([&] { return cl.complete(job->id, owner, job->fence, payload); }) ? ++r.completed
                                                                              : ++r.refused;
        break;
      }
      auto out = timed([&] {
        return cl.complete_and_claim_next(job->id, owner, job->fence, payload, queue, cfg.ttl);
      });
      out.completed ? ++r.completed : ++r.refused;
      job = std::move(out.next);
    }
  } else if (cfg.workload == "batch") {
    // A prefetching worker: up to --batch jobs held, completed together,
    // the next ones taken in the same round trip.
    auto held = timed([&] { return cl.claim_next_many(queue, owner, cfg.ttl, cfg.batch); });
    while (!held.empty()) {
      std::vector<fenceq::LeaseItem> items;
      for (const auto& j : held) items.push_back({j.id, owner, j.fence, payload});
      auto out = timed([&] {
        return cl.complete_many_and_claim(items, queue, cfg.ttl, cfg.batch);
      });
      for (bool ok : out.completed) ok ? ++r.completed : ++r.refused;
      held = std::move(out.next);
    }
  } else if (cfg.workload == "enqueue") {
    std::vector<fenceq::JobSpec> jobs;
    for (int n = c; n < cfg.jobs;) {
      jobs.clear();
      for (; n < cfg.jobs && static_cast<int>(jobs.size()) < cfg.batch; n += cfg.clients) {
        fenceq::JobSpec j;
        j.id = job_id(run, n);
        j.queue = queue;
        if (cfg.payload > 0) j.payload = fenceq::Payload{payload, false};
        if (cfg.keyed) j.key = "key-" + j.id;
        if (cfg.groups > 0) j.group = "g" + std::to_string(n % cfg.groups);
        jobs.push_back(std::move(j));
      }
      auto created = timed([&] { return cl.enqueue_many(jobs); });
      for (bool ok : created) ok ? ++r.completed : ++r.refused;
    }
  } else if (cfg.workload == "contended") {
    // Everyone claims every job; exactly one claim per job wins.
    for (int n = 0; n < cfg.jobs; ++n) {
      auto fence = timed([&] { return cl.claim(job_id(run, n), owner, cfg.ttl); });
      if (!fence) continue;
      timed([&] { return cl.complete(job_id(run, n), owner, *fence, payload); }) ? ++r.completed
                                                                                : ++r.refused;
    }
  } else {
    throw std::runtime_error("unknown workload " + cfg.workload);
  }
}

// `--target plain`: next or combined from a plain client (plain_client.hpp):
// every worker's DEALER socket on the one context `ctx`.
void plain_worker(const Config& cfg, const std::string& run, int c, Result& r,
                  zmq::context_t& ctx) {
  namespace fb = fenceq::bench;
  fb::PlainSocket s(ctx, cfg.endpoint_of(c));
  const std::string owner = "bench-" + std::to_string(c);
  const std::string queue = cfg.queue.empty() ? "bench" + run : cfg.queue;
  const std::string payload(static_cast<std::size_t>(cfg.payload), 'r');
  auto timed = [&](auto&& f) {
    auto a = Clock::now();
    auto v = f();
    r.lat.add(a, Clock::now());
    return v;
  };
  auto job = timed([&] { return fb::plain_claim_next(s, queue, owner, cfg.ttl); });
  while (job) {
    if (cfg.workload == "next") {
      timed([&] { return fb::plain_complete(s, *job, owner, payload); }) ? ++r.completed
                                                                        : ++r.refused;
      job = timed([&] { return fb::plain_claim_next(s, queue, owner, cfg.ttl); });
    } else {
      auto [completed, next] = timed(
          [&] { return fb::plain_complete_next(s, *job, owner, payload, queue, cfg.ttl); });
      completed ? ++r.completed : ++r.refused;
      job = std::move(next);
    }
  }
}

// `pipeline`: --depth jobs in progress per client on one DEALER socket; each
// job is a claim then a complete, replies matched by rid.
void fenceq_pipeline(const Config& cfg, const std::string& run, int c, Result& r) {
  namespace proto = fenceq::protocol;
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(cfg.endpoint_of(c));
  const std::string owner = "bench-" + std::to_string(c);
  const std::string payload(static_cast<std::size_t>(cfg.payload), 'r');
  struct InFlight {
    int n;
    proto::Op op;
    Clock::time_point sent;
  };
  std::map<std::uint64_t, InFlight> inflight;
  std::uint64_t rid = 0;
  int next = c;
  auto send = [&](int n, proto::Op op, std::int64_t fence) {
    // claim, or complete under the claim's fence.
    proto::Request q = op == proto::Op::claim
                           ? proto::Request{proto::req::Claim{job_id(run, n), owner, cfg.ttl}}
                           : proto::Request{proto::req::Complete{job_id(run, n), owner, fence,
                                                                 payload}};
    q.rid = proto::Rid{++rid};
    auto bytes = proto::encode_request(q);
    s.send(zmq::buffer(bytes));
    inflight[rid] = {n, op, Clock::now()};
  };
  while (next < cfg.jobs && static_cast<int>(inflight.size()) < cfg.depth) {
    send(next, proto::Op::claim, 0);
    next += cfg.clients;
  }
  while (!inflight.empty()) {
    zmq::message_t m;
    if (!s.recv(m)) break;
    // Find the rid, then decode as the op it answers.
    auto rid_of = proto::reply_rid(m.to_string_view());
    const auto* id = rid_of ? std::get_if<std::uint64_t>(&rid_of->value) : nullptr;
    auto it = id ? inflight.find(*id) : inflight.end();
    if (it == inflight.end()) continue;
    std::uint64_t got = 0;
    for (auto& [k, v] : std::ranges::subrange(it, std::next(it))) {
      auto rep = proto::decode_reply(m.to_string_view(), v.op, proto::Rid{k});
      if (!rep) continue;
      got = k;
      r.lat.add(v.sent, Clock::now());
      if (v.op == proto::Op::claim) {
        if (auto* f = std::get_if<std::int64_t>(&rep->result)) {
          send(v.n, proto::Op::complete, *f);
        } else {
          ++r.refused;
        }
      } else {
        std::get<bool>(rep->result) ? ++r.completed : ++r.refused;
        if (next < cfg.jobs) {
          send(next, proto::Op::claim, 0);
          next += cfg.clients;
        }
      }
      break;
    }
    if (got) inflight.erase(got);
  }
}

// `--target echo`: the transport's ceiling. An in-process ROUTER answers each
// message with itself; K DEALER clients send an 80-byte msgpack request, one
// in flight each, --jobs round trips in all.
//
// `--target echo-durable`: the ceiling of any durable server on this transport
// and disk, with no store at all. The echo server group-commits: it takes
// every message waiting, writes one 4 KiB page to a file (in place, as a
// reused WAL is written) and fdatasyncs it, and only then answers them all.
// A client with one request in flight cannot go faster than one round trip
// plus one fsync a request, however cheap the store.
//
// `--target echo-pg`: the same on PostgreSQL, the ceiling of a sidecar. Its
// commit a batch is one transaction of one statement on one connection (one
// round trip and one WAL flush, as a sidecar's batch is one pipeline), which
// bumps a counter in a one-row table `fenceq_echo` (in the URI's schema).
class EchoCommit {
 public:
  virtual ~EchoCommit() = default;
  virtual void commit(std::size_t requests) = 0;
  virtual long misses() const { return 0; }  // --echo-jobs: claims or completes that missed
};

class FileCommit : public EchoCommit {
 public:
  explicit FileCommit(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) throw std::runtime_error("cannot open " + path);
    for (int i = 0; i < kPages; ++i) {
      if (::pwrite(fd_, page_.data(), page_.size(), static_cast<off_t>(i) * 4096) < 0) break;
    }
    ::fsync(fd_);
  }
  ~FileCommit() override { ::close(fd_); }
  void commit(std::size_t) override {
    const auto off = static_cast<off_t>(writes_++ % kPages) * 4096;
    if (::pwrite(fd_, page_.data(), page_.size(), off) < 0 || ::fdatasync(fd_) != 0) {
      throw std::runtime_error("cannot write " + path_);
    }
  }

 private:
  static constexpr int kPages = 256;  // written round, like a WAL reused after a checkpoint
  std::string path_;
  std::string page_ = std::string(4096, 'w');
  int fd_ = -1;
  long writes_ = 0;
};

class PgCommit : public EchoCommit {
 public:
  explicit PgCommit(const std::string& uri) : c_(PQconnectdb(uri.c_str())) {
    if (PQstatus(c_) != CONNECTION_OK) fail("connect");
    run("CREATE TABLE IF NOT EXISTS fenceq_echo (id int PRIMARY KEY, n bigint NOT NULL)");
    run("INSERT INTO fenceq_echo VALUES (1, 0) ON CONFLICT (id) DO NOTHING");
  }
  ~PgCommit() override { PQfinish(c_); }
  void commit(std::size_t) override { run("UPDATE fenceq_echo SET n = n + 1 WHERE id = 1"); }

 private:
  void run(const char* sql) {
    PGresult* r = PQexec(c_, sql);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) fail(sql);
  }
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("echo-pg: " + what + ": " + PQerrorMessage(c_));
  }
  PGconn* c_;
};

// `--echo-jobs`: the batch is a sidecar's complete_next on a schema (echo_jobs.hpp).
class PgJobsCommit : public EchoCommit {
 public:
  PgJobsCommit(const std::string& uri, const std::string& schema, int held)
      : jobs_(uri, schema, held) {}
  void commit(std::size_t requests) override { jobs_.commit(requests); }
  long misses() const override { return jobs_.misses(); }

 private:
  EchoJobs jobs_;
};

// `batches` counts the batches it answered (each one commit when durable).
void echo_server(zmq::context_t& ctx, const std::string& endpoint, std::atomic<bool>& stop,
                 EchoCommit* durable, std::atomic<long>& batches) {
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 0);
  s.bind(endpoint);
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  std::vector<std::vector<zmq::message_t>> batch;
  while (!stop.load()) {
    if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) == 0) continue;
    batch.clear();
    for (;;) {  // everything waiting: one batch
      std::vector<zmq::message_t> frames;
      zmq::message_t f;
      if (!s.recv(f, zmq::recv_flags::dontwait)) break;
      frames.push_back(std::move(f));
      while (frames.back().more()) {
        zmq::message_t g;
        if (!s.recv(g)) break;
        frames.push_back(std::move(g));
      }
      batch.push_back(std::move(frames));
    }
    if (batch.empty()) continue;
    if (durable) durable->commit(batch.size());
    ++batches;
    for (auto& frames : batch) {
      for (std::size_t i = 0; i < frames.size(); ++i) {
        s.send(frames[i], i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    }
  }
}

void echo_client(const Config& cfg, int c, Result& r) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(cfg.endpoint);
  fenceq::protocol::Request q{
      fenceq::protocol::req::Claim{"job-000000000001", "bench-worker-" + std::to_string(c), 30}};
  q.rid = fenceq::protocol::Rid{std::uint64_t{1}};
  const std::string bytes = fenceq::protocol::encode_request(q);  // ~80 bytes
  for (int n = c; n < cfg.jobs; n += cfg.clients) {
    auto a = Clock::now();
    s.send(zmq::message_t(), zmq::send_flags::sndmore);
    s.send(zmq::buffer(bytes));
    zmq::message_t m;
    do {
      if (!s.recv(m)) break;
    } while (m.more());
    r.lat.add(a, Clock::now());
    ++r.completed;
  }
}

void beanstalk_worker(const Config& cfg, const std::string& run, int c, Result& r,
                      const std::vector<std::string>& ids) {
  Beanstalk b(cfg.addr);
  b.call("use bench" + run);
  b.call("watch bench" + run);
  b.call("ignore default");
  auto timed = [&](const std::string& cmd) {
    auto a = Clock::now();
    auto line = b.call(cmd);
    r.lat.add(a, Clock::now());
    return line;
  };
  const int ttr = static_cast<int>(cfg.ttl);
  (void)ttr;
  if (cfg.workload == "claim" || cfg.workload == "contended") {
    int step = cfg.workload == "claim" ? cfg.clients : 1;
    for (int n = cfg.workload == "claim" ? c : 0; n < cfg.jobs; n += step) {
      auto line = timed("reserve-job " + ids[static_cast<std::size_t>(n)]);
      if (line.rfind("RESERVED", 0) != 0) {
        if (cfg.workload == "claim") ++r.refused;
        continue;
      }
      timed("delete " + ids[static_cast<std::size_t>(n)]) == "DELETED" ? ++r.completed
                                                                      : ++r.refused;
    }
  } else {  // next, combined, renew-heavy
    for (;;) {
      auto line = timed("reserve-with-timeout 0");
      if (line.rfind("RESERVED ", 0) != 0) break;
      std::string id = line.substr(9, line.find(' ', 9) - 9);
      if (cfg.workload == "renew-heavy") {
        for (int i = 0; i < cfg.renews; ++i) timed("touch " + id);
      }
      timed("delete " + id) == "DELETED" ? ++r.completed : ++r.refused;
    }
  }
}

// --- fanin: issue 32's speed budget (children waiting for the N parents) ---

// Child c waits for the c-th slice of the parents, in order: parents
// [c * per, (c + 1) * per), per = ceil(N / children); `after` holds 1000 at most.
int parents_per_child(const Config& cfg) {
  return cfg.children > 0 ? (cfg.jobs + cfg.children - 1) / cfg.children : 0;
}

std::string child_id(const std::string& run, int c) {
  return "b" + run + "-child-" + std::to_string(c);
}

// How many of the children are in `status` (results reads 1000 ids a request).
int children_in(const Config& cfg, const std::string& run, fenceq::JobStatus status) {
  fenceq::Client cl(cfg.endpoint, fenceq::ClientOptions{std::chrono::seconds(30)});
  int n = 0;
  for (int from = 0; from < cfg.children; from += 1000) {
    std::vector<std::string> ids;
    for (int c = from; c < std::min(cfg.children, from + 1000); ++c) {
      ids.push_back(child_id(run, c));
    }
    for (const auto& [id, outcome] : cl.results(ids)) {
      if (outcome && outcome->status == status) ++n;
    }
  }
  return n;
}

// Setup, not measured, once the parents exist: the children, one request
// each (1000 parent ids are about 20 KB), in a queue of their own that no
// worker of the run claims from. Each must come out blocked.
void enqueue_children(const Config& cfg, const std::string& run) {
  fenceq::Client cl(cfg.endpoint, fenceq::ClientOptions{std::chrono::seconds(30)});
  const int per = parents_per_child(cfg);
  for (int c = 0; c < cfg.children; ++c) {
    fenceq::JobSpec j;
    j.id = child_id(run, c);
    j.queue = "bench" + run + "-children";
    for (int n = c * per; n < std::min(cfg.jobs, (c + 1) * per); ++n) {
      j.parents.push_back(job_id(run, n));
    }
    if (!cl.enqueue_many({j}).at(0)) throw std::runtime_error("child " + j.id + " exists");
  }
  if (children_in(cfg, run, fenceq::JobStatus::blocked) != cfg.children) {
    throw std::runtime_error("fanin: not every child is blocked after its enqueue");
  }
}

// --- the run ---

void add_options(CLI::App& app, Config& cfg, std::string& sync_file, std::string& run) {
  app.add_option("--target", cfg.target,
                 "fenceq, beanstalkd, echo (the transport alone), echo-durable (the transport "
                 "and one fsync a batch, no store) or echo-pg (the transport and one "
                 "PostgreSQL commit a batch)")
      ->check(CLI::IsMember({"fenceq", "plain", "beanstalkd", "echo", "echo-durable", "echo-pg"}));
  app.add_option("--sync-file", sync_file, "echo-durable: the file it fdatasyncs");
  app.add_option("--pg-uri", cfg.pg_uri, "echo-pg: the PostgreSQL database it commits to");
  app.add_option("--echo-jobs", cfg.echo_jobs,
                 "echo-pg: each request a complete and a claim on this schema (fenceq: fenceqd's "
                 "jobs of queue q; open: bench/pg_schema/open.sql; open1: the same, one statement a "
                 "request), not one statement a batch")
      ->check(CLI::IsMember({"fenceq", "open", "open1"}));
  app.add_option("--endpoint", cfg.endpoints,
                 "fenceqd endpoint; repeated: sidecars of one PostgreSQL database, the clients "
                 "spread over them");
  app.add_option("--addr", cfg.addr, "beanstalkd HOST:PORT");
  app.add_option("--workload", cfg.workload)
      ->check(CLI::IsMember({"claim", "next", "combined", "pipeline", "contended", "renew-heavy", "step-heavy",
                             "batch", "enqueue", "fanin"}));
  app.add_option("--batch", cfg.batch, "batch: jobs a claim takes; enqueue: jobs a request")
      ->check(CLI::Range(1, 1000));
  app.add_option("--jobs", cfg.jobs, "N")->check(CLI::Range(1, 10000000));
  app.add_option("--clients", cfg.clients, "K")->check(CLI::Range(1, 1024));
  app.add_option("--ttl", cfg.ttl, "lease seconds");
  app.add_option("--payload", cfg.payload, "payload and result bytes")
      ->check(CLI::Range(0, 200000));
  app.add_option("--depth", cfg.depth, "pipeline: requests in flight per client");
  app.add_option("--renews", cfg.renews, "renew-heavy: renews per job");
  app.add_option("--pid", cfg.pid, "server pid, for its CPU time and peak RSS");
  app.add_option("--label", cfg.label, "a label copied into the output");
  app.add_flag("--skip-enqueue", cfg.skip_enqueue, "the jobs are already there");
  app.add_flag("--keyed", cfg.keyed, "enqueue: each job with a unique key of its own");
  app.add_option("--groups", cfg.groups,
                 "job n of group g<n % GROUPS> (claims then take the groups in turn)");
  app.add_option("--limit", cfg.limit, "next/combined: jobs to process in all (0: all)");
  app.add_option("--queue", cfg.queue, "next/combined: the queue (default: bench<run>)");
  app.add_option("--children", cfg.children,
                 "fanin: jobs waiting for the N parents, each for N/CHILDREN of them (at most "
                 "1000); 0: none, the same run without them")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--run", run, "job id prefix (default: from the clock)");
}

// Setup (not measured): N jobs, enqueued by K clients. For beanstalkd, the
// ids it gave each job n.
std::vector<std::string> setup_jobs(const Config& cfg, const std::string& run, bool beanstalk) {
  std::vector<std::string> bean_ids(static_cast<std::size_t>(cfg.jobs));
  std::vector<std::thread> ts;
  std::mutex mu;
  for (int c = 0; c < cfg.clients; ++c) {
    ts.emplace_back([&, c] {
      const std::string payload(static_cast<std::size_t>(cfg.payload), 'p');
      if (beanstalk) {
        Beanstalk b(cfg.addr);
        b.call("use bench" + run);
        for (int n = c; n < cfg.jobs; n += cfg.clients) {
          auto line = b.call("put 0 0 " + std::to_string(static_cast<int>(cfg.ttl)) + " " +
                                 std::to_string(payload.size()),
                             &payload);
          std::lock_guard lock(mu);
          bean_ids[static_cast<std::size_t>(n)] = line.substr(line.find(' ') + 1);
        }
      } else {
        fenceq::Client cl(cfg.endpoint_of(c), fenceq::ClientOptions{std::chrono::seconds(30)});
        // Batches of up to 500 jobs, kept well under a 1 MiB frame.
        const std::size_t per = std::clamp<std::size_t>(
            512 * 1024 / (static_cast<std::size_t>(cfg.payload) + 64), 1, 500);
        std::vector<fenceq::JobSpec> jobs;
        for (int n = c; n < cfg.jobs; n += cfg.clients) {
          fenceq::JobSpec j;
          j.id = job_id(run, n);
          j.queue = "bench" + run;
          if (cfg.payload > 0) j.payload = fenceq::Payload{payload, false};
          if (cfg.groups > 0) j.group = "g" + std::to_string(n % cfg.groups);
          jobs.push_back(std::move(j));
          if (jobs.size() == per) {
            cl.enqueue_many(jobs);
            jobs.clear();
          }
        }
        if (!jobs.empty()) cl.enqueue_many(jobs);
      }
    });
  }
  for (auto& t : ts) t.join();
  return bean_ids;
}

// The daemons' own counters, summed over every endpoint.
fenceq::Stats server_stats(const Config& cfg) {
  fenceq::Stats sum;
  const auto& eps = cfg.endpoints.empty() ? std::vector<std::string>{cfg.endpoint} : cfg.endpoints;
  for (const auto& e : eps) {
    auto st = fenceq::Client(e).stats();
    sum.commits += st.commits;
    sum.batches += st.batches;
    sum.requests += st.requests;
  }
  return sum;
}

// What a run measured, for its JSON line.
struct Summary {
  long completed = 0, refused = 0;
  double secs = 0, cpu_s = 0, commits_per_s = 0, mean_batch = 0;
  long rss_kb = 0;
  int children_ready = 0;
};

// The JSON line on stdout (fanin's with its children) and the table line on stderr.
void print_summary(const Config& cfg, Summary& s, std::vector<double>& all) {
  const std::string fanin =
      cfg.workload != "fanin"
          ? ""
          : ", \"children\": " + std::to_string(cfg.children) +
                ", \"parents_per_child\": " + std::to_string(parents_per_child(cfg)) +
                ", \"children_ready\": " + std::to_string(s.children_ready);
  std::printf(
      "{\"label\": \"%s\", \"target\": \"%s\", \"workload\": \"%s\", \"clients\": %d, "
      "\"jobs\": %d, \"completed\": %ld, \"refused\": %ld, \"seconds\": %.3f, "
      "\"jobs_per_s\": %.0f, \"requests\": %zu, \"p50_us\": %.0f, \"p99_us\": %.0f, "
      "\"p999_us\": %.0f, \"server_cpu_s\": %.2f, \"server_peak_rss_kb\": %ld, "
      "\"commits_per_s\": %.0f, \"mean_batch\": %.2f%s}\n",
      cfg.label.c_str(), cfg.target.c_str(), cfg.workload.c_str(), cfg.clients, cfg.jobs,
      s.completed, s.refused, s.secs, static_cast<double>(s.completed) / s.secs, all.size(),
      percentile(all, 0.50), percentile(all, 0.99), percentile(all, 0.999), s.cpu_s, s.rss_kb,
      s.commits_per_s, s.mean_batch, fanin.c_str());
  std::fprintf(stderr, "%-12s %-10s %-11s K=%-3d %8.0f jobs/s  p50 %6.0f us  p99 %6.0f us\n",
               cfg.label.c_str(), cfg.target.c_str(), cfg.workload.c_str(), cfg.clients,
               static_cast<double>(s.completed) / s.secs, percentile(all, 0.50),
               percentile(all, 0.99));
}

// Why this combination of options cannot run, or "".
std::string refuse(const Config& cfg, const std::string& sync_file) {
  const bool beanstalk = cfg.target == "beanstalkd";
  if (cfg.target == "echo-durable" && sync_file.empty()) return "echo-durable needs --sync-file";
  if (cfg.target == "echo-pg" && cfg.pg_uri.empty()) return "echo-pg needs --pg-uri";
  if (!cfg.echo_jobs.empty() && cfg.target != "echo-pg") return "--echo-jobs is echo-pg's";
  if (beanstalk && (cfg.workload == "pipeline" || cfg.workload == "batch" ||
                    cfg.workload == "enqueue" || cfg.workload == "fanin")) {
    return cfg.workload + " is fenceq only";
  }
  if (cfg.target == "plain" && cfg.workload != "next" && cfg.workload != "combined") {
    return "the plain client runs next and combined only";
  }
  if (cfg.children > 0 && (cfg.workload != "fanin" || cfg.target != "fenceq")) {
    return "--children is the fanin workload's, against fenceqd";
  }
  // Each child's slice of ceil(N / CHILDREN) parents holds 1 to 1000 of them.
  if (parents_per_child(cfg) > 1000 ||
      (cfg.children > 0 && (cfg.children - 1) * parents_per_child(cfg) >= cfg.jobs)) {
    return "fanin: N parents do not split into --children slices of 1 to 1000 (a slice: "
           "ceil(N / CHILDREN) parents)";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fenceq-bench: load generator for fenceqd and beanstalkd"};
  Config cfg;
  std::string sync_file, run;
  add_options(app, cfg, sync_file, run);
  CLI11_PARSE(app, argc, argv);
  if (!cfg.endpoints.empty()) cfg.endpoint = cfg.endpoints.front();
  if (run.empty()) {
    run = std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
  }
  if (auto why = refuse(cfg, sync_file); !why.empty()) {
    std::fprintf(stderr, "fenceq-bench: %s\n", why.c_str());
    return 2;
  }
  const bool beanstalk = cfg.target == "beanstalkd";
  const bool echo = cfg.target.starts_with("echo");
  const bool plain = cfg.target == "plain";
  std::unique_ptr<EchoCommit> durable;
  if (cfg.target == "echo-durable") durable = std::make_unique<FileCommit>(sync_file);
  if (cfg.target == "echo-pg" && cfg.echo_jobs.empty()) {
    durable = std::make_unique<PgCommit>(cfg.pg_uri);
  } else if (cfg.target == "echo-pg") {
    durable = std::make_unique<PgJobsCommit>(cfg.pg_uri, cfg.echo_jobs, cfg.clients);
  }
  zmq::context_t echo_ctx(1);
  std::atomic<bool> echo_stop{false};
  std::atomic<long> echo_batches{0};
  std::thread echo_thread;
  if (echo) {
    echo_thread = std::thread(
        [&] { echo_server(echo_ctx, cfg.endpoint, echo_stop, durable.get(), echo_batches); });
    cfg.skip_enqueue = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // The plain client's workers share one context (one I/O thread).
  zmq::context_t plain_ctx(1);
  if (cfg.workload == "enqueue") cfg.skip_enqueue = true;  // the enqueues are the measurement

  std::vector<std::string> bean_ids(static_cast<std::size_t>(cfg.jobs));
  if (!cfg.skip_enqueue) bean_ids = setup_jobs(cfg, run, beanstalk);
  if (cfg.children > 0) enqueue_children(cfg, run);

  fenceq::Stats before;
  if (!beanstalk && !echo) before = server_stats(cfg);
  auto [cpu0, rss0] = proc_usage(cfg.pid);
  (void)rss0;
  std::vector<Result> results(static_cast<std::size_t>(cfg.clients));
  std::atomic<int> contended{0};
  auto t0 = Clock::now();
  {
    std::vector<std::thread> ts;
    for (int c = 0; c < cfg.clients; ++c) {
      ts.emplace_back([&, c] {
        auto& r = results[static_cast<std::size_t>(c)];
        if (echo) {
          echo_client(cfg, c, r);
        } else if (beanstalk) {
          beanstalk_worker(cfg, run, c, r, bean_ids);
        } else if (plain) {
          plain_worker(cfg, run, c, r, plain_ctx);
        } else if (cfg.workload == "pipeline") {
          fenceq_pipeline(cfg, run, c, r);
        } else {
          fenceq_worker(cfg, run, c, r, contended);
        }
      });
    }
    for (auto& t : ts) t.join();
  }
  Summary s;
  s.secs = std::chrono::duration<double>(Clock::now() - t0).count();
  auto [cpu1, rss1] = proc_usage(cfg.pid);
  s.cpu_s = cpu1 - cpu0;
  s.rss_kb = rss1;

  std::vector<double> all;
  for (auto& r : results) {
    s.completed += r.completed;
    s.refused += r.refused;
    all.insert(all.end(), r.lat.us.begin(), r.lat.us.end());
  }
  if (echo) {
    echo_stop = true;
    echo_thread.join();
    const auto batches = echo_batches.load();
    s.commits_per_s = durable ? static_cast<double>(batches) / s.secs : 0;
    s.mean_batch = batches ? static_cast<double>(s.completed) / static_cast<double>(batches) : 0;
    if (durable && durable->misses() > 0) {
      std::fprintf(stderr, "fenceq-bench: %ld claims found no job or completes no lease\n",
                   durable->misses());
      s.refused += durable->misses();
    }
  } else if (!beanstalk) {
    auto after = server_stats(cfg);
    s.commits_per_s = static_cast<double>(after.commits - before.commits) / s.secs;
    auto batches = after.batches - before.batches;
    s.mean_batch = batches
                       ? static_cast<double>(after.requests - before.requests -
                                             (cfg.endpoints.empty() ? 1 : cfg.endpoints.size())) /
                             static_cast<double>(batches)
                       : 0;
  }
  // fanin: each child was unblocked by its last parent's complete.
  if (cfg.children > 0) s.children_ready = children_in(cfg, run, fenceq::JobStatus::ready);
  print_summary(cfg, s, all);
  const long expected = cfg.limit > 0 ? cfg.limit : cfg.jobs;
  return s.refused == 0 && s.completed == expected && s.children_ready == cfg.children ? 0 : 1;
}
