#include "fenceq/client.hpp"

#include <cmath>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <variant>

#include "fenceq_protocol/codec.hpp"

namespace fenceq {
namespace {

namespace proto = fenceq::protocol;
using SteadyClock = std::chrono::steady_clock;

// Marks a Client busy for one call; a second concurrent caller fails loudly
// instead of interleaving frames on the socket.
class InUse {
 public:
  explicit InUse(std::atomic<bool>& flag) : flag_(flag) {
    if (flag_.exchange(true)) {
      throw Error("misuse", "fenceq::Client used by two threads at once; use one per thread");
    }
  }
  ~InUse() { flag_.store(false); }
  InUse(const InUse&) = delete;
  InUse& operator=(const InUse&) = delete;

 private:
  std::atomic<bool>& flag_;
};

constexpr std::size_t kZ85KeyChars = 40;

// A key's 40 Z85 characters, checked; throws naming `what`.
std::string checked_key(std::string key, const std::string& what) {
  std::uint8_t raw[32];
  if (key.size() != kZ85KeyChars || zmq_z85_decode(raw, key.c_str()) == nullptr) {
    throw Error("invalid_argument", what + " is not a 40-character Z85 CURVE key");
  }
  return key;
}

// `KEY` or `name = "KEY"` (a zcert property line): the key, or "" when the
// line is a property of another name.
std::string key_of(const std::string& line, const std::string& name) {
  std::istringstream words(line);
  std::string first, eq, quoted;
  words >> first >> eq >> quoted;
  if (eq.empty()) return first;
  if (eq != "=" || first != name) return "";
  if (quoted.size() >= 2 && quoted.front() == '"' && quoted.back() == '"') {
    return quoted.substr(1, quoted.size() - 2);
  }
  return quoted;
}

}  // namespace

CurveKeys curve_keys(const std::string& key_file, const std::string& server_public) {
  std::ifstream in(key_file);
  if (!in) throw Error("invalid_argument", "cannot read CURVE key file " + key_file);
  CurveKeys keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    // Only whole lines are comments: '#' is also a Z85 digit.
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (line.find('=') == std::string::npos) continue;  // `curve`, `metadata` sections
    const auto where = key_file + ":" + std::to_string(n);
    if (auto k = key_of(line, "public-key"); !k.empty()) {
      keys.public_key = checked_key(k, where + ": public-key");
    } else if (auto s = key_of(line, "secret-key"); !s.empty()) {
      keys.secret_key = checked_key(s, where + ": secret-key");
    }
  }
  if (keys.public_key.empty() || keys.secret_key.empty()) {
    throw Error("invalid_argument", key_file +
                                        " has no public-key and secret-key lines: make one with "
                                        "`fenceqd --curve-keygen FILE`");
  }
  char derived[kZ85KeyChars + 1];
  if (zmq_curve_public(derived, keys.secret_key.c_str()) == 0 && keys.public_key != derived) {
    throw Error("invalid_argument",
                key_file + ": its public-key does not belong to its secret-key");
  }
  keys.server_public = checked_key(key_of(server_public, "public-key"), "the server's public key");
  return keys;
}

ResolvedEndpoint resolve_endpoint(std::string_view given, const char* env,
                                  bool service_socket_exists) {
  if (!given.empty()) return {std::string(given), EndpointSource::given};
  if (env && *env) return {env, EndpointSource::environment};
  if (service_socket_exists) return {kServiceEndpoint, EndpointSource::service};
  return {kDevelopmentEndpoint, EndpointSource::development};
}

ResolvedEndpoint resolve_endpoint(std::string_view given) {
  if (!given.empty()) return {std::string(given), EndpointSource::given};
  // A file in a folder this user may not search (/run/fenceq outside group
  // fenceq) counts as there: the service is, and the error says who may connect.
  struct stat st {};
  const char* service_file = kServiceEndpoint + 6;  // the path after ipc://
  const bool service = ::stat(service_file, &st) == 0 || errno == EACCES;
  return resolve_endpoint(given, std::getenv("FENCEQ_ENDPOINT"), service);
}

std::string default_endpoint() { return resolve_endpoint().endpoint; }

