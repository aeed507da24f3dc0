#include "pg_store.hpp"

namespace fenceq::daemon {

std::unique_ptr<Store> open_pg_store(const std::string&) {
  throw StoreError("PostgreSQL store: not implemented yet", 0);
}

}  // namespace fenceq::daemon
