#include "store.hpp"

namespace fenceq::daemon {

bool is_postgres_uri(std::string_view db) {
  return db.starts_with("postgresql://") || db.starts_with("postgres://");
}

}  // namespace fenceq::daemon
