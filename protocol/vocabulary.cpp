// The protocol's vocabulary, shared by both sides of the codec: op names (the
// op table itself is ops.hpp), job state names, error codes, clock mode
// names, and the strict UTF-8 every str must be.
//
// The codec's files, one concept each: this one; daemon_side.cpp
// (decode_request, which validates untrusted bytes); op_fields.cpp (each op's
// fields, read and written); replies.cpp (encode_ok /
// encode_error); client_side.cpp (encode_request, reply_rid, decode_reply).
// They share one header, fenceq_protocol/codec.hpp, in sections of the same
// names: a reader of either side needs the vocabulary beside it, and the whole
// v1 contract in C++ stays one page.
#include "fenceq_protocol/codec.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

namespace fenceq::protocol {
namespace {

// Each enum's wire names, in one table per enum: the only place they are
// spelled (the ops' are in kOps, ops.hpp).
template <typename T, std::size_t N>
using Names = std::array<std::pair<T, std::string_view>, N>;

constexpr Names<JobStatus, 8> kStatuses{{
    {JobStatus::ready, "ready"},
    {JobStatus::delayed, "delayed"},
    {JobStatus::leased, "leased"},
    {JobStatus::done, "done"},
    {JobStatus::dead, "dead"},
    {JobStatus::cancelled, "cancelled"},
    {JobStatus::blocked, "blocked"},
    {JobStatus::suspended, "suspended"},
}};

constexpr Names<ListOrder, 3> kOrders{{
    {ListOrder::id, "id"},
    {ListOrder::created, "created"},
    {ListOrder::created_desc, "-created"},
}};

constexpr Names<ErrorCode, 7> kCodes{{
    {ErrorCode::bad_request, "bad_request"},
    {ErrorCode::unknown_op, "unknown_op"},
    {ErrorCode::invalid_argument, "invalid_argument"},
    {ErrorCode::unsupported_version, "unsupported_version"},
    {ErrorCode::unavailable, "unavailable"},
    {ErrorCode::internal, "internal"},
    {ErrorCode::outcome_unknown, "outcome_unknown"},
}};

template <typename T, std::size_t N>
std::string_view name_in(const Names<T, N>& names, T value, std::string_view otherwise) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return otherwise;
}

template <typename T, std::size_t N>
std::optional<T> value_in(const Names<T, N>& names, std::string_view name) {
  for (const auto& [v, n] : names) {
    if (n == name) return v;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Op> op_from_name(std::string_view name) {
  for (const auto& row : kOps) {
    if (row.name == name) return row.op;
  }
  return std::nullopt;
}

// No overlongs, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    // Eight bytes of ASCII at a time (results and payloads are mostly
    // ASCII: byte by byte was 4% of a complete_many of 1,000 results).
    while (end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      if (w & 0x8080808080808080ULL) break;
      p += 8;
    }
    if (p == end) break;
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (static_cast<std::size_t>(end - p) <= n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (std::size_t i = 2; i <= n; ++i) {
      if (p[i] < 0x80 || p[i] > 0xBF) return false;
    }
    p += n + 1;
  }
  return true;
}

std::string_view status_name(JobStatus st) { return name_in(kStatuses, st, "?"); }

std::optional<JobStatus> status_from_name(std::string_view name) {
  return value_in(kStatuses, name);
}

std::string_view order_name(ListOrder order) { return name_in(kOrders, order, "id"); }

std::optional<ListOrder> order_from_name(std::string_view name) { return value_in(kOrders, name); }

std::string_view code_name(ErrorCode code) { return name_in(kCodes, code, "internal"); }

std::optional<ErrorCode> code_from_name(std::string_view name) { return value_in(kCodes, name); }

std::string_view clock_name(ClockMode mode) {
  return mode == ClockMode::server ? "server" : "client";
}

}  // namespace fenceq::protocol
