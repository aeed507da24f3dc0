#include "http/answers.hpp"

#include <algorithm>
#include <chrono>

namespace fenceq::daemon::http {
namespace {

// A payload preview: at most this much of it (its full size is said).
constexpr std::size_t kPreviewText = 16 * 1024;
constexpr std::size_t kPreviewBinary = 2 * 1024;

// A payload as the dashboard shows it: text or hex, cut, with its full size.
json preview(const json& p) {
  if (p.is_null()) return nullptr;
  if (p.is_binary()) {
    const auto& b = p.get_binary();
    const std::string bytes(b.begin(), b.end());
    const std::size_t n = std::min(bytes.size(), kPreviewBinary);
    return json{{"size", bytes.size()}, {"binary", true}, {"hex", hex(bytes.substr(0, n))},
                {"truncated", n < bytes.size()}};
  }
  const std::string text = p.get<std::string>();
  std::size_t n = std::min(text.size(), kPreviewText);
  while (n < text.size() && n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return json{{"size", text.size()}, {"binary", false}, {"text", text.substr(0, n)},
              {"truncated", n < text.size()}};
}

// The page of rows; `more` (and the next page's cursor) when it is full.
json page_of_jobs(json rows, const protocol::req::List& request) {
  const bool full = rows.size() == static_cast<std::size_t>(request.limit);
  json next = nullptr;
  if (full && !rows.empty()) {
    next = json{{"after", rows.back().value("id", "")}};
    if (request.order != ListOrder::id) {
      next["after_created"] = rows.back().value("created", 0.0);
    }
  }
  return json{{"jobs", std::move(rows)}, {"more", full}, {"next", std::move(next)}};
}

// Now on the steady clock, in seconds.
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int status_of(const std::string& code) {
  if (code == "bad_request" || code == "invalid_argument") return 400;
  if (code == "unavailable") return 503;
  return 500;
}

}  // namespace

void Answers::answer_text(Pending& p, std::string_view bytes) const {
  try {
    auto reply = protocol::decode_reply(bytes, p.request.op, *p.request.rid);
    if (reply && reply->ok) {
      p.status = 200;
      if (p.kind == Kind::metrics) {
        p.body = std::get<std::string>(reply->result) + auth_.metrics_text();
        p.type = kMetricsType;
      } else {
        p.body = "ok\n";
      }
    } else if (reply) {
      p.body = reply->error_code + ": " + reply->error_message + "\n";
    }
  } catch (const std::exception& e) {
    p.body = std::string("bad reply: ") + e.what() + "\n";
  }
}

void Answers::answer(Pending& p, std::string_view bytes) {
  if (!is_dashboard(p.kind)) return answer_text(p, bytes);
  json reply;
  try {
    reply = json::from_msgpack(bytes.begin(), bytes.end());
  } catch (const std::exception& e) {
    p.status = 500;
    p.body = text(json{{"ok", false}, {"error", {{"code", "internal"}, {"message", e.what()}}}});
    return;
  }
  reply.erase("rid");
  if (!reply.value("ok", false)) {
    p.status = status_of(reply["error"].value("code", ""));
    p.body = text(reply) + "\n";
    return;
  }
  auto& result = reply["result"];
  if (p.kind == Kind::overview) result = overview(std::move(result));
  if (p.request.op == protocol::Op::job && result.is_object()) {
    result["payload"] = preview(result["payload"]);
    // Its steps' values and the signal that woke it (C3.22, C3.23): previews too.
    if (auto s = result.find("steps"); s != result.end() && s->is_object()) {
      for (auto& v : *s) v = preview(v);
    }
    if (auto s = result.find("signal"); s != result.end()) *s = preview(*s);
  }
  if (p.kind == Kind::jobs) {
    result = page_of_jobs(std::move(result), p.request.as<protocol::req::List>());
  }
  p.status = 200;
  p.body = text(reply) + "\n";
}

void History::add(const Sample& s) {
  samples_.push_back(s);
  while (samples_.size() > kKept) samples_.pop_front();
}

json History::rates(double now) const {
  json points = json::array();
  for (std::size_t i = 1; i < samples_.size(); ++i) {
    const auto& a = samples_[i - 1];
    const auto& b = samples_[i];
    const double dt = b.t - a.t;
    if (dt <= 0) continue;
    points.push_back({{"ago", std::max(0.0, now - b.t)},
                      {"claimed", (b.claimed - a.claimed) / dt},
                      {"completed", (b.completed - a.completed) / dt},
                      {"failed", (b.failed - a.failed) / dt},
                      {"commits", (b.commits - a.commits) / dt}});
  }
  return points;
}

void Answers::sample() {
  const double now = steady_seconds();
  if (!history_.due(now)) return;
  // The counters only go up while the daemon runs (they are its own, from
  // its start): no rate comes out negative.
  const auto load = [](const std::atomic<std::uint64_t>& n) {
    return static_cast<double>(n.load(std::memory_order_relaxed));
  };
  history_.add({now, load(throughput_.claimed), load(throughput_.completed),
                load(throughput_.failed), load(throughput_.commits)});
}

json Answers::overview(json stats) {
  stats["history"] = history_.rates(steady_seconds());
  stats["store"] = store_;
  stats["clock"] = clock_;
  stats["version"] = std::string(protocol::kVersion);
  stats["wall_clock"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return stats;
}

}  // namespace fenceq::daemon::http
