#include "http/bridge.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <stdexcept>

#include "http/http_server.hpp"

namespace fenceq::daemon::http {
namespace {

using Steady = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kRequestTimeout{5000};
constexpr std::chrono::milliseconds kMetricsFresh{1000};

void wake(int fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
}

}  // namespace

Bridge::Bridge(zmq::context_t& ctx, Answers answers) : ctx_(ctx), answers_(std::move(answers)) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw std::runtime_error("cannot create an eventfd for HTTP");
}

Bridge::~Bridge() {
  stop();
  ::close(wake_fd_);
}

void Bridge::run() {
  thread_ = std::thread([this] { loop(); });
}

void Bridge::stop() {
  stop_ = true;
  wake(wake_fd_);
  if (thread_.joinable()) thread_.join();
}

MHD_Result Bridge::start(MHD_Connection* c, void** state, protocol::Request r, Kind kind) {
  if (stop_) return reply(c, 503, "fenceqd is stopping\n");
  std::unique_lock lock(mutex_);
  if (kind == Kind::metrics && !metrics_.body.empty() && Steady::now() - metrics_.at < kMetricsFresh) {
    const std::string body = metrics_.body;
    lock.unlock();
    return reply(c, 200, body, kMetricsType, false, true);
  }
  lock.unlock();
  // Suspended before the bridge can see it, so that it is never resumed
  // first; only the bridge resumes it, and the bridge answers everything
  // it holds before it stops.
  MHD_suspend_connection(c);
  auto p = std::make_shared<Pending>();
  p->connection = c;
  p->request = std::move(r);
  p->kind = kind;
  p->deadline = Steady::now() + kRequestTimeout;
  if (is_dashboard(kind)) {
    p->type = "application/json";
    p->body = error_body("unavailable", "fenceqd did not answer");
  }
  lock.lock();
  if (kind == Kind::metrics && metrics_.scrape) {
    metrics_.followers.push_back(p);  // answered with the scrape on its way
  } else {
    if (kind == Kind::metrics) metrics_.scrape = p;
    p->rid = next_rid_++;
    p->request.rid = protocol::Rid{p->rid};
    outbox_.push_back(p);
    waiting_[p->rid] = p;
  }
  lock.unlock();
  // The connection's state until handle() sees it again, resumed.
  *state = new std::shared_ptr<Pending>(p);
  wake(wake_fd_);
  return MHD_YES;
}

std::shared_ptr<Pending> Bridge::resumed(void** state) {
  auto* pending = static_cast<std::shared_ptr<Pending>*>(*state);
  if (!pending) return nullptr;
  std::shared_ptr<Pending> p = std::move(*pending);
  delete pending;
  *state = nullptr;
  return p;
}

void Bridge::completed(void** state) {
  delete static_cast<std::shared_ptr<Pending>*>(*state);
  *state = nullptr;
}

void Bridge::finish(const std::shared_ptr<Pending>& p) {
  if (p->done) return;
  p->done = true;
  MHD_resume_connection(p->connection);
}

void Bridge::settle_metrics(const Pending& scrape) {
  if (metrics_.scrape.get() != &scrape) return;
  if (scrape.status == 200) {
    metrics_.body = scrape.body;
    metrics_.at = Steady::now();
  }
  for (auto& f : metrics_.followers) {
    f->status = scrape.status;
    f->body = scrape.body;
    f->type = scrape.type;
    finish(f);
  }
  metrics_.followers.clear();
  metrics_.scrape = nullptr;
}

void Bridge::send_outbox(zmq::socket_t& s) {
  std::deque<std::shared_ptr<Pending>> send;
  {
    std::lock_guard lock(mutex_);
    send.swap(outbox_);
  }
  for (auto& p : send) {
    s.send(zmq::buffer(protocol::encode_request(p->request)), zmq::send_flags::dontwait);
  }
}

void Bridge::receive(zmq::socket_t& s) {
  zmq::message_t m;
  while (s.recv(m, zmq::recv_flags::dontwait)) {
    auto rid = protocol::reply_rid(m.to_string_view());
    if (!rid) continue;
    const auto* n = std::get_if<std::uint64_t>(&rid->value);
    if (!n) continue;
    std::shared_ptr<Pending> p;
    {
      std::lock_guard lock(mutex_);
      auto it = waiting_.find(*n);
      if (it == waiting_.end()) continue;
      p = it->second;
      waiting_.erase(it);
    }
    try {
      answers_.answer(*p, m.to_string_view());
    } catch (const std::exception& e) {
      // A reply this thread could not shape: the request's error, never the daemon's end.
      p->status = 500;
      p->type = "application/json";
      p->body = error_body("internal", e.what());
    }
    std::lock_guard lock(mutex_);
    finish(p);
    settle_metrics(*p);
  }
}

bool Bridge::expire() {
  const auto now = Steady::now();
  const bool stopping = stop_.load();
  std::lock_guard lock(mutex_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (stopping || it->second->deadline <= now) {
      if (stopping && it->second->type.starts_with("text/plain")) {
        it->second->body = "fenceqd is stopping\n";
      }
      finish(it->second);
      settle_metrics(*it->second);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  return stopping;
}

void Bridge::loop() {
  zmq::socket_t s(ctx_, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(kHttpInproc);
  for (;;) {
    // The throughput history, from the start (at most 200 ms late).
    answers_.sample();
    zmq_pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(200));
    if (items[1].revents & ZMQ_POLLIN) {
      std::uint64_t drained;
      while (::read(wake_fd_, &drained, sizeof drained) > 0) {
      }
    }
    send_outbox(s);
    receive(s);
    if (expire()) return;
  }
}

}  // namespace fenceq::daemon::http
