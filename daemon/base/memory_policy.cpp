#include "base/memory_policy.hpp"

#include <malloc.h>
#include <sqlite3.h>

namespace fenceq::daemon {
namespace {
// A sanitizer's allocator replaces glibc's (its mallopt answers 0): the
// thresholds and the trim are glibc's, so they are left out there.
#ifdef FENCEQ_SANITIZED_ALLOCATOR
constexpr bool kGlibcMalloc = false;
#else
constexpr bool kGlibcMalloc = true;
#endif
}  // namespace

bool apply_memory_policy() {
  bool ok = true;
  if (kGlibcMalloc) {
    // Setting either threshold turns off glibc's adjustment of both.
    ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold)) == 1 && ok;
    ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTrimThreshold)) == 1 && ok;
  }
  // Before sqlite3_initialize() (SQLITE_MISUSE after it): no buffer of our
  // own (nullptr), 0 pages of bulk per cache.
  ok = sqlite3_config(SQLITE_CONFIG_PAGECACHE, nullptr, 0, 0) == SQLITE_OK && ok;
  // Statement journals in memory only (-1: never spilled to a file), so in
  // chunks of 1 KiB instead of one block of 64 KiB (the spill size) each.
  ok = sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, -1) == SQLITE_OK && ok;
  return ok;
}

void give_back_memory() {
  if (kGlibcMalloc) malloc_trim(0);
}

}  // namespace fenceq::daemon
