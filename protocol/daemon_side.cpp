// The daemon's side of the codec: decode_request, the one way untrusted bytes
// become a Request (msgpack with limits, then every field checked against its
// op: present, typed, within bounds, UTF-8, by the op's reader in
// op_fields.cpp, into the op's struct, req::X).
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

#include "fenceq_protocol/op_spec.hpp"
#include "fields.hpp"

namespace fenceq::protocol {
namespace {

// Decoder limits. The unpacker allocates an array or map's slots when it reads
// the header, so these caps bound what a lying header can make it allocate
// (a map's entry is 32 bytes: at most 128 KiB, and a real one costs at least
// 2 bytes of the frame an entry). Strings are bounded by the frame itself
// (ZMQ_MAXMSGSIZE). msgpack-c caps every map alike: `headers` may hold as many
// entries as kMaxHeadersBytes of keys hold (a key of one byte, an empty value),
// so that is the cap; the request map itself has a handful of keys, and is
// refused above kMaxRequestKeys once unpacked (65 headers of 4 bytes
// once were "payload exceeds the decoder's size limits").
constexpr std::size_t kMaxMapEntries = kMaxHeadersBytes;
constexpr std::size_t kMaxRequestKeys = 64;
// Twice a batch's size: a batch a little too large is refused by its op with
// invalid_argument ("must hold 1 to 1000 entries"), a much larger array here.
constexpr std::size_t kMaxArrayItems = 2 * kMaxBatchItems;
constexpr std::size_t kMaxDepth = 8;
constexpr std::size_t kMaxRidBytes = 256;

using wire::Fields;
using wire::Refusal;
using wire::refuse;
using wire::type_name;

// The rid of a payload the decoder refused (too large for its limits, too
// deep, truncated after the rid, bytes after the map, ...), read without
// unpacking it: a walk over the top-level map's keys that skips every other
// value, keeping no stack (a count of the values still to skip) and allocating
// nothing, at most one step a byte. The rid as read_rid would take it (nil, an
// int, a str of at most kMaxRidBytes of UTF-8), else none. A client matches a
// reply to its request by rid alone: without it, the refusal reached no one
// and the client waited out its timeout.
class RidScan {
 public:
  explicit RidScan(std::string_view bytes)
      : p_(reinterpret_cast<const unsigned char*>(bytes.data())), n_(bytes.size()) {}

  std::optional<Rid> rid() {
    std::uint64_t entries = 0;
    if (!map_header(entries)) return std::nullopt;
    for (std::uint64_t e = 0; e < entries; ++e) {
      std::string_view key;
      const bool str_key = str(key);
      if (!str_key && !skip(1)) return std::nullopt;
      if (str_key && key == "rid") return value();
      if (!skip(1)) return std::nullopt;
    }
    return std::nullopt;
  }

