// How fenceqd allocates and gives back memory: one policy, chosen on purpose
// (docs/operating.md, "Limits", memory). Call apply_memory_policy() first in
// main, before any thread starts and before SQLite initialises.
#pragma once

#include <cstddef>

namespace fenceq::daemon {

// Blocks of this size or more are mapped on their own and unmapped by their
// free(): memory a client made the daemon take (a message of 1,000 frames of
// 1 MiB, a big reply) goes back to the kernel at once, whatever came before.
// glibc's default is the same size, but sliding: each freed mapped block
// raised it (up to 32 MiB), and later blocks of that size stayed in the heap,
// never to be returned.
inline constexpr std::size_t kMmapThreshold = 128 * 1024;

// The free space the heap keeps at its top instead of handing it back. The
// daemon's working set of small blocks is reused from request to request;
// with glibc's default (128 KiB) the top of the heap moved back and forth
// across the limit on every claim (a brk shrink after the statement, page
// faults to grow it again for the next).
inline constexpr std::size_t kTrimThreshold = 8 * 1024 * 1024;

// Applies the policy: the two thresholds above, fixed (glibc's sliding
// thresholds off), and no block in between from SQLite on every statement:
// - page caches without their bulk block (SQLITE_CONFIG_PAGECACHE, 0 pages):
//   every cache, the ephemeral tables of each claim_next included (its IN
//   list, its RETURNING rows), takes its pages one by one from the heap
//   instead of an 85 KiB block per cache, three per claim_next;
// - statement journals in memory, in 1 KiB chunks (SQLITE_CONFIG_STMTJRNL_SPILL
//   -1), instead of a 64 KiB block per statement, or a temporary file once a
//   statement's journal grew past 64 KiB. (The store's writes run OR FAIL,
//   which needs no statement journal, but SQLite still keeps one for a write
//   that calls a function, such as the claims' counters: sqlite_store.cpp.)
// Returns false if glibc or SQLite refused a setting (the daemon still runs,
// with its defaults): SQLite's only before sqlite3_initialize(), that is
// before the first connection opens (or after sqlite3_shutdown()).
bool apply_memory_policy();

}  // namespace fenceq::daemon
