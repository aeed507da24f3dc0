// A store's schema as one numbered list: each version's statements, run in
// order from the version after the database's own (C1.2: an upgrade keeps
// every job and fence). Both stores keep theirs here, their SQL in their own
// folder (storage/sqlite/sqlite_schema.cpp, storage/pg/pg_statements.cpp);
// a version that changed the other store only is in the list with no SQL,
// so that both count to rules::kSchemaVersion.
#pragma once

#include <string>
#include <vector>

namespace fenceq::daemon {

struct Migration {
  int version = 0;
  std::string sql;  // empty: nothing to do on this store
};

// The migrations of `ladder` (versions 1, 2, ... rules::kSchemaVersion, in
// order, each once) that a database at version `from` has not had, in
// order. Throws StoreError when `from` is newer than this fenceqd knows, or
// (a defect of this build) when the ladder is not 1..kSchemaVersion.
std::vector<const Migration*> migrations_due(const std::vector<Migration>& ladder, int from);

}  // namespace fenceq::daemon