 private:
  bool take(std::size_t k, const unsigned char*& at) {
    if (n_ - i_ < k) return false;
    at = p_ + i_;
    i_ += k;
    return true;
  }
  bool uint_be(std::size_t k, std::uint64_t& v) {
    const unsigned char* at = nullptr;
    if (!take(k, at)) return false;
    v = 0;
    for (std::size_t j = 0; j < k; ++j) v = (v << 8) | at[j];
    return true;
  }
  bool map_header(std::uint64_t& entries) {
    const unsigned char* at = nullptr;
    if (!take(1, at)) return false;
    if ((*at & 0xF0) == 0x80) {
      entries = *at & 0x0F;
      return true;
    }
    if (*at == 0xDE) return uint_be(2, entries);
    if (*at == 0xDF) return uint_be(4, entries);
    return false;
  }
  // A str at i_: read (true), or i_ left where it was (false).
  bool str(std::string_view& out) {
    if (i_ >= n_) return false;
    const unsigned char t = p_[i_];
    const std::size_t start = i_;
    std::uint64_t len = 0;
    ++i_;
    bool ok = true;
    if ((t & 0xE0) == 0xA0) {
      len = t & 0x1F;
    } else if (t == 0xD9 || t == 0xDA || t == 0xDB) {
      ok = uint_be(t == 0xD9 ? 1 : t == 0xDA ? 2 : 4, len);
    } else {
      ok = false;
    }
    const unsigned char* at = nullptr;
    if (!ok || !take(len, at)) {
      i_ = start;
      return false;
    }
    out = std::string_view(reinterpret_cast<const char*>(at), len);
    return true;
  }
  std::optional<Rid> value() {
    if (i_ >= n_) return std::nullopt;
    const unsigned char t = p_[i_];
    std::uint64_t u = 0;
    if (t == 0xC0) return Rid{std::monostate{}};
    if (t <= 0x7F) return Rid{std::uint64_t{t}};
    if (t >= 0xE0) return Rid{std::int64_t{static_cast<signed char>(t)}};
    if (t >= 0xCC && t <= 0xCF) {
      ++i_;
      if (!uint_be(std::size_t{1} << (t - 0xCC), u)) return std::nullopt;
      return Rid{u};
    }
    if (t >= 0xD0 && t <= 0xD3) {
      ++i_;
      const std::size_t k = std::size_t{1} << (t - 0xD0);
      if (!uint_be(k, u)) return std::nullopt;
      // Sign-extended from k bytes; msgpack-c reads a non-negative one as positive.
      const std::int64_t v = k == 8 ? static_cast<std::int64_t>(u)
                                    : static_cast<std::int64_t>(u << (64 - 8 * k)) >> (64 - 8 * k);
      if (v >= 0) return Rid{static_cast<std::uint64_t>(v)};
      return Rid{v};
    }
    std::string_view s;
    if (str(s) && s.size() <= kMaxRidBytes && valid_utf8(s)) return Rid{std::string(s)};
    return std::nullopt;
  }
  // Skips `count` values, whatever they hold; false when the bytes end first
  // or are not msgpack.
  bool skip(std::uint64_t count) {
    while (count > 0) {
      const unsigned char* at = nullptr;
      if (!take(1, at)) return false;
      --count;
      const unsigned char t = *at;
      std::uint64_t len = 0;
      if (t <= 0x7F || t >= 0xE0 || t == 0xC0 || t == 0xC2 || t == 0xC3) continue;
      if ((t & 0xF0) == 0x80) {
        count += 2 * std::uint64_t{t & 0x0Fu};
      } else if ((t & 0xF0) == 0x90) {
        count += t & 0x0Fu;
      } else if ((t & 0xE0) == 0xA0) {
        if (!take(t & 0x1Fu, at)) return false;
      } else if (t == 0xC4 || t == 0xC5 || t == 0xC6 || t == 0xD9 || t == 0xDA || t == 0xDB) {
        const std::size_t k = t == 0xC4 || t == 0xD9 ? 1 : t == 0xC5 || t == 0xDA ? 2 : 4;
        if (!uint_be(k, len) || !take(len, at)) return false;
      } else if (t == 0xC7 || t == 0xC8 || t == 0xC9) {
        if (!uint_be(t == 0xC7 ? 1 : t == 0xC8 ? 2 : 4, len) || !take(len + 1, at)) return false;
      } else if (t == 0xCA || t == 0xCB) {
        if (!take(t == 0xCA ? 4 : 8, at)) return false;
      } else if ((t >= 0xCC && t <= 0xCF) || (t >= 0xD0 && t <= 0xD3)) {
        if (!take(std::size_t{1} << ((t - 0xCC) & 3), at)) return false;
      } else if (t >= 0xD4 && t <= 0xD8) {
        if (!take(1 + (std::size_t{1} << (t - 0xD4)), at)) return false;
      } else if (t == 0xDC || t == 0xDD) {
        if (!uint_be(t == 0xDC ? 2 : 4, len)) return false;
        count += len;
      } else if (t == 0xDE || t == 0xDF) {
        if (!uint_be(t == 0xDE ? 2 : 4, len)) return false;
        count += 2 * len;
      } else {
        return false;  // 0xC1: never used
      }
      // Every value takes at least a byte: more left to skip than bytes is a lie.
      if (count > n_ - i_) return false;
    }
    return true;
  }

