// Between fd_guard.cpp (the policy) and fenceqd_guard.cpp (the wrappers).
#pragma once

#include <functional>

namespace fenceq::daemon::fd_guard::internal {

// Given what the C library's accept returned on `listen_fd` (`fd`, or -1 with
// errno set), the descriptor to hand to the caller, or -1 with errno set when
// the connection is refused. `accept_again` repeats the accept.
int admit(int listen_fd, int fd, const std::function<int()>& accept_again);

}  // namespace fenceq::daemon::fd_guard::internal