namespace {

// How an error names the step of resolve_endpoint's order that chose an endpoint.
const char* chosen_by(EndpointSource source) {
  switch (source) {
    case EndpointSource::given: return "given explicitly";
    case EndpointSource::environment: return "from FENCEQ_ENDPOINT";
    case EndpointSource::service: return "the installed service's socket";
    case EndpointSource::development: return "the development default";
  }
  return "";
}

// Why nothing can answer on an ipc:// endpoint, when its socket file says so
// ("" otherwise): none there (with its absolute path: a relative one is read
// from the current folder), not a socket, or one this user may not connect to.
std::string ipc_problem(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) != 0 || endpoint.size() == 6 || endpoint[6] == '@') return "";
  const std::string path = endpoint.substr(6);
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).lexically_normal().string();
  struct stat st {};
  const std::string denied = "this user may not connect to " + abs +
                             " (permission denied: fenceqd's --ipc-mode sets who may)";
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == EACCES) return denied;  // a folder on the way is not ours to search
    return "there is no socket at " + abs +
           " (is fenceqd running? `make run` starts one that serves ipc://var/fenceqd.sock "
           "from the repository's folder)";
  }
  if (!S_ISSOCK(st.st_mode)) return abs + " is not a socket";
  if (::access(path.c_str(), W_OK) != 0) return denied;
  return "";
}

}  // namespace

// One ZeroMQ context (one I/O thread) for every Client of the process:
// contexts are thread-safe, and a thread per Client costs more than it
// carries. Never destroyed: its destructor would wait for sockets of Clients
// that outlive static destruction.
zmq::context_t& shared_context() {
  static auto* ctx = new zmq::context_t(1);
  return *ctx;
}

// CURVE for a tcp:// endpoint, before it connects (Client, Subscriber).
void secure_socket(zmq::socket_t& socket, const std::string& endpoint,
                   const std::optional<CurveKeys>& curve) {
  if (!curve) return;
  if (endpoint.rfind("tcp://", 0) != 0) {
    throw Error("invalid_argument", "CURVE keys are for tcp:// endpoints; fenceqd serves " +
                                        endpoint + " without CURVE");
  }
  socket.set(zmq::sockopt::curve_serverkey,
             checked_key(curve->server_public, "the server's public key"));
  socket.set(zmq::sockopt::curve_publickey, checked_key(curve->public_key, "the public key"));
  socket.set(zmq::sockopt::curve_secretkey, checked_key(curve->secret_key, "the secret key"));
}

struct Client::Impl {
  std::string endpoint;
  EndpointSource source;
  ClientOptions options;
  zmq::socket_t socket{shared_context(), zmq::socket_type::dealer};
  std::uint64_t next_rid = 1;
  std::atomic<bool> busy{false};
  // Until the first reply, a missing or foreign ipc:// socket file fails a
  // call at once (a wrong endpoint, or no daemon); afterwards the daemon is
  // known to be there, and a missing file is a restart worth waiting for.
  bool answered = false;
  int rcvtimeo = -1;  // the socket's ZMQ_RCVTIMEO, in ms (-1: none, ZeroMQ's default)

  Impl(ResolvedEndpoint e, ClientOptions o)
      : endpoint(std::move(e.endpoint)), source(e.source), options(std::move(o)) {
    socket.set(zmq::sockopt::linger, 0);
    // A request is queued only on a connection that is up (ZMQ_IMMEDIATE),
    // before connect as libzmq asks: without it a request made while the
    // daemon is down waits in the socket's pipe, and the daemon that comes
    // back applies it after the call has answered `timeout` (the kit's fake
    // group caught this, now and then, as the race with the disconnect went).
    socket.set(zmq::sockopt::immediate, 1);
    // So a DEALER's send blocks while it has no connection to send on (a
    // daemon down, a CURVE handshake that failed): bounded by the call's
    // timeout, as the wait for the reply is, so that no call can hang.
    socket.set(zmq::sockopt::sndtimeo,
               static_cast<int>(std::clamp<std::int64_t>(options.timeout.count(), 1, INT_MAX)));
    secure_socket(socket, endpoint, options.curve);
    try {
      socket.connect(endpoint);
    } catch (const zmq::error_t& err) {
      // A malformed endpoint: the caller's argument, refused before anything is sent.
      throw Error("invalid_argument", "cannot connect to " + endpoint + ": " + err.what());
    }
  }

