// LD_PRELOAD shim for the fault tests: fsync() and fdatasync() fail with EIO
// while the file named by FENCEQ_FAILSYNC_TRIGGER exists, and pass through to
// libc otherwise. A disk that fails its flush cannot be had on demand; this
// is what the daemon would see from one.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace {

bool armed() {
  const char* trigger = std::getenv("FENCEQ_FAILSYNC_TRIGGER");
  return trigger != nullptr && ::access(trigger, F_OK) == 0;
}

using SyncFn = int (*)(int);

SyncFn next(const char* name) { return reinterpret_cast<SyncFn>(::dlsym(RTLD_NEXT, name)); }

int fail_or(SyncFn real, int fd) {
  if (!armed()) return real(fd);
  errno = EIO;
  return -1;
}

}  // namespace

extern "C" int fsync(int fd) {
  static const SyncFn real = next("fsync");
  return fail_or(real, fd);
}

extern "C" int fdatasync(int fd) {
  static const SyncFn real = next("fdatasync");
  return fail_or(real, fd);
}
