// How the codec writes the values that both of its sides write: the daemon's
// side in replies (daemon_side.cpp), the client's side in requests
// (client_side.cpp). Private to the codec; one definition so that both sides
// put the same bytes on the wire for the same value.
#pragma once

#include <msgpack.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <string>
#include <type_traits>
#include <variant>

#include "fenceq_protocol/codec.hpp"

namespace fenceq::protocol::pack {

// Always a msgpack float64: msgpack-c's pack_double() writes whole numbers
// as ints, and the protocol types `until` as float (and clients may rely on it).
inline void float64(msgpack::sbuffer& buf, double d) {
  std::uint64_t bits;
  static_assert(sizeof bits == sizeof d);
  std::memcpy(&bits, &d, sizeof d);
  char out[9];
  out[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  buf.write(out, sizeof out);
}

// nil, an int or a str, as the client sent it.
template <typename Packer>
void rid(Packer& pk, const Rid& r) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          pk.pack_nil();
        } else {
          pk.pack(v);
        }
      },
      r.value);
}

// A str, or nil when there is none.
template <typename Packer>
void opt_str(Packer& pk, const std::optional<std::string>& s) {
  if (s) {
    pk.pack(*s);
  } else {
    pk.pack_nil();
  }
}

// bin when the payload is binary, str when it is text, nil when there is none.
template <typename Packer>
void payload(Packer& pk, const std::optional<Payload>& p) {
  if (!p) {
    pk.pack_nil();
  } else if (p->binary) {
    pk.pack_bin(static_cast<std::uint32_t>(p->bytes.size()));
    pk.pack_bin_body(p->bytes.data(), static_cast<std::uint32_t>(p->bytes.size()));
  } else {
    pk.pack(p->bytes);
  }
}

// A job's headers (C3.18): a map of str to str.
// A job's steps (C3.22): a map of name to payload.
template <typename Packer>
void steps(Packer& pk, const Steps& s) {
  pk.pack_map(static_cast<std::uint32_t>(s.size()));
  for (const auto& [name, value] : s) {
    pk.pack(name);
    payload(pk, value);
  }
}

template <typename Packer>
void headers(Packer& pk, const Headers& h) {
  pk.pack_map(static_cast<std::uint32_t>(h.size()));
  for (const auto& [k, v] : h) {
    pk.pack(k);
    pk.pack(v);
  }
}

// The last line of defence for text read back from a store: every
// str of an encoded message `data` (one msgpack value, as written above) that
// is not UTF-8 has each byte that does not start a valid character replaced
// by '?', in place (the length stays, so the message stays well-formed).
// Requests are UTF-8 when they arrive (C4), and what the daemon stores is
// checked the same way, but a SQLite file holds whatever an operator's sqlite3
// shell wrote there, and one such value made every reply that carried it, and
// the rest of that reply (a batch claim's other jobs, `stats`), undecodable
// for every client. One pass over the message; bin is not looked at.
inline void scrub_text(char* data, std::size_t size) {
  auto* p = reinterpret_cast<unsigned char*>(data);
  std::size_t i = 0;
  const auto be = [&](std::size_t k) {
    std::uint64_t v = 0;
    for (std::size_t j = 0; j < k && i < size; ++j) v = (v << 8) | p[i++];
    return v;
  };
  const auto fix = [&](std::size_t len) {
    len = std::min(len, size - i);
    char* s = data + i;
    i += len;
    std::size_t ascii = 0;  // 8 bytes at a time while they are ASCII: most text is
    for (std::uint64_t w = 0; ascii + 8 <= len; ascii += 8) {
      std::memcpy(&w, s + ascii, 8);
      if (w & 0x8080808080808080ULL) break;
    }
    if (valid_utf8(std::string_view(s + ascii, len - ascii))) return;
    for (std::size_t k = 0; k < len;) {
      const auto c = static_cast<unsigned char>(s[k]);
      const std::size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
      if (n > 0 && k + n <= len && valid_utf8(std::string_view(s + k, n))) {
        k += n;
      } else {
        s[k++] = '?';
      }
    }
  };
  while (i < size) {
    const unsigned char t = p[i++];
    // fixints, fixmap and fixarray (their items follow), nil, bools: nothing more.
    if (t <= 0x9F || t >= 0xE0 || t == 0xC0 || t == 0xC2 || t == 0xC3) continue;
    if ((t & 0xE0) == 0xA0) {
      fix(t & 0x1Fu);
    } else if (t == 0xD9 || t == 0xDA || t == 0xDB) {
      fix(be(t == 0xD9 ? 1 : t == 0xDA ? 2 : 4));
    } else if (t == 0xC4 || t == 0xC5 || t == 0xC6) {
      i += std::min<std::uint64_t>(be(t == 0xC4 ? 1 : t == 0xC5 ? 2 : 4), size - i);
    } else if (t == 0xC7 || t == 0xC8 || t == 0xC9) {
      i += std::min<std::uint64_t>(be(t == 0xC7 ? 1 : t == 0xC8 ? 2 : 4) + 1, size - i);
    } else if (t == 0xCA || t == 0xCB) {
      i += std::min<std::size_t>(t == 0xCA ? 4 : 8, size - i);
    } else if ((t >= 0xCC && t <= 0xCF) || (t >= 0xD0 && t <= 0xD3)) {
      i += std::min<std::size_t>(std::size_t{1} << ((t - 0xCC) & 3), size - i);
    } else if (t >= 0xD4 && t <= 0xD8) {
      i += std::min<std::size_t>(1 + (std::size_t{1} << (t - 0xD4)), size - i);
    } else if (t == 0xDC || t == 0xDE) {
      i += std::min<std::size_t>(2, size - i);  // array16, map16: their items follow
    } else if (t == 0xDD || t == 0xDF) {
      i += std::min<std::size_t>(4, size - i);  // array32, map32
    }
  }
}

inline void scrub_text(msgpack::sbuffer& buf) { scrub_text(buf.data(), buf.size()); }

}  // namespace fenceq::protocol::pack
