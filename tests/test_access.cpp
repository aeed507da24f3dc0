// Access (daemon/transport/access.hpp): IPC by default; tcp:// only with --allow-tcp,
// and then CURVE with a server key and a list of allowed client keys. A TCP
// client that is not on the list gets nothing, and nothing it sends is applied.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fenceq/client.hpp>
#include <fstream>
#include <functional>
#include <string>
#include <zmq.hpp>

#include "daemon.hpp"
#include "probe.hpp"

using fenceq::test::Daemon;
using fenceq::test::TempDir;
using fenceq::test::free_port;
using namespace std::chrono_literals;

namespace {

struct KeyPair {
  std::string pub, sec;  // Z85, 40 characters each
};

KeyPair make_keys() {
  char pub[41], sec[41];
  REQUIRE(zmq_curve_keypair(pub, sec) == 0);
  return {pub, sec};
}

void write_file(const std::string& path, const std::string& text, mode_t mode = 0600) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

std::string pack_ping_or(const std::string& op, const std::string& id = "") {
  // {"op": op, "id": id} in msgpack, by hand: two fixstr keys.
  std::string m;
  m += static_cast<char>(id.empty() ? 0x81 : 0x82);
  m += "\xa2op";
  m += static_cast<char>(0xa0 | op.size());
  m += op;
  if (!id.empty()) {
    m += "\xa2id";
    m += static_cast<char>(0xa0 | id.size());
    m += id;
  }
  return m;
}

// One request on a fresh DEALER (with CURVE when `client` is given); the
// reply payload, or "" when none came within `wait`.
std::string ask(const std::string& endpoint, const std::string& payload,
                const KeyPair* client = nullptr, const std::string& server_pub = "",
                std::chrono::milliseconds wait = 3000ms) {
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  if (client) {
    s.set(zmq::sockopt::curve_serverkey, server_pub);
    s.set(zmq::sockopt::curve_publickey, client->pub);
    s.set(zmq::sockopt::curve_secretkey, client->sec);
  }
  s.connect(endpoint);
  s.send(zmq::message_t(), zmq::send_flags::sndmore);
  s.send(zmq::buffer(payload), zmq::send_flags::dontwait);
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, wait) == 0) return "";
  zmq::message_t f;
  do {
    (void)s.recv(f);
  } while (f.more());
  return f.to_string();
}

struct Keys {
  explicit Keys(const TempDir& dir) : server(make_keys()), client(make_keys()) {
    secret_file = dir.file("server.key");
    clients_file = dir.file("clients.pub");
    write_file(secret_file, "# the daemon's key\ncurve\n    public-key = \"" + server.pub +
                                "\"\n    secret-key = \"" + server.sec + "\"\n");
    write_file(clients_file, "# allowed clients\n" + client.pub + "\n", 0644);
  }
  KeyPair server, client;
  std::string secret_file, clients_file;
};

}  // namespace

TEST_CASE("access: a tcp:// endpoint is refused unless --allow-tcp, with the reason") {
  TempDir dir;
  auto tcp = "tcp://127.0.0.1:" + std::to_string(free_port());
  auto r =
      fenceq::test::run({fenceq::test::fenceqd_path(), "--db", dir.file("a.db"), "--listen", tcp});
  CHECK(r.status == 1);
  CHECK(r.out.find("--allow-tcp") != std::string::npos);
  // Allowed, but without keys: still refused; CURVE is not optional.
  r = fenceq::test::run(
      {fenceq::test::fenceqd_path(), "--db", dir.file("a.db"), "--listen", tcp, "--allow-tcp"});
  CHECK(r.status == 1);
  CHECK(r.out.find("--curve-secret-key") != std::string::npos);
  // Other transports are never served.
  r = fenceq::test::run({fenceq::test::fenceqd_path(), "--db", dir.file("a.db"), "--listen",
                         "udp://127.0.0.1:5555", "--allow-tcp"});
  CHECK(r.status == 1);
  CHECK(r.out.find("only ipc:// and tcp://") != std::string::npos);
  // Refused before anything was created: no database, no lock file.
  CHECK_FALSE(std::filesystem::exists(dir.file("a.db")));
  CHECK_FALSE(std::filesystem::exists(dir.file("a.db.lock")));
}

TEST_CASE("access: an HTTP port already in use is refused at start with the reason") {
  // issue 30: "cannot listen for HTTP on 127.0.0.1:8080" said nothing of why.
  TempDir dir;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const auto listen = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  auto r = fenceq::test::run({fenceq::test::fenceqd_path(), "--db", dir.file("h.db"), "--listen",
                              "ipc://" + dir.file("h.sock"), "--http-listen", listen});
  ::close(fd);
  CHECK(r.status == 1);
  INFO(r.out);
  CHECK(r.out.find("cannot listen for HTTP on " + listen + ": ") != std::string::npos);
  CHECK(r.out.find("in use") != std::string::npos);
}

