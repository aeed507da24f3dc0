// fenceq C++ client: talks to a fenceqd over ZeroMQ.
//
// Every write carries the owner and the fence (the token `claim` returned), and
// the daemon refuses any write whose lease is no longer current. A refusal by
// the contract is a value: an empty optional or `false`. Bad arguments, error
// replies, timeouts and transport failures throw fenceq::Error.
//
//   fenceq::Client c;                                  // FENCEQ_ENDPOINT or ipc://var/fenceqd.sock
//   c.enqueue("job-7");
//   if (auto fence = c.claim("job-7", "worker-a", 30)) {
//     ... do the work, calling c.renew("job-7", "worker-a", *fence, 30) while it runs ...
//     bool stored = c.complete("job-7", "worker-a", *fence, "result");  // false: lease lost
//   }
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fenceq {

// An error reply, a timeout or a transport failure. code() is stable:
// the daemon's codes (bad_request, unknown_op, invalid_argument,
// unsupported_version, unavailable, internal) or the client's own:
// "timeout" (no reply in time; the request may or may not have been applied),
// "transport" (the socket failed), "bad_reply" (the peer is not a v1 fenceqd),
// "misuse" (a Client used by two threads at once).
class Error : public std::runtime_error {
 public:
  Error(std::string code, const std::string& message)
      : std::runtime_error(code + ": " + message), code_(std::move(code)) {}
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

// A job as the daemon stores it (contract C3.2).
struct JobState {
  std::string id;
  std::optional<std::string> owner;   // empty when no lease was taken or it was released
  double until = 0;                   // lease end, seconds (C2.1)
  std::int64_t fence = 0;             // grows by one with every claim, never goes back
  std::optional<std::string> result;  // set by the one successful complete
  bool done = false;
};

struct ServerInfo {
  int protocol = 0;
  std::string version;
  std::string clock;  // "server" or "client"
};

struct ClientOptions {
  // How long one call waits for its reply before throwing Error("timeout").
  std::chrono::milliseconds timeout{5000};
};

// FENCEQ_ENDPOINT when set, else "ipc://var/fenceqd.sock" (where `make run`
// serves, relative to the working directory). Every fenceq client uses this.
std::string default_endpoint();

// One connection to a fenceqd. Not thread-safe: use one Client per thread (a
// call made while another thread's call is in progress throws
// Error("misuse")). Connecting is lazy and asynchronous: the constructor does
// not fail when no daemon is there yet; calls then time out.
//
// `now` (every time-taking call): only for a daemon in client clock mode
// (--clock client, C2.2), where it is required; a server-clock daemon refuses
// it with invalid_argument (C2.3).
//
// A call that timed out never lets its late reply be taken for a later call's
// reply: replies are matched by request id.
class Client {
 public:
  explicit Client(std::string endpoint = default_endpoint(), ClientOptions options = {});
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  ServerInfo ping();

  // C3.1: true when the job was created; false when the id existed (nothing changed).
  bool enqueue(std::string_view id);

  // C3.2: the committed row; nullopt when the id does not exist.
  std::optional<JobState> state(std::string_view id);

  // C3.3: the new fence, or nullopt when the job is missing, done or leased.
  // ttl <= 0 throws Error("invalid_argument").
  std::optional<std::int64_t> claim(std::string_view id, std::string_view owner, double ttl,
                                    std::optional<double> now = std::nullopt);

  // C3.4: true when this lease was current and now ends at now + ttl; false
  // otherwise (an expired lease is never revived). ttl <= 0 throws.
  bool renew(std::string_view id, std::string_view owner, std::int64_t fence, double ttl,
             std::optional<double> now = std::nullopt);

  // C3.5: true when this lease was current and `result` is stored; false
  // otherwise, and the stored result is kept. nullopt result stores NULL.
  bool complete(std::string_view id, std::string_view owner, std::int64_t fence,
                std::optional<std::string_view> result,
                std::optional<double> now = std::nullopt);

  // C3.6: true when owner and fence matched a job not done: the lease is
  // dropped and the fence kept.
  bool release(std::string_view id, std::string_view owner, std::int64_t fence);

  const std::string& endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fenceq
