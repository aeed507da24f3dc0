#include "http/respond.hpp"

namespace fenceq::daemon::http {

std::string hex(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string error_body(const std::string& code, const std::string& message) {
  return text(json{{"ok", false}, {"error", {{"code", code}, {"message", message}}}}) + "\n";
}

MHD_Result reply(MHD_Connection* c, int status, const std::string& body, const char* type,
                 bool dashboard, bool close, const char* set_cookie) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                    MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  if (close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  if (set_cookie) MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, set_cookie);
  if (dashboard) {
    // Job data: never cached, never framed, no script or style but the
    // daemon's own files (nothing inline: injected markup could not run).
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(
        r, "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'none'");
  }
  MHD_Result ret = MHD_queue_response(c, static_cast<unsigned>(status), r);
  MHD_destroy_response(r);
  return ret;
}

MHD_Result reply_json(MHD_Connection* c, int status, const json& body, const char* set_cookie) {
  return reply(c, status, text(body) + "\n", "application/json", true, false, set_cookie);
}

MHD_Result api_error(MHD_Connection* c, int status, const std::string& code,
                     const std::string& message) {
  return reply(c, status, error_body(code, message), "application/json", true);
}

MHD_Result method_not_allowed(MHD_Connection* c) { return reply(c, 405, "method not allowed\n"); }

MHD_Result unauthorized(MHD_Connection* c) {
  MHD_Response* r = MHD_create_response_from_buffer(13, const_cast<char*>("unauthorized\n"),
                                                    MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", kPlainText);
  MHD_Result ret = MHD_queue_basic_auth_fail_response(c, "fenceq", r);
  MHD_destroy_response(r);
  return ret;
}

MHD_Result too_many_logins(MHD_Connection* c, std::chrono::seconds retry_after) {
  static const std::string kBody = "too many failed logins: try again later\n";
  MHD_Response* r = MHD_create_response_from_buffer(kBody.size(), const_cast<char*>(kBody.data()),
                                                    MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", kPlainText);
  MHD_add_response_header(r, "Retry-After", std::to_string(retry_after.count()).c_str());
  MHD_Result ret = MHD_queue_response(c, 429, r);
  MHD_destroy_response(r);
  return ret;
}

const char* header(MHD_Connection* c, const char* name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

std::optional<std::string> arg(MHD_Connection* c, const char* name) {
  const char* v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
  if (!v) return std::nullopt;
  return std::string(v);
}

}  // namespace fenceq::daemon::http