  // Sends one request and waits for the reply carrying its rid. Replies with
  // any other rid are late replies to calls that timed out: dropped.
  proto::Result call(proto::Request req, std::chrono::milliseconds extra = {}) {
    InUse guard(busy);
    const proto::Rid rid{next_rid++};
    req.rid = rid;
    const std::string payload = proto::encode_request(req);
    if (!answered) {
      if (auto why = ipc_problem(endpoint); !why.empty()) {
        // Which step chose the endpoint, and what the caller's user changes.
        const std::string choose =
            source == EndpointSource::given
                ? options.choose_endpoint + " (FENCEQ_ENDPOINT is read only when none is given)"
                : options.choose_endpoint + " or set FENCEQ_ENDPOINT";
        throw Error("unreachable", "nothing serves " + endpoint + " (" + chosen_by(source) +
                                       "): " + why + "; to use another endpoint, " + choose +
                                       "; the request was not sent");
      }
    }
    try {
      // DEALER with the empty delimiter: the same envelope a REQ socket sends.
      if (!socket.send(zmq::message_t(), zmq::send_flags::sndmore) ||
          !socket.send(zmq::buffer(payload), zmq::send_flags::none)) {
        throw Error("timeout", "could not send to " + endpoint + " within " +
                                   std::to_string(options.timeout.count()) +
                                   " ms (no connection took it); the request was not sent");
      }
      const auto deadline = SteadyClock::now() + options.timeout + extra;
      for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                          SteadyClock::now());
        // A receive bounded by ZMQ_RCVTIMEO, not a poll and then a receive:
        // the poll's own look at the socket cost a getpid and a poll system
        // call a reply (bench/README.md, "System calls").
        const int wait_ms = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, INT_MAX));
        if (wait_ms != rcvtimeo) {
          socket.set(zmq::sockopt::rcvtimeo, wait_ms);
          rcvtimeo = wait_ms;
        }
        zmq::message_t frame;
        if (!socket.recv(frame, zmq::recv_flags::none)) {
          if (SteadyClock::now() >= deadline) {
            throw Error("timeout", "no reply from " + endpoint + " within " +
                                       std::to_string(options.timeout.count()) + " ms" +
                                       [&] {
                                         auto why = ipc_problem(endpoint);
                                         return why.empty() ? why : "; " + why;
                                       }());
          }
          continue;
        }
        // The rest of a multipart message is delivered with its first frame.
        while (frame.more() && socket.recv(frame, zmq::recv_flags::none)) {
        }
        std::string_view body(static_cast<const char*>(frame.data()), frame.size());
        std::optional<proto::Reply> reply;
        try {
          reply = proto::decode_reply(body, req.op, rid);
        } catch (const proto::ReplyFormatError& e) {
          throw Error("bad_reply", e.what());
        }
        if (!reply) continue;
        answered = true;
        if (!reply->ok) throw Error(reply->error_code, reply->error_message);
        return std::move(reply->result);
      }
    } catch (const zmq::error_t& e) {
      throw Error("transport", e.what());
    }
  }
};

Client::Client(std::string endpoint, ClientOptions options)
    : impl_(std::make_unique<Impl>(resolve_endpoint(endpoint), std::move(options))) {}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

const std::string& Client::endpoint() const { return impl_->endpoint; }
EndpointSource Client::endpoint_source() const { return impl_->source; }

namespace {

// The request of op struct `q`, with the client clock's `now` when given.
template <class T>
proto::Request request(T q, std::optional<double> now = std::nullopt) {
  proto::Request r{std::move(q)};
  r.now = now;
  return r;
}

}  // namespace

ServerInfo Client::ping() { return std::get<ServerInfo>(impl_->call(proto::req::Ping{})); }

ServerInfo Client::describe() {
  proto::req::Ping q;
  q.describe = true;
  return std::get<ServerInfo>(impl_->call(q));
}

bool Client::enqueue(std::string_view id) {
  proto::req::Enqueue q;
  q.id = id;
  return std::get<bool>(impl_->call(q));
}

