// A request's fields on the wire, as the codec reads them (Fields, for
// decode_request) and writes them (Body, for encode_request). Each op's own
// fields are op_fields.cpp's. Private to the codec.
#pragma once

#include <msgpack.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "fenceq_protocol/codec.hpp"
#include "pack.hpp"

namespace fenceq::protocol::wire {

// Validation failure inside decode_request; never escapes it.
struct Refusal {
  ErrorCode code;
  std::string message;
};

[[noreturn]] inline void refuse(ErrorCode code, std::string message) {
  throw Refusal{code, std::move(message)};
}

inline std::string_view type_name(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "bool";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "float";
    case msgpack::type::STR: return "str";
    case msgpack::type::BIN: return "bin";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "map";
    case msgpack::type::EXT: return "ext";
  }
  return "unknown";
}

// The request map with its keys checked: strings, no duplicates.
class Fields {
 public:
  explicit Fields(const msgpack::object& map) : map_(map.via.map) {
    for (std::uint32_t i = 0; i < map_.size; ++i) {
      const auto& key = map_.ptr[i].key;
      if (key.type != msgpack::type::STR) {
        refuse(ErrorCode::bad_request, "request map keys must be strings");
      }
      for (std::uint32_t j = 0; j < i; ++j) {
        if (map_.ptr[j].key.as<std::string_view>() == key.as<std::string_view>()) {
          refuse(ErrorCode::bad_request,
                 "duplicate key '" + std::string(key.as<std::string_view>()) + "'");
        }
      }
    }
  }

  // The map's keys and values, in the order sent.
  std::uint32_t size() const { return map_.size; }
  std::string_view key(std::uint32_t i) const { return map_.ptr[i].key.as<std::string_view>(); }
  const msgpack::object& value(std::uint32_t i) const { return map_.ptr[i].val; }

  const msgpack::object* find(std::string_view name) const {
    for (std::uint32_t i = 0; i < map_.size; ++i) {
      if (map_.ptr[i].key.as<std::string_view>() == name) return &map_.ptr[i].val;
    }
    return nullptr;
  }

  const msgpack::object& require(std::string_view name) const {
    const auto* v = find(name);
    if (!v) refuse(ErrorCode::bad_request, "missing field '" + std::string(name) + "'");
    return *v;
  }

  std::string str(std::string_view name, std::size_t max_bytes) const {
    const auto& v = require(name);
    return checked_str(name, v, max_bytes);
  }