TEST_CASE("access: bad key files are refused at start, naming the file") {
  TempDir dir;
  Keys k(dir);
  auto tcp = "tcp://127.0.0.1:" + std::to_string(free_port());
  auto start = [&](const std::string& secret, const std::string& clients) {
    return fenceq::test::run({fenceq::test::fenceqd_path(), "--db", dir.file("a.db"), "--listen",
                              tcp, "--allow-tcp", "--curve-secret-key", secret,
                              "--curve-allowed-clients", clients});
  };
  ::chmod(k.secret_file.c_str(), 0644);  // a secret anyone may read is no secret
  auto r = start(k.secret_file, k.clients_file);
  CHECK(r.status == 1);
  CHECK(r.out.find("chmod 600") != std::string::npos);
  ::chmod(k.secret_file.c_str(), 0600);
  write_file(dir.file("bad.pub"), "# one bad line\n" + k.client.pub + "\nnot-a-key\n");
  r = start(k.secret_file, dir.file("bad.pub"));
  CHECK(r.status == 1);
  CHECK(r.out.find("bad.pub:3") != std::string::npos);
  write_file(dir.file("empty.pub"), "# nobody\n");
  r = start(k.secret_file, dir.file("empty.pub"));
  CHECK(r.status == 1);
  CHECK(r.out.find("no client could connect") != std::string::npos);
  r = start(dir.file("missing.key"), k.clients_file);
  CHECK(r.status == 1);
  CHECK(r.out.find("missing.key") != std::string::npos);
}

TEST_CASE("access: over tcp only listed CURVE clients are served, others get nothing") {
  TempDir dir;
  Keys k(dir);
  auto tcp = "tcp://127.0.0.1:" + std::to_string(free_port());
  Daemon d(dir, {"--clock", "client", "--listen", tcp, "--allow-tcp", "--curve-secret-key",
                 k.secret_file, "--curve-allowed-clients", k.clients_file});
  // The listed client: served, over an encrypted, authenticated connection.
  auto reply = ask(tcp, pack_ping_or("ping"), &k.client, k.server.pub);
  CHECK(reply.find("protocol") != std::string::npos);

  // No CURVE at all, a key not on the list, the wrong server key: no reply,
  // and their enqueues are not applied.
  CHECK(ask(tcp, pack_ping_or("enqueue", "plain"), nullptr, "", 1500ms).empty());
  KeyPair stranger = make_keys();
  CHECK(ask(tcp, pack_ping_or("enqueue", "stranger"), &stranger, k.server.pub, 1500ms).empty());
  KeyPair fake_server = make_keys();
  CHECK(ask(tcp, pack_ping_or("enqueue", "mitm"), &k.client, fake_server.pub, 1500ms).empty());

  // IPC is served as before, and none of the refused requests happened.
  fenceq::Client c(d.endpoint());
  CHECK(c.ping().protocol == 1);
  CHECK_FALSE(c.state("plain"));
  CHECK_FALSE(c.state("stranger"));
  CHECK_FALSE(c.state("mitm"));
  reply = ask(tcp, pack_ping_or("enqueue", "listed"), &k.client, k.server.pub);
  CHECK(reply.find("result") != std::string::npos);
  CHECK(c.state("listed"));
  CHECK(d.log().find("refused a tcp client") != std::string::npos);
  CHECK(d.stop(SIGTERM) == 0);
}

// The key pair a `fenceqd --curve-keygen` run wrote to `path`; its stdout
// (`public-key = "…"`) without the newline.
std::string keygen(const std::string& path) {
  auto r = fenceq::test::run({fenceq::test::fenceqd_path(), "--curve-keygen", path});
  REQUIRE(r.status == 0);
  return r.out.substr(0, r.out.find('\n'));
}

