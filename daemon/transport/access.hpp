// Who may talk to fenceqd (docs/operating.md, "Access").
//
// IPC endpoints are the default: the file system decides who may connect
// (the socket file's mode, --ipc-mode). A tcp:// endpoint is refused unless
// --allow-tcp is given, and then it is served only with ZeroMQ CURVE: the
// daemon's secret key (--curve-secret-key FILE) encrypts and authenticates
// the server, and only clients whose public key is listed in
// --curve-allowed-clients FILE complete the handshake. A client without the
// server's key, or with a key not in the list, gets no reply at all: its
// handshake fails before any request is read.
//
// The client check is a ZAP handler (ZeroMQ RFC 27) on
// inproc://zeromq.zap.01 in the daemon's context: libzmq asks it about every
// CURVE handshake on a socket with a ZAP domain. It runs on its own thread,
// answering from the key list loaded at start; it never touches the store.
//
// Key files use the zcert text format (`public-key = "Z85"`,
// `secret-key = "Z85"`, lines starting with `#` are comments) or bare
// 40-character Z85 keys, one per line. `fenceqd --curve-keygen FILE` writes a new key pair in that
// format.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "base/options.hpp"

namespace fenceq::daemon {

class Access {
 public:
  // Checks every --listen endpoint against the policy and loads the keys;
  // starts the ZAP handler when a tcp:// endpoint is served. Throws
  // std::runtime_error with a one-line reason (an endpoint refused, a key
  // file missing, unreadable by its mode, or malformed).
  Access(zmq::context_t& ctx, const Options& options);
  // The endpoint policy alone (no key is read): throws as the constructor
  // does; true when a tcp:// endpoint needs CURVE. main() checks it before
  // opening the store, so a refused configuration leaves no database behind.
  static bool check_endpoints(const Options& options);
  Access(const Access&) = delete;
  Access& operator=(const Access&) = delete;
  ~Access();  // stops the ZAP handler; its socket closes before the context

  // Gives `s` the security of `endpoint` before it binds: CURVE server with
  // the ZAP domain, and dead-peer detection, for tcp://; nothing for ipc://.
  void secure(zmq::socket_t& s, const std::string& endpoint) const;

  // Handshakes refused so far (clients not in the list).
  std::uint64_t refused() const { return refused_.load(); }

 private:
  void serve_zap(zmq::socket_t handler);

  bool curve_ = false;
  std::string secret_;             // 32 raw bytes
  std::set<std::string> allowed_;  // raw 32-byte client public keys
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> refused_{0};
  std::thread zap_;
};

// True for endpoints served without CURVE: ipc:// only.
bool is_local_endpoint(const std::string& endpoint);

// Writes a new CURVE key pair to `path` (mode 0600, zcert format) and prints
// the public key line to stdout; for --curve-keygen. Returns an exit status.
int write_curve_keypair(const std::string& path);

}  // namespace fenceq::daemon
