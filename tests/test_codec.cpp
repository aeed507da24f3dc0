// The codec alone: every vector decodes to its expected outcome, malformed
// input of every kind in C4.1 is refused with a code, and nothing crashes.
#include <catch2/catch.hpp>

#include <msgpack.hpp>

#include <cmath>
#include <random>

#include "fenceq_protocol/codec.hpp"
#include "fenceq_protocol/op_spec.hpp"
#include "vectors.hpp"

namespace proto = fenceq::protocol;
using proto::ClockMode;
using proto::ErrorCode;

namespace {

proto::Decoded dec(std::string_view bytes, ClockMode mode = ClockMode::client) {
  return proto::decode_request(bytes, mode);
}

std::string code_of(const proto::Decoded& d) {
  return d.request ? "ok" : std::string(proto::code_name(d.error.code));
}

// A msgpack map written field by field, to build requests a normal packer won't.
struct MapWriter {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk{buf};
  explicit MapWriter(std::uint32_t n) { pk.pack_map(n); }
  template <typename T>
  MapWriter& kv(const char* k, const T& v) {
    pk.pack(k);
    pk.pack(v);
    return *this;
  }
  std::string str() const { return std::string(buf.data(), buf.size()); }
};

}  // namespace

TEST_CASE("vectors: every request decodes to the expected outcome, success replies decode") {
  for (const auto& suite : fenceq::test::load_vector_suites()) {
    auto mode = suite.clock == "server" ? ClockMode::server : ClockMode::client;
    for (const auto& step : suite.steps) {
      INFO(suite.name << " / " << step.name);
      auto d = dec(step.request, mode);
      if (step.reply.contains("error") && step.decodes) {
        CHECK(code_of(d) == "ok");  // refused when applied (test_executor checks the code)
      } else if (step.reply.contains("error")) {
        std::string want = step.reply["error"]["code"];
        CHECK(code_of(d) == want);
        CHECK_FALSE(d.error.message.empty());
      } else {
        CHECK(code_of(d) == "ok");
      }
      if (step.reply_bytes && d.request) {
        proto::Rid rid = d.rid.value_or(proto::Rid{});
        if (!d.rid) continue;  // decode_reply matches by rid; rid-less steps are checked above
        auto reply = proto::decode_reply(*step.reply_bytes, d.request->op, rid);
        REQUIRE(reply);
        CHECK(reply->ok);
      }
    }
  }
}

TEST_CASE("C4.1 malformed bytes: truncated at every length, never a crash, always bad_request") {
  MapWriter w(6);
  w.kv("op", "complete").kv("id", "job").kv("owner", "me").kv("fence", 3).kv("result", "r")
      .kv("now", 1.5);
  const std::string full = w.str();
  REQUIRE(code_of(dec(full)) == "ok");
  for (std::size_t n = 0; n < full.size(); ++n) {
    INFO(n);
    CHECK(code_of(dec(std::string_view(full).substr(0, n))) == "bad_request");
  }
}

TEST_CASE("C4.1 random bytes never crash the decoder and always get a coded error") {
  std::mt19937 rng(20261129);
  for (int i = 0; i < 20000; ++i) {
    std::string bytes(rng() % 64, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    auto d = dec(bytes);
    if (!d.request) CHECK_FALSE(d.error.message.empty());
  }
}

TEST_CASE("C4.1 lying length headers are refused without allocating what they announce") {
  // str32 / bin32 / array32 / map32 / ext32 headers claiming ~4 GiB, inside a
  // request map and at the top.
  for (std::string h : {std::string("\xdb\xff\xff\xff\xff", 5), std::string("\xc6\xff\xff\xff\xff", 5),
                        std::string("\xdd\xff\xff\xff\xff", 5), std::string("\xdf\xff\xff\xff\xff", 5),
                        std::string("\xc9\xff\xff\xff\xff\x01", 6)}) {
    CHECK(code_of(dec(h)) == "bad_request");
    CHECK(code_of(dec(std::string("\x82\xa2op\xa4ping\xa1x", 10) + h)) == "bad_request");
  }
  // Deep nesting in an ignored key.
  std::string deep = std::string("\x82\xa2op\xa4ping\xa1x", 10) + std::string(100, '\x91') + "\xc0";
  CHECK(code_of(dec(deep)) == "bad_request");
}

TEST_CASE("C4.1 wrong types get bad_request naming the field") {
  auto d = dec(MapWriter(4).kv("op", "renew").kv("id", "j").kv("owner", 7).kv("fence", 1).str());
  CHECK(code_of(d) == "bad_request");
  CHECK(d.error.message.find("owner") != std::string::npos);
  // fence = float64 2.0, written by hand (msgpack-c would pack a whole double as an int).
  d = dec(MapWriter(4).kv("op", "release").kv("id", "j").kv("owner", "o").str() +
          std::string("\xa5" "fence" "\xcb\x40\x00\x00\x00\x00\x00\x00\x00", 15));
  CHECK(code_of(d) == "bad_request");
  CHECK(d.error.message.find("fence") != std::string::npos);
  d = dec(MapWriter(2).kv("op", "state").kv("id", msgpack::type::nil_t()).str());
  CHECK(code_of(d) == "bad_request");
  CHECK(d.error.message.find("id") != std::string::npos);
}

TEST_CASE("C4.1 NaN and infinite numbers get invalid_argument naming the field") {
  for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    auto d = dec(MapWriter(5).kv("op", "claim").kv("id", "j").kv("owner", "o").kv("ttl", bad)
                     .kv("now", 0).str());
    CHECK(code_of(d) == "invalid_argument");
    CHECK(d.error.message.find("ttl") != std::string::npos);
    d = dec(MapWriter(5).kv("op", "claim").kv("id", "j").kv("owner", "o").kv("ttl", 1)
                .kv("now", bad).str());
    CHECK(code_of(d) == "invalid_argument");
    CHECK(d.error.message.find("now") != std::string::npos);
  }
}

