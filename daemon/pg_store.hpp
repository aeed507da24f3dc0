// The PostgreSQL store: one database shared by the fenceqd sidecars of many
// hosts (libpq). Placeholder until the implementation lands.
#pragma once

#include <memory>
#include <string>

#include "store.hpp"

namespace fenceq::daemon {

// Opens the PostgreSQL store at `uri` (postgresql://...).
std::unique_ptr<Store> open_pg_store(const std::string& uri);

}  // namespace fenceq::daemon
