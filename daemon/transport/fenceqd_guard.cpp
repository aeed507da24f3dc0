// accept() and accept4() for the fenceqd process: the C library's, filtered by
// fd_guard (fd_guard.hpp explains why). An executable's definition of a symbol
// takes precedence over the C library's for every shared library it loads,
// libzmq included; the real functions are found with RTLD_NEXT (under a
// sanitizer, that is the sanitizer's interceptor, which calls the C library).
// Linked into fenceqd only: tests that link the daemon's parts in-process
// keep the plain functions.
#include <dlfcn.h>
#include <sys/socket.h>

#include "transport/fd_guard_internal.hpp"

namespace {

using Accept = int (*)(int, sockaddr*, socklen_t*);
using Accept4 = int (*)(int, sockaddr*, socklen_t*, int);

template <typename F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int accept(int fd, sockaddr* addr, socklen_t* len) {
  static const Accept real = next<Accept>("accept");
  return fenceq::daemon::fd_guard::internal::admit(fd, real(fd, addr, len),
                                                   [&] { return real(fd, addr, len); });
}

extern "C" int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  static const Accept4 real = next<Accept4>("accept4");
  return fenceq::daemon::fd_guard::internal::admit(fd, real(fd, addr, len, flags),
                                                   [&] { return real(fd, addr, len, flags); });
}
