// The protocol's vocabulary, shared by both sides of the codec: the op table
// (names, how each op uses `now`, which ops write), job state names, error
// codes, clock mode names, and the strict UTF-8 every str must be.
//
// The codec is three files, one concept each: this one; daemon_side.cpp
// (decode_request, which validates untrusted bytes, and encode_ok /
// encode_error); client_side.cpp (encode_request, reply_rid, decode_reply).
// They share one header, fenceq_protocol/codec.hpp, in sections of the same
// names: a reader of either side needs the vocabulary beside it, and the whole
// v1 contract in C++ stays one page.
#include "fenceq_protocol/codec.hpp"

#include <array>
#include <utility>

namespace fenceq::protocol {
namespace {

// Each enum's wire names, in one table per enum: the only place they are spelled.
template <typename T, std::size_t N>
using Names = std::array<std::pair<T, std::string_view>, N>;

constexpr Names<Op, 26> kOps{{
    {Op::ping, "ping"},
    {Op::enqueue, "enqueue"},
    {Op::state, "state"},
    {Op::claim, "claim"},
    {Op::renew, "renew"},
    {Op::complete, "complete"},
    {Op::release, "release"},
    {Op::claim_next, "claim_next"},
    {Op::fail, "fail"},
    {Op::check, "check"},
    {Op::retry, "retry"},
    {Op::stats, "stats"},
    {Op::list, "list"},
    {Op::purge, "purge"},
    {Op::metrics, "metrics"},
    {Op::complete_next, "complete_next"},
    {Op::enqueue_many, "enqueue_many"},
    {Op::complete_many, "complete_many"},
    {Op::renew_many, "renew_many"},
    {Op::cancel, "cancel"},
    {Op::job, "job"},
    {Op::queue_config, "queue_config"},
    {Op::await_job, "await"},
    {Op::schedule_set, "schedule_set"},
    {Op::schedule_delete, "schedule_delete"},
    {Op::schedule_list, "schedule_list"},
}};

constexpr Names<JobStatus, 6> kStatuses{{
    {JobStatus::ready, "ready"},
    {JobStatus::delayed, "delayed"},
    {JobStatus::leased, "leased"},
    {JobStatus::done, "done"},
    {JobStatus::dead, "dead"},
    {JobStatus::cancelled, "cancelled"},
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

std::string_view op_name(Op op) { return name_in(kOps, op, "?"); }

std::optional<Op> op_from_name(std::string_view name) { return value_in(kOps, name); }

TimeUse op_time_use(Op op) {
  switch (op) {
    case Op::claim:
    case Op::renew:
    case Op::complete:
    case Op::claim_next:
    case Op::fail:
    case Op::check:
    case Op::complete_next:
    case Op::complete_many:
    case Op::renew_many: return TimeUse::required;
    case Op::enqueue_many:
    case Op::enqueue:
    case Op::purge:
    case Op::list:
    case Op::job:
    case Op::stats:
    case Op::cancel:
    case Op::await_job:
    case Op::schedule_set:
    case Op::schedule_list:
    case Op::metrics: return TimeUse::optional;
    case Op::queue_config:
    case Op::schedule_delete:
    case Op::ping:
    case Op::state:
    case Op::release:
    case Op::retry: return TimeUse::none;
  }
  return TimeUse::none;
}

bool op_writes(Op op) {
  switch (op) {
    case Op::enqueue:
    case Op::claim:
    case Op::renew:
    case Op::complete:
    case Op::release:
    case Op::claim_next:
    case Op::fail:
    case Op::retry:
    case Op::purge:
    case Op::complete_next:
    case Op::enqueue_many:
    case Op::complete_many:
    case Op::renew_many:
    case Op::cancel:
    case Op::queue_config:
    case Op::schedule_set:
    case Op::schedule_delete: return true;
    default: return false;
  }
}

// No overlongs, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
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
