// How the codec writes the values that both of its sides write: the daemon's
// side in replies (daemon_side.cpp), the client's side in requests
// (client_side.cpp). Private to the codec; one definition so that both sides
// put the same bytes on the wire for the same value.
#pragma once

#include <msgpack.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
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

// A job's headers (issue 33): a map of str to str.
template <typename Packer>
void headers(Packer& pk, const Headers& h) {
  pk.pack_map(static_cast<std::uint32_t>(h.size()));
  for (const auto& [k, v] : h) {
    pk.pack(k);
    pk.pack(v);
  }
}

}  // namespace fenceq::protocol::pack
