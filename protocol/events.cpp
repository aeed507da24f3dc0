// The events stream's body frame (C3.19; PROTOCOL.md, "Events"): written
// by fenceqd's publisher, read by the C++ client's Subscriber.
#include <msgpack.hpp>

#include "fenceq_protocol/codec.hpp"
#include "pack.hpp"

namespace fenceq::protocol {

std::string encode_event(const Event& e) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(6 + (e.owner ? 1 : 0) + (e.group ? 1 : 0));
  pk.pack("seq");
  pk.pack(e.seq);
  pk.pack("t");
  pack::float64(buf, e.t);
  pk.pack("event");
  pk.pack(e.event);
  pk.pack("id");
  pk.pack(e.id);
  pk.pack("queue");
  pk.pack(e.queue);
  pk.pack("fence");
  pk.pack(e.fence);
  if (e.owner) {
    pk.pack("owner");
    pk.pack(*e.owner);
  }
  if (e.group) {
    pk.pack("group");
    pk.pack(*e.group);
  }
  pack::scrub_text(buf);  // an id or queue a store gave back that is not UTF-8
  return {buf.data(), buf.size()};
}

namespace {

[[noreturn]] void bad_event(const std::string& what) {
  throw ReplyFormatError("bad event: " + what);
}

}  // namespace

Event decode_event(std::string_view body) {
  msgpack::object_handle h;
  try {
    std::size_t offset = 0;
    msgpack::unpack_limit limit(64, 64, body.size(), body.size(), body.size(), 4);
    h = msgpack::unpack(body.data(), body.size(), offset, nullptr, nullptr, limit);
  } catch (const std::exception& e) {
    bad_event(std::string("not msgpack: ") + e.what());
  }
  const auto& m = h.get();
  if (m.type != msgpack::type::MAP) bad_event("not a map");
  Event e;
  bool seq = false, t = false, event = false, id = false, queue = false, fence = false;
  for (std::uint32_t i = 0; i < m.via.map.size; ++i) {
    const auto& kv = m.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) continue;
    const std::string_view k(kv.key.via.str.ptr, kv.key.via.str.size);
    const auto& v = kv.val;
    auto str = [&](const char* name) {
      if (v.type != msgpack::type::STR) bad_event(std::string(name) + " is not a str");
      return std::string(v.via.str.ptr, v.via.str.size);
    };
    if (k == "seq") {
      if (v.type != msgpack::type::POSITIVE_INTEGER) bad_event("seq is not a positive int");
      e.seq = v.via.u64;
      seq = true;
    } else if (k == "t") {
      if (v.type == msgpack::type::FLOAT64 || v.type == msgpack::type::FLOAT32) {
        e.t = v.via.f64;
      } else if (v.type == msgpack::type::POSITIVE_INTEGER) {
        e.t = static_cast<double>(v.via.u64);
      } else {
        bad_event("t is not a number");
      }
      t = true;
    } else if (k == "event") {
      e.event = str("event");
      event = true;
    } else if (k == "id") {
      e.id = str("id");
      id = true;
    } else if (k == "queue") {
      e.queue = str("queue");
      queue = true;
    } else if (k == "fence") {
      if (v.type == msgpack::type::POSITIVE_INTEGER && v.via.u64 <= INT64_MAX) {
        e.fence = static_cast<std::int64_t>(v.via.u64);
      } else if (v.type == msgpack::type::NEGATIVE_INTEGER) {
        e.fence = v.via.i64;
      } else {
        bad_event("fence is not an int");
      }
      fence = true;
    } else if (k == "owner") {
      e.owner = str("owner");
    } else if (k == "group") {
      e.group = str("group");
    }
  }
  if (!(seq && t && event && id && queue && fence)) {
    bad_event("missing one of seq, t, event, id, queue, fence");
  }
  return e;
}

}  // namespace fenceq::protocol
