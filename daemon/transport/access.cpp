#include "transport/access.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace fenceq::daemon {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kZapDomain = "fenceq";
// An unauthenticated peer that connects and never finishes the handshake is
// dropped after this long.
constexpr int kHandshakeMs = 5000;
// A TCP peer that stops answering heartbeats (host gone, half-open
// connection) is dropped, and with it the replies queued for it.
constexpr int kHeartbeatIvlMs = 10000;
constexpr int kHeartbeatTimeoutMs = 30000;
// Refused handshakes are logged at warning level this many times, then at
// debug: a stranger knocking must not fill the log.
constexpr std::uint64_t kLoggedRefusals = 10;
constexpr std::size_t kZ85KeyChars = 40;

[[noreturn]] void refuse(const std::string& why) { throw std::runtime_error(why); }

std::string z85_decode(const std::string& text) {
  std::string raw(32, '\0');
  if (text.size() != kZ85KeyChars ||
      !zmq_z85_decode(reinterpret_cast<std::uint8_t*>(raw.data()), text.c_str())) {
    return {};
  }
  return raw;
}

std::string z85_encode(const std::string& raw) {
  char text[kZ85KeyChars + 1];
  zmq_z85_encode(text, reinterpret_cast<const std::uint8_t*>(raw.data()), raw.size());
  return text;
}

// The Z85 keys in a key file: `name = "KEY"` lines (zcert) for the wanted
// name, or bare keys. A line starting with `#` is a comment. Throws naming
// file and line.
std::vector<std::string> read_keys(const std::string& path, const char* name) {
  std::ifstream in(path);
  if (!in) refuse("cannot read key file " + path + ": " + std::strerror(errno));
  std::vector<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    // Only whole lines are comments: '#' is also a Z85 digit.
    if (auto first = line.find_first_not_of(" \t");
        first != std::string::npos && line[first] == '#') {
      continue;
    }
    std::istringstream words(line);
    std::string first, eq, quoted;
    if (!(words >> first)) continue;
    words >> eq >> quoted;
    std::string key = first;
    if (eq == "=") {  // a zcert property: only `name = "KEY"` matters
      if (first != name) continue;
      if (quoted.size() != kZ85KeyChars + 2 || quoted.front() != '"' || quoted.back() != '"') {
        refuse(path + ":" + std::to_string(n) + ": expected " + name + " = \"<40 Z85 chars>\"");
      }
      key = quoted.substr(1, kZ85KeyChars);
    } else if (first == "metadata" || first == "curve") {
      continue;  // zcert section names
    }
    std::string raw = z85_decode(key);
    if (raw.empty()) refuse(path + ":" + std::to_string(n) + ": not a 40-character Z85 key");
    keys.push_back(raw);
  }
  return keys;
}

std::string frame_string(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}

}  // namespace

bool is_local_endpoint(const std::string& endpoint) { return endpoint.rfind("ipc://", 0) == 0; }

bool Access::check_endpoints(const Options& options) {
  bool curve = false;
  for (const auto* endpoints : {&options.listen, &options.events}) {
    for (const auto& e : *endpoints) {
      if (is_local_endpoint(e)) continue;
      if (e.rfind("tcp://", 0) != 0) {
        refuse("cannot listen on " + e + ": only ipc:// and tcp:// endpoints are served");
      }
      if (!options.allow_tcp) {
        refuse("cannot listen on " + e +
               ": tcp endpoints are refused unless --allow-tcp is given (with "
               "--curve-secret-key and --curve-allowed-clients)");
      }
      curve = true;
    }
  }
  if (curve && (options.curve_secret_key.empty() || options.curve_allowed_clients.empty())) {
    refuse(
        "--allow-tcp needs --curve-secret-key FILE and --curve-allowed-clients FILE: "
        "a tcp endpoint is served only with CURVE authentication");
  }
  return curve;
}

