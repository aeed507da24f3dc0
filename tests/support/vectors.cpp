#include "vectors.hpp"

#include <zmq.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "daemon.hpp"
#include "probe.hpp"

namespace fenceq::test {
namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// True when every key of `want` is in `got` with an equal value, recursively.
bool contains(const nlohmann::json& got, const nlohmann::json& want) {
  if (!want.is_object()) return got == want;
  if (!got.is_object()) return false;
  for (auto it = want.begin(); it != want.end(); ++it) {
    if (!got.contains(it.key()) || !contains(got[it.key()], it.value())) return false;
  }
  return true;
}

}  // namespace

std::vector<VectorSuite> load_vector_suites() {
  std::vector<std::filesystem::path> files;
  for (const auto& e :
       std::filesystem::directory_iterator(source_dir() + "/protocol/vectors")) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error("no vector suites found");
  std::vector<VectorSuite> suites;
  for (const auto& f : files) {
    std::ifstream in(f);
    auto doc = nlohmann::json::parse(in);
    VectorSuite s{doc.at("name"), doc.at("clock"), {}};
    for (const auto& st : doc.at("steps")) {
      VectorStep step;
      step.name = st.at("name");
      step.request = from_hex(st.at("request_hex"));
      step.reply = st.at("reply");
      if (st.contains("reply_hex")) step.reply_bytes = from_hex(st.at("reply_hex"));
      step.subset = st.value("compare", "") == "subset";
      step.decodes = st.value("decodes", false);
      s.steps.push_back(std::move(step));
    }
    suites.push_back(std::move(s));
  }
  return suites;
}

std::string vector_mismatch(const VectorStep& step, const std::string& actual) {
  nlohmann::json got;
  try {
    got = nlohmann::json::from_msgpack(actual);
  } catch (const std::exception& e) {
    return std::string("reply is not msgpack: ") + e.what();
  }
  const auto& want = step.reply;
  if (want.contains("error")) {
    bool same = got.value("ok", true) == false && got.contains("error") &&
                got["error"].value("code", "") == want["error"]["code"] &&
                got["error"].contains("message") && got["error"]["message"].is_string() &&
                !got["error"]["message"].get<std::string>().empty() &&
                (!want.contains("rid") || (got.contains("rid") && got["rid"] == want["rid"]));
    return same ? "" : "want " + want.dump() + ", got " + got.dump();
  }
  if (step.subset ? !contains(got, want) : got != want) {
    return "want " + want.dump() + ", got " + got.dump();
  }
  if (step.reply_bytes && *step.reply_bytes != actual) {
    return "reply bytes differ from reply_hex (value " + got.dump() + ")";
  }
  return "";
}

std::string error_code(const nlohmann::json& reply) {
  if (!reply.is_object() || reply.value("ok", true)) return "";
  return reply["error"]["code"].get<std::string>();
}

nlohmann::json raw(const Daemon& d, const nlohmann::json& request) {
  zmq::context_t ctx;
  auto s = dealer(ctx, d.endpoint());
  s.send(zmq::buffer(pack(request)));
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::seconds(5)) == 0) return nullptr;
  zmq::message_t m;
  if (!s.recv(m)) return nullptr;
  return nlohmann::json::from_msgpack(std::string(static_cast<const char*>(m.data()), m.size()));
}

}  // namespace fenceq::test