TEST_CASE("C4.1 oversized strings: id and owner over 1024 bytes, a large result is fine") {
  auto d = dec(MapWriter(2).kv("op", "state").kv("id", std::string(1025, 'i')).str());
  CHECK(code_of(d) == "invalid_argument");
  CHECK(d.error.message.find("id") != std::string::npos);
  d = dec(MapWriter(6).kv("op", "complete").kv("id", "j").kv("owner", "o").kv("fence", 1)
              .kv("result", std::string(512 * 1024, 'r')).kv("now", 1).str());
  REQUIRE(code_of(d) == "ok");
  CHECK(d.request->as<proto::req::Complete>().result->size() == 512 * 1024);
}

TEST_CASE("C4.1 a field the op does not have is refused, naming it and the daemon's version") {
  // Issue 57: refused, not ignored (the seed's wire spec ignored them).
  auto d = dec(MapWriter(4).kv("op", "state").kv("id", "j").kv("zzz", std::vector<int>{1, 2, 3})
                   .kv("rid", 4).str());
  REQUIRE(code_of(d) == "invalid_argument");
  CHECK(d.error.message.find("'zzz'") != std::string::npos);
  CHECK(d.error.message.find("state") != std::string::npos);
  CHECK(d.error.message.find(std::string(fenceq::protocol::kVersion)) != std::string::npos);
  REQUIRE(d.rid);
  // A field of another op is not this one's: `wait` is claim_next's and await's.
  CHECK(code_of(dec(MapWriter(3).kv("op", "state").kv("id", "j").kv("wait", 1).str())) ==
        "invalid_argument");
  // The envelope's fields are every op's.
  CHECK(code_of(dec(MapWriter(4).kv("op", "state").kv("id", "j").kv("v", 1).kv("rid", "r").str())) ==
        "ok");
  // In an entry of a batch, and in complete_many's next.
  auto e = dec(MapWriter(2).kv("op", "enqueue_many")
                   .kv("jobs", std::vector<std::map<std::string, std::string>>{
                                   {{"id", "a"}}, {{"id", "b"}, {"expires_at", "soon"}}})
                   .str());
  REQUIRE(code_of(e) == "invalid_argument");
  CHECK(e.error.message.rfind("jobs[1]: field 'expires_at'", 0) == 0);
  auto n = dec(MapWriter(4).kv("op", "complete_many").kv("items", std::vector<int>{})
                   .kv("next", std::map<std::string, double>{{"queue_name", 1}}).kv("now", 1).str(),
               ClockMode::client);
  REQUIRE(code_of(n) == "invalid_argument");
  CHECK(n.error.message.rfind("next: field 'queue_name'", 0) == 0);
  // Every field the spec gives an op is read by it: a request that carries
  // all of an op's declared fields is never refused as unknown.
  for (const auto& spec : fenceq::protocol::kOpSpecs) {
    for (auto name : spec.fields) {
      MapWriter w(2);
      const std::string field(name);
      w.kv("op", std::string(fenceq::protocol::op_name(spec.op))).kv(field.c_str(), msgpack::type::nil_t());
      auto r = dec(w.str());
      INFO(fenceq::protocol::op_name(spec.op) << "." << name << ": " << r.error.message);
      CHECK(r.error.message.find("is not a field of") == std::string::npos);
    }
  }
}

