// The daemon's side of the codec: decode_request, the one way untrusted bytes
// become a Request (msgpack with limits, then every field checked against its
// op: present, typed, within bounds, UTF-8, by the op's reader in
// op_fields.cpp).
//
// The codec's files, one concept each: this one; op_fields.cpp (each op's
// fields, read and written); replies.cpp (encode_ok, encode_error: the
// daemon's replies); client_side.cpp (encode_request, reply_rid,
// decode_reply); vocabulary.cpp (op names, error codes, job states, UTF-8)
// that all use. They share one header, fenceq_protocol/codec.hpp, in sections
// of the same names.
#include "fenceq_protocol/codec.hpp"

#include <msgpack.hpp>

#include <cmath>
#include <limits>
#include <utility>

#include "fields.hpp"

namespace fenceq::protocol {
namespace {

// Decoder limits. A request map has a handful of keys; unknown keys may carry
// small values. The unpacker allocates an array or map's slots when it reads
// the header, so these caps bound what a lying header can make it allocate.
// Strings are bounded by the frame itself (ZMQ_MAXMSGSIZE).
constexpr std::size_t kMaxMapEntries = 64;
// Twice a batch's size: a batch a little too large is refused by its op with
// invalid_argument ("must hold 1 to 1000 entries"), a much larger array here.
constexpr std::size_t kMaxArrayItems = 2 * kMaxBatchItems;
constexpr std::size_t kMaxDepth = 8;
constexpr std::size_t kMaxRidBytes = 256;

using wire::Fields;
using wire::Refusal;
using wire::refuse;
using wire::type_name;

std::optional<Rid> read_rid(const Fields& f) {
  const auto* v = f.find("rid");
  if (!v) return std::nullopt;
  if (v->type == msgpack::type::NIL) return Rid{std::monostate{}};
  if (v->type == msgpack::type::POSITIVE_INTEGER) return Rid{v->via.u64};
  if (v->type == msgpack::type::NEGATIVE_INTEGER) return Rid{v->via.i64};
  if (v->type == msgpack::type::STR) return Rid{Fields::checked_str("rid", *v, kMaxRidBytes)};
  Fields::wrong_type("rid", "nil, int or str", *v);
}

// What a client sent, quoted in an error message: at most `max` of its bytes,
// cut on a character boundary; control characters, quotes, backslashes and
// bytes that are not UTF-8 written as \xNN. The message stays valid UTF-8 on
// one line, whatever was sent.
std::string excerpt(std::string_view s, std::size_t max) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size() && i < max) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len > 1 && i + len <= s.size() && i + len <= max && valid_utf8(s.substr(i, len))) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    ++i;
  }
  if (i < s.size()) out += "...";
  return out;
}


Request read_request(const Fields& f, ClockMode clock) {
  if (const auto* v = f.find("v")) {
    if (v->type != msgpack::type::POSITIVE_INTEGER && v->type != msgpack::type::NEGATIVE_INTEGER) {
      Fields::wrong_type("v", "int", *v);
    }
    if (v->type != msgpack::type::POSITIVE_INTEGER || v->via.u64 != kProtocolVersion) {
      refuse(ErrorCode::unsupported_version, "protocol version 'v' must be 1");
    }
  }
  const auto& op_field = f.require("op");
  if (op_field.type != msgpack::type::STR) Fields::wrong_type("op", "str", op_field);
  auto op_text = op_field.as<std::string_view>();
  auto op = op_from_name(op_text);
  if (!op) refuse(ErrorCode::unknown_op, "unknown op '" + excerpt(op_text, 64) + "'");

  Request r;
  r.op = *op;
  // C2.3: in server clock mode any request that carries `now` is refused; in
  // client clock mode the ops that decide on a lease must carry it (C2.2).
  const bool has_now = f.has("now");
  if (clock == ClockMode::server && has_now) {
    refuse(ErrorCode::invalid_argument,
           "field 'now' is not accepted: the daemon runs the server clock");
  }
  wire::read_fields(f, r);
  if (clock == ClockMode::client) {
    // Checked on every op (a NaN is refused even where the op ignores it).
    if (has_now) {
      r.now = f.number("now");
    } else if (op_time_use(r.op) == TimeUse::required) {
      refuse(ErrorCode::invalid_argument,
             "field 'now' is required: the daemon runs the client clock");
    }
  }
  return r;
}

}  // namespace

Decoded decode_request(std::string_view payload, ClockMode clock) {
  Decoded out;
  try {
    msgpack::object_handle handle;
    std::size_t offset = 0;
    try {
      msgpack::unpack_limit limit(kMaxArrayItems, kMaxMapEntries, payload.size(), payload.size(),
                                  payload.size(), kMaxDepth);
      handle = msgpack::unpack(payload.data(), payload.size(), offset, nullptr, nullptr, limit);
    } catch (const msgpack::insufficient_bytes&) {
      refuse(ErrorCode::bad_request, "payload is truncated msgpack");
    } catch (const msgpack::depth_size_overflow&) {
      refuse(ErrorCode::bad_request, "payload is nested too deeply");
    } catch (const msgpack::size_overflow&) {
      refuse(ErrorCode::bad_request, "payload exceeds the decoder's size limits");
    } catch (const msgpack::unpack_error&) {
      refuse(ErrorCode::bad_request, "payload is not msgpack");
    }
    if (offset != payload.size()) {
      refuse(ErrorCode::bad_request, "payload has bytes after the msgpack value");
    }
    const msgpack::object& root = handle.get();
    if (root.type != msgpack::type::MAP) {
      refuse(ErrorCode::bad_request, "payload must be a msgpack map, not " +
                                         std::string(type_name(root)));
    }
    Fields fields(root);
    out.rid = read_rid(fields);
    out.request = read_request(fields, clock);
    out.request->rid = out.rid;
  } catch (Refusal& r) {
    out.request.reset();
    out.error = Error{r.code, std::move(r.message)};
  } catch (const std::bad_alloc&) {
    out.request.reset();
    out.error = Error{ErrorCode::bad_request, "payload too large to decode"};
  } catch (const std::exception& e) {
    // Any other library surprise is still the client's bad input, not a crash.
    out.request.reset();
    out.error = Error{ErrorCode::bad_request, std::string("payload rejected: ") + e.what()};
  }
  return out;
}

}  // namespace fenceq::protocol

