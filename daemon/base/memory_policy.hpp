// How fenceqd takes memory and gives it back: one policy, chosen on purpose
// (docs/operating.md, "Memory policy"). The rule: what the daemon reuses
// from request to request stays; what a burst made it take goes back once
// the burst is over; and nothing depends on what came before (glibc's
// thresholds slide with the history of a process: fixed here).
// apply_memory_policy() runs first in main, before any thread starts and
// before SQLite initialises.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fenceq::daemon {

// Blocks of this size or more are mapped on their own and unmapped by their
// free(): large replies (a page of list, stats). Smaller ones, a request of
// the largest frame (--max-message, 1 MiB by default) and its copies
// included, come from the heap and are reused: mapped afresh, every such
// request paid a page fault for each 4 KiB of each copy (2x slower for 1 MiB
// requests). glibc's default threshold is 128 KiB but slides: each mapped
// block freed raised it, up to 32 MiB, so what was mapped depended on what
// had come before.
inline constexpr std::size_t kMmapThreshold = 4 * 1024 * 1024;

// The free space the heap keeps at its top instead of handing it back. With
// glibc's default (128 KiB, sliding too) the top of the heap moved back and
// forth across the limit from one statement to the next: a brk shrink after
// one, page faults to grow it again for the next
// (docs/operating.md, "Memory policy").
inline constexpr std::size_t kTrimThreshold = 8 * 1024 * 1024;

// After this many bytes of frames read (kept or dropped) the serving loop
// gives memory back (give_back_memory) as soon as its input is drained, and
// before any reply of that batch leaves. A client can make libzmq assemble a
// message of any number of frames before fenceqd sees it (1,000 frames of
// 1 MiB, 8,000 of 127 KiB: about 1 GB); dropped, its frames are free but
// stay in the arenas of the threads that took them unless handed back.
inline constexpr std::uint64_t kGiveBackAfter = 64ull * 1024 * 1024;

// Applies the policy: the two thresholds above, fixed, and no large block
// from SQLite on every statement:
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

// Hands the free memory of every malloc arena back to the kernel
// (malloc_trim): the heap's top and every free page inside it. Costs a walk
// of the free chunks; the serving loop calls it at most once per
// kGiveBackAfter bytes read.
void give_back_memory();

}  // namespace fenceq::daemon
