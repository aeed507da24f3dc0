// The HTTP listener's routes: one row per path and method (routes.cpp,
// kRoutes), each with who may call it and its handler.
//
// Who may call: /metrics and /healthz everyone who can reach the port; the
// dashboard at / and its API under /api/ only with an auth file, and only
// users who authenticate (HTTP Basic; 401 otherwise); the API's POSTs
// (actions) only when not --http-read-only (405), from the dashboard's own
// page: its origin and CSRF token (403 otherwise, auth.hpp). An address or a
// user that keeps failing to log in waits (429 with Retry-After).
#pragma once

#include <microhttpd.h>

#include "http/auth.hpp"
#include "http/bridge.hpp"
#include "http/http_server.hpp"

namespace fenceq::daemon::http {

// What the handlers use; owned by the server, outliving every request.
struct Site {
  const HttpOptions& options;
  Auth& auth;
  Bridge& bridge;
};

// Answers a request MHD hands over (`url` without its query string), or
// suspends it for the serving loop's answer (Bridge::start). A handler's
// refusal (ApiError) is answered here; only allocation failures escape.
MHD_Result dispatch(Site& site, MHD_Connection* c, const char* url, const char* method,
                    void** state);

}  // namespace fenceq::daemon::http