std::optional<JobState> Client::state(std::string_view id) {
  auto res = impl_->call(proto::req::State{std::string(id)});
  if (auto* row = std::get_if<JobState>(&res)) return std::move(*row);
  return std::nullopt;
}

std::optional<std::int64_t> Client::claim(std::string_view id, std::string_view owner, double ttl,
                                          std::optional<double> now) {
  proto::req::Claim q;
  q.id = id;
  q.owner = owner;
  q.ttl = ttl;
  auto res = impl_->call(request(std::move(q), now));
  if (const auto* fence = std::get_if<std::int64_t>(&res)) return *fence;
  return std::nullopt;
}

bool Client::renew(std::string_view id, std::string_view owner, std::int64_t fence, double ttl,
                   std::optional<double> now, std::optional<std::string_view> progress) {
  proto::req::Renew q;
  q.id = id;
  q.owner = owner;
  q.fence = fence;
  q.ttl = ttl;
  if (progress) q.progress = std::string(*progress);
  return std::get<bool>(impl_->call(request(std::move(q), now)));
}

bool Client::complete(std::string_view id, std::string_view owner, std::int64_t fence,
                      std::optional<std::string_view> result, std::optional<double> now) {
  proto::req::Complete q;
  q.id = id;
  q.owner = owner;
  q.fence = fence;
  if (result) q.result = std::string(*result);
  return std::get<bool>(impl_->call(request(std::move(q), now)));
}

bool Client::release(std::string_view id, std::string_view owner, std::int64_t fence) {
  proto::req::Release q;
  q.id = id;
  q.owner = owner;
  q.fence = fence;
  return std::get<bool>(impl_->call(std::move(q)));
}

namespace {

// A deadline (C3.24) is Unix seconds, or 0 for none: one below 0 or not a
// number would be left out of the request (a job with no deadline), so it is
// refused here, before anything is sent. (The daemon refuses one too large.)
void check_deadline(double deadline) {
  if (deadline == 0 || (std::isfinite(deadline) && deadline > 0)) return;
  std::ostringstream what;
  what << "deadline must be Unix seconds > 0 (0: none), got " << deadline << "; nothing was sent";
  throw Error("invalid_argument", what.str());
}

// The job of an enqueue of `id` with `o`'s options (enqueue, enqueue_and_wait).
JobSpec job_of(std::string_view id, const EnqueueOptions& o) {
  check_deadline(o.deadline);
  JobSpec j;
  j.id = id;
  j.queue = o.queue;
  j.payload = o.payload;
  j.priority = o.priority;
  j.delay = o.delay;
  j.max_attempts = o.max_attempts;
  j.key = o.key;
  j.unique_for = o.unique_for;
  j.replace = o.replace;
  j.group = o.group;
  j.parents = o.after;
  j.after_run = o.after_run;
  j.max_runtime = o.max_runtime;
  j.headers = o.headers;
  j.deadline = o.deadline;
  return j;
}
proto::Request enqueue_request(std::string_view id, const EnqueueOptions& o) {
  return request(proto::req::Enqueue{job_of(id, o)}, o.now);
}

// An enqueue's answer as the created flag: a bool, or a keyed answer's.
bool created_of(const proto::Result& res) {
  if (const auto* e = std::get_if<Enqueued>(&res)) return e->created;
  return std::get<bool>(res);
}

std::chrono::milliseconds wait_extension(double wait) {
  return std::chrono::milliseconds(static_cast<long long>(std::max(0.0, wait) * 1000));
}

}  // namespace

bool Client::enqueue(std::string_view id, const EnqueueOptions& o) {
  return created_of(impl_->call(enqueue_request(id, o)));
}

Enqueued Client::enqueue_unique(std::string_view id, const EnqueueOptions& o) {
  if (!o.key) throw Error("invalid_argument", "enqueue_unique needs options.key");
  auto res = impl_->call(enqueue_request(id, o));
  if (auto* e = std::get_if<Enqueued>(&res)) return std::move(*e);
  // A daemon that knows no keys answers a bool: it ignored the key.
  throw Error("unsupported_version", "the daemon answered enqueue without its key's answer "
                                     "(a daemon older than unique keys ignores `key`)");
}