TEST_CASE("access: the C++ client and the fenceq tool speak CURVE over tcp with keygen's files") {
  TempDir dir;
  const auto server_line = keygen(dir.file("server.key"));
  const auto client_line = keygen(dir.file("client.key"));
  keygen(dir.file("stranger.key"));
  const auto server_bare = server_line.substr(server_line.find('"') + 1, 40);
  write_file(dir.file("clients.pub"), client_line + "\n", 0644);
  const auto tcp = "tcp://127.0.0.1:" + std::to_string(free_port());
  Daemon d(dir, {"--clock", "client", "--listen", tcp, "--allow-tcp", "--curve-secret-key",
                 dir.file("server.key"), "--curve-allowed-clients", dir.file("clients.pub")});
  fenceq::Client local(d.endpoint());

  // The listed client, its keys read from the files: the whole story over tcp.
  fenceq::ClientOptions listed;
  listed.curve = fenceq::curve_keys(dir.file("client.key"), server_line);
  CHECK(listed.curve->server_public == server_bare);
  fenceq::Client c(tcp, listed);
  REQUIRE(c.enqueue("over-tcp"));
  auto fence = c.claim("over-tcp", "w", 100, 1.0);
  REQUIRE(fence == 1);
  CHECK_FALSE(c.complete("over-tcp", "w", 2, "stale", 2.0));
  CHECK(c.complete("over-tcp", "w", 1, "done", 2.0));
  CHECK(local.state("over-tcp")->result == "done");

  // A key pair the daemon does not know: no reply (timeout), nothing applied.
  fenceq::ClientOptions stranger;
  stranger.timeout = 500ms;
  stranger.curve = fenceq::curve_keys(dir.file("stranger.key"), server_bare);
  fenceq::Client s(tcp, stranger);
  try {
    s.enqueue("from-stranger");
    FAIL("expected a timeout");
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "timeout");
  }
  CHECK_FALSE(local.state("from-stranger"));

  // Bad keys are refused before anything is sent.
  auto code_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const fenceq::Error& e) {
      return e.code();
    }
    return "none";
  };
  CHECK(code_of([&] { fenceq::curve_keys(dir.file("missing.key"), server_bare); }) ==
        "invalid_argument");
  write_file(dir.file("half.key"), client_line + "\n");  // no secret-key line
  CHECK(code_of([&] { fenceq::curve_keys(dir.file("half.key"), server_bare); }) ==
        "invalid_argument");
  CHECK(code_of([&] { fenceq::curve_keys(dir.file("client.key"), "short"); }) ==
        "invalid_argument");
  // A public key that is not the secret key's (a pair mixed up by hand).
  std::ifstream theirs(dir.file("stranger.key"));
  std::string their_text((std::istreambuf_iterator<char>(theirs)), {});
  std::ifstream mine(dir.file("client.key"));
  std::string mixed((std::istreambuf_iterator<char>(mine)), {});
  auto secret_at = mixed.find("secret-key");
  mixed = mixed.substr(0, secret_at) + their_text.substr(their_text.find("secret-key"));
  write_file(dir.file("mixed.key"), mixed);
  CHECK(code_of([&] { fenceq::curve_keys(dir.file("mixed.key"), server_bare); }) ==
        "invalid_argument");
  CHECK(code_of([&] { fenceq::Client x(d.endpoint(), listed); }) == "invalid_argument");  // ipc
  fenceq::ClientOptions bad = listed;
  bad.curve->secret_key[0] = '~';  // not a Z85 digit
  CHECK(code_of([&] { fenceq::Client x(tcp, bad); }) == "invalid_argument");

  // The tool: keys from options or from the environment; tcp without them is
  // refused at once rather than left to time out.
  const auto tool = fenceq::test::fenceq_tool_path();
  auto r = fenceq::test::run({tool, "-e", tcp, "--curve-key", dir.file("client.key"),
                              "--curve-server-key", server_bare, "enqueue", "by-tool"});
  CHECK(r.status == 0);
  r = fenceq::test::run({tool, "-e", tcp, "state", "by-tool"},
                        {"FENCEQ_CURVE_KEY=" + dir.file("client.key"),
                         "FENCEQ_CURVE_SERVER_KEY=" + server_bare});
  CHECK(r.status == 0);
  CHECK(r.out.find("by-tool") != std::string::npos);
  r = fenceq::test::run({tool, "-e", tcp, "enqueue", "no-keys"});
  CHECK(r.status == 2);
  CHECK(r.out.find("--curve-key") != std::string::npos);
  r = fenceq::test::run({tool, "-e", tcp, "-t", "0.5", "--curve-key", dir.file("stranger.key"),
                         "--curve-server-key", server_bare, "enqueue", "by-stranger"});
  CHECK(r.status == 2);
  CHECK(r.out.find("timeout") != std::string::npos);
  CHECK(local.state("by-tool"));
  CHECK_FALSE(local.state("no-keys"));
  CHECK_FALSE(local.state("by-stranger"));
}

TEST_CASE("access: --curve-keygen writes a 0600 key pair and never overwrites one") {
  TempDir dir;
  auto path = dir.file("new.key");
  auto r = fenceq::test::run({fenceq::test::fenceqd_path(), "--curve-keygen", path});
  REQUIRE(r.status == 0);
  CHECK(r.out.rfind("public-key = \"", 0) == 0);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("secret-key = \"") != std::string::npos);
  CHECK(text.find(r.out.substr(0, 54)) != std::string::npos);  // the printed public key
  r = fenceq::test::run({fenceq::test::fenceqd_path(), "--curve-keygen", path});
  CHECK(r.status == 1);
  std::ifstream again(path);
  std::string text2((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  CHECK(text2 == text);
}
