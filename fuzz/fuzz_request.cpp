// libFuzzer target: untrusted request bytes through the daemon's whole
// request path in-process: decode_request (msgpack, validation), Executor
// (dispatch, group commit) and Store (SQLite, in memory).
//
// One input is a clock-mode byte and a sequence of payload frames, each
// prefixed by its length (2 bytes, little endian; the last one may run to the
// end). Frames are applied one batch each, or all in one batch (bit 1 of the
// first byte), to an emptied store. Beyond what the sanitizers catch, it aborts
// when:
//   - a reply is not a msgpack map {ok: bool, ...}, an error's code is not a
//     code of the protocol, or a request's rid does not come back;
//   - a decoded request, encoded again by the client's encoder and decoded,
//     does not encode to the same bytes (the codec's two halves disagree);
//   - the client's reply decoder cannot read a reply the daemon wrote;
//   - a job's fence goes down (C1.2) from one batch to the next.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <msgpack.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "execution/clock.hpp"
#include "execution/executor.hpp"
#include "fenceq_protocol/codec.hpp"
#include "storage/sqlite/sqlite_store.hpp"

namespace {

namespace proto = fenceq::protocol;
using fenceq::daemon::Clock;
using fenceq::daemon::Executor;
using fenceq::daemon::SqliteStore;
using fenceq::daemon::SyncMode;

[[noreturn]] void fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fenceq-fuzz: %s %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

const msgpack::object* get(const msgpack::object& map, std::string_view key) {
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& k = map.via.map.ptr[i].key;
    if (k.type == msgpack::type::STR && k.as<std::string_view>() == key) {
      return &map.via.map.ptr[i].val;
    }
  }
  return nullptr;
}

void check_reply(const proto::Decoded& d, const std::string& reply) {
  msgpack::object_handle h;
  try {
    h = msgpack::unpack(reply.data(), reply.size());
  } catch (const std::exception& e) {
    fail("reply is not msgpack:", e.what());
  }
  const auto& root = h.get();
  if (root.type != msgpack::type::MAP) fail("reply is not a map");
  const auto* ok = get(root, "ok");
  if (!ok || ok->type != msgpack::type::BOOLEAN) fail("reply has no bool 'ok'");
  if (!ok->via.boolean) {
    const auto* err = get(root, "error");
    if (!err || err->type != msgpack::type::MAP) fail("error reply has no 'error' map");
    const auto* code = get(*err, "code");
    if (!code || code->type != msgpack::type::STR ||
        !proto::code_from_name(code->as<std::string_view>())) {
      fail("error reply has an unknown code");
    }
  } else if (!get(root, "result")) {
    fail("ok reply has no 'result'");
  }
  if (d.rid.has_value() != (get(root, "rid") != nullptr)) fail("rid not echoed (or invented)");
  // The client's decoder must read what the daemon wrote.
  if (d.request && d.rid) {
    try {
      auto r = proto::decode_reply(reply, d.request->op, *d.rid);
      if (!r) fail("client decoder did not match the echoed rid");
    } catch (const proto::ReplyFormatError& e) {
      fail("client decoder refused a daemon reply:", e.what());
    }
  }
}

// decode -> encode -> decode -> encode: the two encodings must be equal.
void check_round_trip(const proto::Decoded& d, proto::ClockMode mode) {
  if (!d.request) return;
  const std::string once = proto::encode_request(*d.request);
  auto again = proto::decode_request(once, mode);
  if (!again.request) {
    fail("a valid request, re-encoded, was refused:", again.error.message);
  }
  if (proto::encode_request(*again.request) != once) fail("re-encoding changed the request");
}

// C1.2: no fence ever goes down.
void check_fences(SqliteStore& store, std::map<std::string, std::int64_t>& seen) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(store.raw(), "SELECT id, fence FROM jobs", -1, &s, nullptr) != SQLITE_OK) {
    fail("cannot read jobs");
  }
  while (sqlite3_step(s) == SQLITE_ROW) {
    std::string id(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                   static_cast<std::size_t>(sqlite3_column_bytes(s, 0)));
    std::int64_t fence = sqlite3_column_int64(s, 1);
    auto [it, fresh] = seen.emplace(id, fence);
    if (!fresh) {
      if (fence < it->second) fail("a fence went down for job", id);
      it->second = fence;
    }
  }
  sqlite3_finalize(s);
}

// One in-memory store for the process, emptied before each input: opening
// a Store (schema, prepared statements) costs more under ASan than most
// inputs do.
SqliteStore& fresh_store() {
  static SqliteStore* store = new SqliteStore(":memory:", SyncMode::off);
  std::vector<std::string> tables;
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(store->raw(),
                     "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                     "'sqlite_%'",
                     -1, &s, nullptr);
  while (sqlite3_step(s) == SQLITE_ROW) {
    tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
  }
  sqlite3_finalize(s);
  for (const auto& t : tables) {
    std::string sql = "DELETE FROM \"" + t + "\"";
    if (sqlite3_exec(store->raw(), sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
      fail("cannot empty table", t);
    }
  }
  return *store;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto mode = (data[0] & 1) ? proto::ClockMode::server : proto::ClockMode::client;
  const bool one_batch = (data[0] & 2) != 0;
  std::vector<std::string_view> frames;
  std::size_t pos = 1;
  while (pos < size && frames.size() < 64) {
    std::size_t len = size - pos;
    if (len >= 2) {
      std::size_t want = data[pos] | (static_cast<std::size_t>(data[pos + 1]) << 8);
      pos += 2;
      len = std::min(want, size - pos);
    } else {
      pos = size - len;
    }
    frames.emplace_back(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
  }

  SqliteStore& store = fresh_store();
  Clock clock(mode, 0);
  Executor executor(store, clock);
  std::map<std::string, std::int64_t> fences;
  std::vector<proto::Decoded> batch;
  auto flush = [&] {
    if (batch.empty()) return;
    auto replies = executor.run(batch);
    if (replies.size() != batch.size()) fail("not one reply per request");
    for (std::size_t i = 0; i < batch.size(); ++i) check_reply(batch[i], replies[i]);
    check_fences(store, fences);
    batch.clear();
  };
  for (auto f : frames) {
    auto d = proto::decode_request(f, mode);
    check_round_trip(d, mode);
    batch.push_back(std::move(d));
    if (!one_batch) flush();
  }
  flush();
  return 0;
}
