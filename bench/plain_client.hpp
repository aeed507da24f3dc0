// The plain client of fenceq-bench (`--target plain`): what an application
// that speaks the wire protocol itself does, with no fenceq library. One
// process, one ZeroMQ context shared by every worker thread (one I/O thread
// for all of them), one DEALER socket per worker, requests packed with
// msgpack-c directly (protocol/PROTOCOL.md). It exists because a daemon-side
// regression showed up for such clients and not for `fenceq-bench` (issue
// 26: glibc handing the heap back to the kernel after every claim made
// complete_next 3x slower here, while the library's clients, one context
// each, hid it).
#pragma once

#include <zmq.hpp>

#include <msgpack.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fenceq::bench {

// One worker's DEALER socket on a shared context; call() is one round trip.
class PlainSocket {
 public:
  PlainSocket(zmq::context_t& ctx, const std::string& endpoint)
      : s_(ctx, zmq::socket_type::dealer) {
    s_.set(zmq::sockopt::linger, 0);
    s_.set(zmq::sockopt::rcvtimeo, 30000);
    s_.connect(endpoint);
  }

  // A request map of `pairs` key/value writers, plus "rid"; returns the
  // reply's "result" (throws on an error reply or a timeout).
  template <typename Fill>
  msgpack::object call(std::size_t fields, Fill&& fill) {
    sbuf_.clear();
    msgpack::packer<msgpack::sbuffer> pk(sbuf_);
    pk.pack_map(static_cast<std::uint32_t>(fields + 1));
    fill(pk);
    pk.pack(std::string_view("rid"));
    pk.pack(++rid_);
    s_.send(zmq::buffer(sbuf_.data(), sbuf_.size()));
    zmq::message_t reply;
    if (!s_.recv(reply)) throw std::runtime_error("plain client: reply timed out");
    oh_ = msgpack::unpack(static_cast<const char*>(reply.data()), reply.size());
    const msgpack::object& m = oh_.get();
    std::optional<msgpack::object> result;
    bool ok = false;
    for (std::uint32_t i = 0; m.type == msgpack::type::MAP && i < m.via.map.size; ++i) {
      const auto& kv = m.via.map.ptr[i];
      const auto key = kv.key.as<std::string_view>();
      if (key == "ok") ok = kv.val.as<bool>();
      if (key == "result") result = kv.val;
    }
    if (!ok || !result) throw std::runtime_error("plain client: error reply");
    return *result;
  }

 private:
  zmq::socket_t s_;
  msgpack::sbuffer sbuf_;
  msgpack::object_handle oh_;
  std::uint64_t rid_ = 0;
};

struct PlainJob {
  std::string id;
  std::int64_t fence = 0;
};

// A claim_next reply's job (nil: none).
inline std::optional<PlainJob> plain_job(const msgpack::object& o) {
  if (o.type != msgpack::type::MAP) return std::nullopt;
  PlainJob j;
  for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
    const auto& kv = o.via.map.ptr[i];
    const auto key = kv.key.as<std::string_view>();
    if (key == "id") j.id = kv.val.as<std::string>();
    if (key == "fence") j.fence = kv.val.as<std::int64_t>();
  }
  return j;
}

inline std::optional<PlainJob> plain_claim_next(PlainSocket& s, const std::string& queue,
                                                const std::string& owner, double ttl) {
  return plain_job(s.call(4, [&](auto& pk) {
    pk.pack(std::string_view("op")), pk.pack(std::string_view("claim_next"));
    pk.pack(std::string_view("queue")), pk.pack(queue);
    pk.pack(std::string_view("owner")), pk.pack(owner);
    pk.pack(std::string_view("ttl")), pk.pack(ttl);
  }));
}

inline bool plain_complete(PlainSocket& s, const PlainJob& j, const std::string& owner,
                           const std::string& result) {
  return s
      .call(5,
            [&](auto& pk) {
              pk.pack(std::string_view("op")), pk.pack(std::string_view("complete"));
              pk.pack(std::string_view("id")), pk.pack(j.id);
              pk.pack(std::string_view("owner")), pk.pack(owner);
              pk.pack(std::string_view("fence")), pk.pack(j.fence);
              pk.pack(std::string_view("result")), pk.pack(result);
            })
      .as<bool>();
}

// complete_next: {completed, next}.
inline std::pair<bool, std::optional<PlainJob>> plain_complete_next(
    PlainSocket& s, const PlainJob& j, const std::string& owner, const std::string& result,
    const std::string& queue, double ttl) {
  auto o = s.call(7, [&](auto& pk) {
    pk.pack(std::string_view("op")), pk.pack(std::string_view("complete_next"));
    pk.pack(std::string_view("id")), pk.pack(j.id);
    pk.pack(std::string_view("owner")), pk.pack(owner);
    pk.pack(std::string_view("fence")), pk.pack(j.fence);
    pk.pack(std::string_view("result")), pk.pack(result);
    pk.pack(std::string_view("queue")), pk.pack(queue);
    pk.pack(std::string_view("ttl")), pk.pack(ttl);
  });
  bool completed = false;
  std::optional<PlainJob> next;
  for (std::uint32_t i = 0; o.type == msgpack::type::MAP && i < o.via.map.size; ++i) {
    const auto& kv = o.via.map.ptr[i];
    const auto key = kv.key.as<std::string_view>();
    if (key == "completed") completed = kv.val.as<bool>();
    if (key == "next") next = plain_job(kv.val);
  }
  return {completed, next};
}

}  // namespace fenceq::bench