std::optional<ClaimedJob> Client::claim_next(std::string_view queue, std::string_view owner,
                                             double ttl, double wait, std::optional<double> now) {
  proto::req::ClaimNext q;
  q.queue = queue;
  q.owner = owner;
  q.ttl = ttl;
  q.wait = wait;
  auto extra = wait_extension(wait);
  auto res = impl_->call(request(std::move(q), now), extra);
  if (auto* job = std::get_if<ClaimedJob>(&res)) return std::move(*job);
  return std::nullopt;
}

CompletedAndNext Client::complete_and_claim_next(std::string_view id, std::string_view owner,
                                                std::int64_t fence,
                                                std::optional<std::string_view> result,
                                                std::string_view queue, double ttl,
                                                std::optional<double> now) {
  proto::req::CompleteNext q;
  q.id = id;
  q.owner = owner;
  q.fence = fence;
  if (result) q.result = std::string(*result);
  q.queue = queue;
  q.ttl = ttl;
  return std::get<CompletedAndNext>(impl_->call(request(std::move(q), now)));
}

namespace {
proto::Request enqueue_many_request(const std::vector<JobSpec>& jobs, std::optional<double> now) {
  for (const auto& j : jobs) check_deadline(j.deadline);
  return request(proto::req::EnqueueMany{jobs}, now);
}
}  // namespace

std::vector<bool> Client::enqueue_many(const std::vector<JobSpec>& jobs,
                                       std::optional<double> now) {
  auto res = impl_->call(enqueue_many_request(jobs, now));
  if (auto* keyed = std::get_if<proto::EnqueuedList>(&res)) {
    std::vector<bool> out;
    for (const auto& e : *keyed) out.push_back(e.created);
    return out;
  }
  return std::get<proto::BoolList>(res);
}

std::vector<Enqueued> Client::enqueue_many_unique(const std::vector<JobSpec>& jobs,
                                                  std::optional<double> now) {
  auto res = impl_->call(enqueue_many_request(jobs, now));
  if (auto* keyed = std::get_if<proto::EnqueuedList>(&res)) return std::move(*keyed);
  std::vector<Enqueued> out;
  for (bool created : std::get<proto::BoolList>(res)) out.push_back({"", created, false});
  return out;
}

std::vector<ClaimedJob> Client::claim_next_many(std::string_view queue, std::string_view owner,
                                                double ttl, std::int64_t max, double wait,
                                                std::optional<double> now) {
  // A `max` below 1 would be refused by the daemon (and left out, one job,
  // answered a job or nil, not a list): refused here instead.
  if (max < 1 || max > proto::kMaxBatchItems) {
    throw Error("invalid_argument", "claim_next_many: max must be in [1, " +
                                        std::to_string(proto::kMaxBatchItems) + "], got " +
                                        std::to_string(max) + "; nothing was sent");
  }
  proto::req::ClaimNext q;
  q.queue = queue;
  q.owner = owner;
  q.ttl = ttl;
  q.max = max;
  q.wait = wait;
  auto extra = wait_extension(wait);
  return std::get<proto::ClaimedJobs>(impl_->call(request(std::move(q), now), extra));
}

std::vector<bool> Client::complete_many(const std::vector<LeaseItem>& items,
                                        std::optional<double> now) {
  proto::req::CompleteMany q;
  q.items = items;
  return std::get<proto::BoolList>(impl_->call(request(std::move(q), now)));
}

CompletedManyAndNext Client::complete_many_and_claim(const std::vector<LeaseItem>& items,
                                                     std::string_view queue, double ttl,
                                                     std::int64_t max,
                                                     std::optional<double> now) {
  proto::req::CompleteMany q;
  q.items = items;
  q.next = proto::req::Next{std::string(queue), ttl, max};
  return std::get<CompletedManyAndNext>(impl_->call(request(std::move(q), now)));
}

std::vector<bool> Client::renew_many(const std::vector<LeaseItem>& items, double ttl,
                                     std::optional<double> now) {
  proto::req::RenewMany q;
  q.items = items;
  q.ttl = ttl;
  return std::get<proto::BoolList>(impl_->call(request(std::move(q), now)));
}

