#include "storage/migrations.hpp"

#include <string>

#include "storage/job_rules.hpp"
#include "storage/store_error.hpp"

namespace fenceq::daemon {

std::vector<const Migration*> migrations_due(const std::vector<Migration>& ladder, int from) {
  for (std::size_t k = 0; k < ladder.size(); ++k) {
    if (ladder[k].version != static_cast<int>(k) + 1) {
      throw StoreError("this fenceqd's schema list skips or repeats version " +
                       std::to_string(k + 1));
    }
  }
  if (static_cast<int>(ladder.size()) != rules::kSchemaVersion) {
    throw StoreError("this fenceqd's schema list ends at version " +
                     std::to_string(ladder.size()) + ", not " +
                     std::to_string(rules::kSchemaVersion));
  }
  if (from > rules::kSchemaVersion) {
    throw StoreError("the database's fenceq schema is version " + std::to_string(from) +
                     ", newer than this fenceqd knows (" +
                     std::to_string(rules::kSchemaVersion) + ")");
  }
  std::vector<const Migration*> due;
  for (const auto& m : ladder) {
    if (m.version > from) due.push_back(&m);
  }
  return due;
}

}  // namespace fenceq::daemon