TEST_CASE("C2.2 C2.3 now: required in client mode for timed ops, refused in server mode") {
  auto timed = MapWriter(4).kv("op", "claim").kv("id", "j").kv("owner", "o").kv("ttl", 3).str();
  CHECK(code_of(dec(timed, ClockMode::server)) == "ok");
  CHECK(code_of(dec(timed, ClockMode::client)) == "invalid_argument");
  auto with_now = MapWriter(5).kv("op", "claim").kv("id", "j").kv("owner", "o").kv("ttl", 3)
                      .kv("now", 8).str();
  CHECK(code_of(dec(with_now, ClockMode::server)) == "invalid_argument");
  auto d = dec(with_now, ClockMode::client);
  REQUIRE(code_of(d) == "ok");
  CHECK(d.request->now == 8.0);
  // Ops without a time don't need it in client mode.
  CHECK(code_of(dec(MapWriter(1).kv("op", "ping").str(), ClockMode::client)) == "ok");
}

TEST_CASE("codec: a request encoded by the client side decodes to the same request") {
  proto::req::Complete q;
  q.id = "round-trip";
  q.owner = "me";
  q.fence = 1234567890123;
  q.result = std::string("payload \0 with nul", 18);
  proto::Request r{q};
  CHECK(r.op == proto::Op::complete);
  r.now = 17.25;
  r.rid = proto::Rid{std::string("rid-1")};
  auto d = dec(proto::encode_request(r));
  REQUIRE(d.request);
  REQUIRE(d.request->op == proto::Op::complete);
  const auto& got = d.request->as<proto::req::Complete>();
  CHECK(got.id == q.id);
  CHECK(got.owner == q.owner);
  CHECK(got.fence == q.fence);
  CHECK(got.result == q.result);
  CHECK(d.request->now == r.now);
  CHECK(d.rid == r.rid);
}

TEST_CASE("codec: every op's struct is written as it was read (each vector that decodes)") {
  // decode, encode, decode again: the same op, and the same bytes once more.
  std::size_t seen = 0;
  for (const auto& suite : fenceq::test::load_vector_suites()) {
    auto mode = suite.clock == "server" ? ClockMode::server : ClockMode::client;
    for (const auto& step : suite.steps) {
      auto d = dec(step.request, mode);
      if (!d.request) continue;
      INFO(suite.name << " / " << step.name);
      REQUIRE(d.request->body.index() == static_cast<std::size_t>(d.request->op));
      const auto bytes = proto::encode_request(*d.request);
      auto again = dec(bytes, mode);
      REQUIRE(again.request);
      CHECK(again.request->op == d.request->op);
      CHECK(again.rid == d.rid);
      CHECK(proto::encode_request(*again.request) == bytes);
      ++seen;
    }
  }
  CHECK(seen > 100);
}

TEST_CASE("codec: a reply with another rid is not taken for this request's reply") {
  auto bytes = proto::encode_ok(proto::Result{std::int64_t{5}}, proto::Rid{std::uint64_t{7}});
  CHECK_FALSE(proto::decode_reply(bytes, proto::Op::claim, proto::Rid{std::uint64_t{8}}));
  auto r = proto::decode_reply(bytes, proto::Op::claim, proto::Rid{std::uint64_t{7}});
  REQUIRE(r);
  CHECK(std::get<std::int64_t>(r->result) == 5);
  CHECK_THROWS_AS(proto::decode_reply("\xc1", proto::Op::claim, proto::Rid{}),
                  proto::ReplyFormatError);
}

TEST_CASE("codec: valid_utf8 judges a byte wherever it stands, inside or past a run of ASCII") {
  using fenceq::protocol::valid_utf8;
  // The check takes eight bytes of ASCII at a time: each kind of byte at
  // every position of strings up to 24 bytes, so that it stands inside a
  // word, at its edge, and in the tail read byte by byte.
  for (std::size_t len = 1; len <= 24; ++len) {
    for (std::size_t k = 0; k < len; ++k) {
      std::string s(len, 'a');
      s[k] = '\xFF';  // never in UTF-8
      CHECK_FALSE(valid_utf8(s));
      s[k] = '\x80';  // a continuation with no lead
      CHECK_FALSE(valid_utf8(s));
      s[k] = '\xC3';  // a lead: valid only with its continuation after it
      CHECK(valid_utf8(s) == false);
      std::string two = std::string(k, 'a') + "\xC3\xA9" + std::string(len - k, 'b');
      CHECK(valid_utf8(two));
      std::string cut = std::string(len, 'a') + "\xE2\x82";  // a 3-byte sequence cut short
      CHECK_FALSE(valid_utf8(cut));
      std::string surrogate = std::string(k, 'a') + "\xED\xA0\x80" + std::string(len - k, 'b');
      CHECK_FALSE(valid_utf8(surrogate));
    }
    CHECK(valid_utf8(std::string(len, 'z')));
  }
  CHECK(valid_utf8(""));
}