Access::Access(zmq::context_t& ctx, const Options& options) {
  curve_ = check_endpoints(options);
  if (!curve_) return;
  struct stat st {};
  if (::stat(options.curve_secret_key.c_str(), &st) != 0) {
    refuse("cannot read key file " + options.curve_secret_key + ": " + std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    refuse("secret key file " + options.curve_secret_key +
           " is accessible by group or others; chmod 600 it");
  }
  auto secrets = read_keys(options.curve_secret_key, "secret-key");
  if (secrets.size() != 1) {
    refuse("secret key file " + options.curve_secret_key + " must hold exactly one secret key");
  }
  secret_ = secrets.front();
  for (auto& k : read_keys(options.curve_allowed_clients, "public-key")) allowed_.insert(k);
  if (allowed_.empty()) {
    refuse("no client key in " + options.curve_allowed_clients + ": no client could connect");
  }
  // Bound here, before any CURVE socket binds, so no handshake finds no handler.
  zmq::socket_t handler(ctx, zmq::socket_type::rep);
  handler.set(zmq::sockopt::linger, 0);
  handler.bind(kZapEndpoint);
  zap_ = std::thread([this, h = std::move(handler)]() mutable { serve_zap(std::move(h)); });
  char pub[kZ85KeyChars + 1];
  std::string secret_text = z85_encode(secret_);
  zmq_curve_public(pub, secret_text.c_str());
  spdlog::info("tcp endpoints use CURVE: server public key {}, {} allowed client keys", pub,
               allowed_.size());
}

Access::~Access() {
  stop_ = true;
  if (zap_.joinable()) zap_.join();
}

void Access::secure(zmq::socket_t& s, const std::string& endpoint) const {
  if (is_local_endpoint(endpoint) || !curve_) return;
  s.set(zmq::sockopt::curve_server, true);
  s.set(zmq::sockopt::curve_secretkey, zmq::buffer(secret_));
  s.set(zmq::sockopt::zap_domain, kZapDomain);
  s.set(zmq::sockopt::handshake_ivl, kHandshakeMs);
  s.set(zmq::sockopt::heartbeat_ivl, kHeartbeatIvlMs);
  s.set(zmq::sockopt::heartbeat_timeout, kHeartbeatTimeoutMs);
}

// RFC 27: request [version, request id, domain, address, identity, mechanism,
// credentials...]; reply [version, request id, status, text, user id, metadata].
void Access::serve_zap(zmq::socket_t handler) {
  while (!stop_.load()) {
    zmq_pollitem_t item{handler.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) <= 0) continue;
    std::vector<zmq::message_t> frames;
    try {
      do {
        zmq::message_t f;
        if (!handler.recv(f, zmq::recv_flags::none)) break;
        frames.push_back(std::move(f));
      } while (frames.back().more() && frames.size() < 16);
      if (frames.empty()) continue;
      while (frames.back().more()) {  // drain an oversized request
        zmq::message_t f;
        (void)handler.recv(f, zmq::recv_flags::none);
        if (!f.more()) break;
      }
      bool ok = frames.size() >= 7 && frame_string(frames[0]) == "1.0" &&
                frame_string(frames[2]) == kZapDomain && frame_string(frames[5]) == "CURVE" &&
                frames[6].size() == 32 && allowed_.count(frame_string(frames[6])) == 1;
      std::string address = frames.size() > 3 ? frame_string(frames[3]) : "?";
      if (!ok) {
        auto n = refused_.fetch_add(1) + 1;
        if (n <= kLoggedRefusals) {
          spdlog::warn("refused a tcp client from {}: its key is not in the allowed list{}",
                       address, n == kLoggedRefusals ? " (further refusals at debug level)" : "");
        } else {
          spdlog::debug("refused a tcp client from {}", address);
        }
      }
      std::string id = frames.size() > 1 ? frame_string(frames[1]) : "";
      std::string user = ok ? z85_encode(frame_string(frames[6])) : "";
      handler.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
      handler.send(zmq::buffer(id), zmq::send_flags::sndmore);
      handler.send(ok ? zmq::str_buffer("200") : zmq::str_buffer("400"), zmq::send_flags::sndmore);
      handler.send(ok ? zmq::str_buffer("OK") : zmq::str_buffer("client key not allowed"),
                   zmq::send_flags::sndmore);
      handler.send(zmq::buffer(user), zmq::send_flags::sndmore);
      handler.send(zmq::message_t(), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("ZAP handler: {}", e.what());
    }
  }
}

int write_curve_keypair(const std::string& path) {
  char pub[kZ85KeyChars + 1], sec[kZ85KeyChars + 1];
  if (zmq_curve_keypair(pub, sec) != 0) {
    std::cerr << "fenceqd: this libzmq has no CURVE support\n";
    return 1;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::cerr << "fenceqd: cannot create " << path << ": " << std::strerror(errno)
              << " (an existing key file is never overwritten)\n";
    return 1;
  }
  std::string text = std::string("# fenceq CURVE key pair: keep this file secret\ncurve\n") +
                     "    public-key = \"" + pub + "\"\n    secret-key = \"" + sec + "\"\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    std::cerr << "fenceqd: cannot write " << path << "\n";
    return 1;
  }
  std::cout << "public-key = \"" << pub << "\"\n";
  return 0;
}

}  // namespace fenceq::daemon