  const unsigned char* p_;
  std::size_t n_;
  std::size_t i_ = 0;
};

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


// A field the daemon does not know (PROTOCOL.md, "Payload"): refused, naming it and the
// daemon's version. Unknown keys used to be ignored, so a client newer than
// its daemon had `after` or `key` dropped without a word, and the job ran
// before its parent, or twice.
[[noreturn]] void refuse_unknown(std::string_view where, std::string_view name) {
  refuse(ErrorCode::invalid_argument,
         "field '" + excerpt(name, 64) + "' is not a field of " + std::string(where) + " in fenceqd " +
             std::string(kVersion) + " (protocol " + std::to_string(kProtocolVersion) +
             "): a field of a newer version, or a misspelt one; ping with describe: true "
             "answers the fields this daemon knows");
}

// Each entry of `value` (an array of entries, or one) has only `entries`'s
// fields. An entry that is not a map is left to the op's reader to refuse.
void check_entries(const NestedField& nested, const msgpack::object& value, std::string_view op) {
  const std::string where = std::string(op) + "'s " + std::string(nested.name) +
                            (nested.array ? " entries" : "");  // enqueue_many's jobs entries
  // The keys are read as they are (a key that is not a str, or one given
  // twice, is the op's reader's to refuse, as for the request itself).
  auto unknown = [&](const msgpack::object& entry) -> const msgpack::object* {
    if (entry.type != msgpack::type::MAP) return nullptr;
    for (std::uint32_t i = 0; i < entry.via.map.size; ++i) {
      const auto& key = entry.via.map.ptr[i].key;
      if (key.type == msgpack::type::STR && !nested.entries.contains(key.as<std::string_view>())) {
        return &key;
      }
    }
    return nullptr;
  };
  auto refuse_in = [&](const msgpack::object& key, const std::string& prefix) {
    try {
      refuse_unknown(where, key.as<std::string_view>());
    } catch (Refusal& r) {
      r.message = prefix + r.message;
      throw;
    }
  };
  if (!nested.array) {
    if (const auto* key = unknown(value)) refuse_in(*key, std::string(nested.name) + ": ");
  } else if (value.type == msgpack::type::ARRAY) {
    for (std::uint32_t i = 0; i < value.via.array.size; ++i) {
      if (const auto* key = unknown(value.via.array.ptr[i])) {
        refuse_in(*key, std::string(nested.name) + "[" + std::to_string(i) + "]: ");
      }
    }
  }
}

void check_fields(const Fields& f, Op op) {
  const auto& spec = op_spec(op);
  const FieldList envelope{kEnvelopeFields.data(), kEnvelopeFields.size()};
  for (std::uint32_t i = 0; i < f.size(); ++i) {
    const auto name = f.key(i);
    if (envelope.contains(name)) continue;
    if (!spec.fields.contains(name)) refuse_unknown(op_name(op), name);
    for (const auto& nested : spec.nested) {
      if (!nested.name.empty() && nested.name == name) check_entries(nested, f.value(i), op_name(op));
    }
  }
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
  check_fields(f, r.op);
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
    if (root.via.map.size > kMaxRequestKeys) {
      refuse(ErrorCode::bad_request, "payload is a map of more than " +
                                         std::to_string(kMaxRequestKeys) + " keys");
    }
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
  // Refused before its rid was read (or without one read): the rid the bytes
  // hold, if they hold one, so that the refusal reaches its request.
  if (!out.request && !out.rid) out.rid = RidScan(payload).rid();
  return out;
}

}  // namespace fenceq::protocol

