#include "executor.hpp"

#include <spdlog/spdlog.h>

#include <cmath>
#include <variant>

namespace fenceq::daemon {

using protocol::ErrorCode;
using protocol::Op;

Executor::Outcome Executor::apply(const protocol::Request& r) {
  double now = 0;
  if (protocol::op_needs_time(r.op)) {
    now = r.now ? *r.now : clock_.now();
    // The codec checked ttl > 0 and finite; the sum can still overflow, and
    // an infinite lease would never end.
    if ((r.op == Op::claim || r.op == Op::renew) && !std::isfinite(now + r.ttl)) {
      return protocol::Error{ErrorCode::invalid_argument,
                             "field 'ttl' is too large: now + ttl overflows"};
    }
  }
  switch (r.op) {
    case Op::ping:
      return protocol::Result{protocol::PingInfo{protocol::kProtocolVersion,
                                                 std::string(protocol::kVersion),
                                                 std::string(protocol::clock_name(clock_.mode()))}};
    case Op::enqueue: return protocol::Result{store_.enqueue(r.id)};
    case Op::state: {
      auto row = store_.state(r.id);
      if (!row) return protocol::Result{};
      return protocol::Result{*std::move(row)};
    }
    case Op::claim: {
      auto fence = store_.claim(r.id, r.owner, now, r.ttl);
      if (!fence) return protocol::Result{};
      return protocol::Result{*fence};
    }
    case Op::renew: return protocol::Result{store_.renew(r.id, r.owner, r.fence, now, r.ttl)};
    case Op::complete:
      return protocol::Result{store_.complete(r.id, r.owner, r.fence, r.result, now)};
    case Op::release: return protocol::Result{store_.release(r.id, r.owner, r.fence)};
  }
  return protocol::Error{ErrorCode::internal, "unhandled op"};
}

std::vector<std::string> Executor::run(const std::vector<protocol::Decoded>& batch) {
  std::vector<std::string> replies(batch.size());
  stats_.requests += batch.size();

  bool touches_store = false;
  for (const auto& d : batch) {
    if (d.request && d.request->op != Op::ping) touches_store = true;
  }
  // Requests refused by decoding are answered first: they do not depend on the
  // transaction's fate.
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].request) replies[i] = protocol::encode_error(batch[i].error, batch[i].rid);
  }
  const double high_water_before = clock_.high_water();
  try {
    if (touches_store) store_.begin();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto& d = batch[i];
      if (!d.request) continue;
      auto outcome = apply(*d.request);
      if (const auto* err = std::get_if<protocol::Error>(&outcome)) {
        replies[i] = protocol::encode_error(*err, d.rid);
      } else {
        replies[i] = protocol::encode_ok(std::get<protocol::Result>(outcome), d.rid);
      }
    }
    if (touches_store) {
      // C2.3: the server clock's high-water mark commits with the batch that
      // used it, so no acknowledged lease was computed from a time the
      // restarted daemon could go back behind.
      if (clock_.mode() == protocol::ClockMode::server &&
          clock_.high_water() > high_water_before) {
        store_.set_clock_high_water(clock_.high_water());
      }
      store_.commit();
      ++stats_.commits;
    }
  } catch (const std::exception& e) {
    store_.rollback();
    ++stats_.failed_commits;
    spdlog::error("batch of {} requests failed and was rolled back: {}", batch.size(), e.what());
    const protocol::Error internal{ErrorCode::internal,
                                   std::string("store failed, nothing applied: ") + e.what()};
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].request) replies[i] = protocol::encode_error(internal, batch[i].rid);
    }
  }
  return replies;
}

}  // namespace fenceq::daemon