bool Client::fail(std::string_view id, std::string_view owner, std::int64_t fence,
                  std::string_view error, std::optional<double> retry_in,
                  std::optional<double> now) {
  proto::req::Fail q;
  q.id = id;
  q.owner = owner;
  q.fence = fence;
  q.error = error;
  q.retry_in = retry_in;
  return std::get<bool>(impl_->call(request(std::move(q), now)));
}

bool Client::snooze(std::string_view id, std::string_view owner, std::int64_t fence,
                    double delay, std::optional<double> now) {
  proto::req::Snooze q;
  q.id = id;
  q.owner = owner;
  q.fence = fence;
  q.delay = delay;
  return std::get<bool>(impl_->call(request(std::move(q), now)));
}

bool Client::step_save(std::string_view id, std::string_view owner, std::int64_t fence,
                       std::string_view step, const std::optional<Payload>& value,
                       std::optional<double> now) {
  proto::req::StepSave q;
  q.id = id;
  q.owner = owner;
  q.fence = fence;
  q.step = step;
  q.value = value;
  return std::get<bool>(impl_->call(request(std::move(q), now)));
}

std::optional<std::string> Client::suspend(std::string_view id, std::string_view owner,
                                           std::int64_t fence, double timeout, OnTimeout on_timeout,
                                           std::optional<double> now) {
  proto::req::Suspend q;
  q.id = id;
  q.owner = owner;
  q.fence = fence;
  q.timeout = timeout;
  q.fail = on_timeout == OnTimeout::fail;  // retry: left out on the wire
  auto res = impl_->call(request(std::move(q), now));
  if (auto* token = std::get_if<std::string>(&res)) return std::move(*token);
  // The lease was not current. (`true` never comes: read_result takes it as
  // a bool all the same, and it is no token.)
  if (std::get<bool>(res)) throw Error("bad_reply", "suspend answered true, not a token");
  return std::nullopt;
}

bool Client::signal(std::string_view token, const std::optional<Payload>& value,
                    std::optional<double> now) {
  proto::req::Signal q;
  q.token = token;
  q.value = value;  // nil: left out (the daemon takes it as nil)
  return std::get<bool>(impl_->call(request(std::move(q), now)));
}

bool Client::check(std::string_view id, std::string_view owner, std::int64_t fence,
                   std::optional<double> now) {
  proto::req::Check q;
  q.id = id;
  q.owner = owner;
  q.fence = fence;
  return std::get<bool>(impl_->call(request(std::move(q), now)));
}

bool Client::retry(std::string_view id) {
  return std::get<bool>(impl_->call(proto::req::Retry{std::string(id)}));
}

bool Client::cancel(std::string_view id) {
  return std::get<bool>(impl_->call(proto::req::Cancel{std::string(id)}));
}

std::optional<JobDetail> Client::await_job(std::string_view id, double wait) {
  proto::req::AwaitJob q;
  q.id = id;
  q.wait = wait;
  auto res = impl_->call(std::move(q), wait_extension(wait));
  if (auto* d = std::get_if<JobDetail>(&res)) return std::move(*d);
  return std::nullopt;
}

std::optional<JobDetail> Client::enqueue_and_wait(std::string_view id,
                                                  const EnqueueOptions& options, double wait) {
  proto::req::EnqueueAndWait q;
  static_cast<JobSpec&>(q) = job_of(id, options);
  q.wait = wait;
  try {
    auto res = impl_->call(request(std::move(q), options.now), wait_extension(wait));
    if (auto* d = std::get_if<JobDetail>(&res)) return std::move(*d);
    return std::nullopt;
  } catch (const Error& e) {
    if (e.code() != "unknown_op") throw;
  }
  // A daemon before enqueue_and_wait: the same in two requests.
  enqueue(id, options);  // false: it existed; awaiting it is still what was asked
  return await_job(id, wait);
}

bool Client::queue_config(std::string_view queue, const QueueSettings& settings) {
  proto::req::QueueConfig q;
  q.queue = queue;
  q.paused = settings.paused;
  q.max_leased = settings.max_leased;
  q.rate = settings.rate;
  q.per = settings.per;
  q.group_max_leased = settings.group_max_leased;
  q.group_rate = settings.group_rate;
  q.group_per = settings.group_per;
  // kKeepForever: nil on the wire.
  const auto keep = [](std::optional<double> k) -> std::optional<std::optional<double>> {
    if (!k) return std::nullopt;
    if (std::isinf(*k)) return std::optional<double>();
    return k;
  };
  q.keep_done = keep(settings.keep_done);
  q.keep_dead = keep(settings.keep_dead);
  q.keep_cancelled = keep(settings.keep_cancelled);
  return std::get<bool>(impl_->call(std::move(q)));
}

