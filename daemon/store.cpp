#include "store.hpp"

#include "pg_store.hpp"
#include "sqlite_store.hpp"

namespace fenceq::daemon {

bool is_postgres_uri(std::string_view db) {
  return db.starts_with("postgresql://") || db.starts_with("postgres://");
}

std::unique_ptr<Store> open_store(const std::string& db, SyncMode sync) {
  if (is_postgres_uri(db)) return open_pg_store(db);
  return std::make_unique<SqliteStore>(db, sync);
}

}  // namespace fenceq::daemon