  static std::string checked_str(std::string_view name, const msgpack::object& v,
                                 std::size_t max_bytes) {
    if (v.type != msgpack::type::STR) wrong_type(name, "str", v);
    if (v.via.str.size > max_bytes) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' is longer than " +
                                              std::to_string(max_bytes) + " bytes");
    }
    std::string s(v.via.str.ptr, v.via.str.size);
    if (!valid_utf8(s)) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' is not valid UTF-8");
    }
    return s;
  }

  // An int (msgpack integer family only; a float is bad_request even when whole).
  std::int64_t integer(std::string_view name) const {
    const auto& v = require(name);
    if (v.type == msgpack::type::NEGATIVE_INTEGER) return v.via.i64;
    if (v.type == msgpack::type::POSITIVE_INTEGER) {
      if (v.via.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' is out of range");
      }
      return static_cast<std::int64_t>(v.via.u64);
    }
    wrong_type(name, "int", v);
  }

  // A number: int or float, finite.
  double number(std::string_view name) const {
    const auto& v = require(name);
    double d;
    if (v.type == msgpack::type::POSITIVE_INTEGER) {
      d = static_cast<double>(v.via.u64);
    } else if (v.type == msgpack::type::NEGATIVE_INTEGER) {
      d = static_cast<double>(v.via.i64);
    } else if (v.type == msgpack::type::FLOAT32 || v.type == msgpack::type::FLOAT64) {
      d = v.via.f64;
    } else {
      wrong_type(name, "number", v);
    }
    if (!std::isfinite(d)) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must be finite");
    }
    return d;
  }

  bool has(std::string_view name) const { return find(name) != nullptr; }

  bool boolean(std::string_view name) const {
    const auto& v = require(name);
    if (v.type != msgpack::type::BOOLEAN) wrong_type(name, "bool", v);
    return v.via.boolean;
  }

  // The array `name` of 1..max maps (a batch's entries).
  const msgpack::object_array& entries(std::string_view name, std::size_t max) const {
    const auto& v = require(name);
    if (v.type != msgpack::type::ARRAY) wrong_type(name, "array", v);
    if (v.via.array.size == 0 || v.via.array.size > max) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must hold 1 to " +
                                              std::to_string(max) + " entries");
    }
    for (std::uint32_t i = 0; i < v.via.array.size; ++i) {
      if (v.via.array.ptr[i].type != msgpack::type::MAP) {
        refuse(ErrorCode::bad_request, std::string(name) + "[" + std::to_string(i) +
                                           "] must be a map, not " +
                                           std::string(type_name(v.via.array.ptr[i])));
      }
    }
    return v.via.array;
  }

  // The array `name` of 1..max strs of at most max_bytes each (results' ids).
  std::vector<std::string> strs(std::string_view name, std::size_t max,
                                std::size_t max_bytes) const {
    const auto& v = require(name);
    if (v.type != msgpack::type::ARRAY) wrong_type(name, "array", v);
    if (v.via.array.size == 0 || v.via.array.size > max) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must hold 1 to " +
                                              std::to_string(max) + " entries");
    }
    std::vector<std::string> out;
    out.reserve(v.via.array.size);
    for (std::uint32_t i = 0; i < v.via.array.size; ++i) {
      out.push_back(checked_str(std::string(name) + "[" + std::to_string(i) + "]",
                                v.via.array.ptr[i], max_bytes));
    }
    return out;
  }

  // An int within [lo, hi]; invalid_argument outside.
  std::int64_t integer_in(std::string_view name, std::int64_t lo, std::int64_t hi) const {
    auto v = integer(name);
    if (v < lo || v > hi) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must be in [" +
                                              std::to_string(lo) + ", " + std::to_string(hi) +
                                              "]");
    }
    return v;
  }

  // A str that names one of a vocabulary's values (`from`: its reader);
  // invalid_argument, saying which ones (`known`), for any other str.
  template <typename T>
  T named(std::string_view name, std::optional<T> (*from)(std::string_view),
          std::string_view known) const {
    const auto& v = require(name);
    if (v.type != msgpack::type::STR) wrong_type(name, "str", v);
    auto value = from(v.as<std::string_view>());
    if (!value) {
      refuse(ErrorCode::invalid_argument,
             "field '" + std::string(name) + "' must be " + std::string(known));
    }
    return *value;
  }

  // A finite number within [lo, hi]; invalid_argument outside.
  double number_in(std::string_view name, double lo, double hi) const {
    auto v = number(name);
    if (v < lo || v > hi) {
      refuse(ErrorCode::invalid_argument, "field '" + std::string(name) + "' must be in [" +
                                              fmt_number(lo) + ", " + fmt_number(hi) + "]");
    }
    return v;
  }

  static std::string fmt_number(double d) {
    auto s = std::to_string(d);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }

  [[noreturn]] static void wrong_type(std::string_view name, std::string_view want,
                                      const msgpack::object& got) {
    refuse(ErrorCode::bad_request, "field '" + std::string(name) + "' must be " +
                                       std::string(want) + ", not " + std::string(type_name(got)));
  }

 private:
  const msgpack::object_map& map_;
};

// A request map's fields after `op`, counted as they are written.
class Body {
 public:
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk{buf};
  std::uint32_t fields = 0;

  msgpack::packer<msgpack::sbuffer>& key(const char* k) {
    ++fields;
    pk.pack(k);
    return pk;
  }
  void str(const char* k, const std::string& v) { key(k).pack(v); }
  void i64(const char* k, std::int64_t v) { key(k).pack(v); }
  void f64(const char* k, double v) {
    key(k);
    pack::float64(buf, v);
  }
  void boolean(const char* k, bool v) { v ? key(k).pack_true() : key(k).pack_false(); }
  void payload(const std::optional<Payload>& p) {
    if (p) pack::payload(key("payload"), p);
  }
};


// Reads the fields of `r.op` from `f` into `r.body`, made that op's struct,
// in the order they are checked (the first refusal is the answer); throws
// Refusal.
void read_fields(const Fields& f, Request& r);
// Writes the fields of `r.op` (its struct, r.body) to `b`: all but `op`,
// `now` and `rid`.
void write_fields(const Request& r, Body& b);

}  // namespace fenceq::protocol::wire