bool Client::group_config(std::string_view queue, std::string_view group,
                          const GroupSettings& settings) {
  proto::req::GroupConfig q;
  q.queue = queue;
  q.group = group;
  q.max_leased = settings.max_leased;
  q.rate = settings.rate;
  q.per = settings.per;
  return std::get<bool>(impl_->call(std::move(q)));
}

bool Client::schedule_set(std::string_view name, std::string_view cron,
                          const ScheduleOptions& options) {
  proto::req::ScheduleSet q;
  q.name = name;
  q.cron = cron;
  q.tz = options.tz;
  q.queue = options.queue;
  q.payload = options.payload;
  q.priority = options.priority;
  q.max_attempts = options.max_attempts;
  return std::get<bool>(impl_->call(std::move(q)));
}

bool Client::schedule_delete(std::string_view name) {
  return std::get<bool>(impl_->call(proto::req::ScheduleDelete{std::string(name)}));
}

std::vector<Schedule> Client::schedule_list() {
  return std::get<proto::ScheduleList>(impl_->call(proto::req::ScheduleList{}));
}

Stats Client::stats() { return std::get<Stats>(impl_->call(proto::req::Stats{})); }

std::vector<JobInfo> Client::list(const ListOptions& o) {
  proto::req::List q;
  q.queue = o.queue;
  q.status = o.status;
  q.limit = o.limit;
  if (!o.after.empty()) q.cursor = o.after;
  q.order = o.order;
  q.after_created = o.after_created;
  if (!o.prefix.empty()) q.prefix = o.prefix;
  q.key = o.key;
  q.group = o.group;
  return std::get<proto::JobList>(impl_->call(std::move(q)));
}

std::optional<JobDetail> Client::job(std::string_view id) {
  auto res = impl_->call(proto::req::Job{std::string(id)});
  if (auto* d = std::get_if<JobDetail>(&res)) return std::move(*d);
  return std::nullopt;
}

std::vector<bool> Client::enqueue_fan_in(std::vector<JobSpec> parts, JobSpec child,
                                         std::optional<double> now) {
  for (const auto& p : parts) child.parents.push_back(p.id);
  parts.push_back(std::move(child));
  return enqueue_many(parts, now);
}

JobResults Client::results(const std::vector<std::string>& ids) {
  proto::req::Results q;
  q.ids = ids;
  return std::get<JobResults>(impl_->call(std::move(q)));
}

std::int64_t Client::purge(double older_than, std::optional<std::string> queue) {
  proto::req::Purge q;
  q.older_than = older_than;
  q.queue = std::move(queue);
  return std::get<std::int64_t>(impl_->call(std::move(q)));
}

namespace {
proto::req::BulkFilter bulk_filter(const BulkFilter& f) {
  proto::req::BulkFilter out;
  out.status = f.state;
  out.prefix = f.prefix;
  out.group = f.group;
  out.limit = f.limit;
  return out;
}
}  // namespace

BulkOutcome Client::retry_many(std::string_view queue, const BulkFilter& filter) {
  return std::get<BulkOutcome>(
      impl_->call(proto::req::RetryMany{bulk_filter(filter), std::string(queue)}));
}

BulkOutcome Client::cancel_many(std::string_view queue, const BulkFilter& filter) {
  return std::get<BulkOutcome>(
      impl_->call(proto::req::CancelMany{bulk_filter(filter), std::string(queue)}));
}

BulkOutcome Client::purge_many(std::optional<std::string> queue, const BulkFilter& filter,
                               double older_than) {
  proto::req::Purge q{bulk_filter(filter), std::move(queue), older_than, true};
  return std::get<BulkOutcome>(impl_->call(std::move(q)));
}

std::string Client::metrics() { return std::get<std::string>(impl_->call(proto::req::Metrics{})); }

}  // namespace fenceq
