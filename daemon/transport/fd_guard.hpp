// File-descriptor headroom: no client can make fenceqd run out of file
// descriptors, however many connections it opens.
//
// Every accepted connection costs one descriptor. libzmq 4.3's ipc:// listener
// aborts the whole process when accept() fails with EMFILE (an errno_assert in
// ipc_listener.cpp), and a daemon out of descriptors cannot open what it needs
// itself. So fenceqd (1) raises its soft RLIMIT_NOFILE to the hard limit at
// start, and (2) admits a new connection only while descriptors are left for
// everything else: fenceqd_guard.cpp wraps accept()/accept4() for the whole
// process (libzmq's I/O thread, the HTTP listener), and a connection that
// would leave fewer than the listener's reserve free is accepted and closed at
// once, with a log line, instead of aborting. When accept() itself fails with
// EMFILE, a spare descriptor kept for the purpose is given up for a moment so
// that the pending connection can be taken off the queue and closed (the
// libuv/nginx way), and the listener never spins on it.
//
// Linux hands out the lowest free descriptor, so an accepted descriptor
// numbered N means at least N are in use: a connection is refused when its
// number reaches the soft limit minus the reserve.
#pragma once

#include <cstdint>

namespace fenceq::daemon::fd_guard {

// ZeroMQ listeners refuse connections once fewer than this many descriptors
// are left; the HTTP listener keeps a smaller reserve of its own, so that a
// flood of job clients leaves it a few (its own connections are capped).
inline constexpr long kReserve = 64;
inline constexpr long kHttpReserve = 16;

// Raises the soft RLIMIT_NOFILE to the hard limit (not possible under a
// seccomp filter without @resources: then systemd's LimitNOFILE= has set
// both). Returns the soft limit in effect.
long raise_limit();

// Turns the guard on for `limit` descriptors (the soft limit). Before this,
// and in every program but fenceqd, accept() is the C library's.
void enable(long limit);

// `listen_fd` keeps `reserve` descriptors free instead of kReserve.
void set_reserve(int listen_fd, long reserve);

// Connections refused since start.
std::uint64_t refused();

}  // namespace fenceq::daemon::fd_guard
