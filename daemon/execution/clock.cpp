#include "execution/clock.hpp"

#include <algorithm>
#include <chrono>

namespace fenceq::daemon {

double Clock::now() {
  using namespace std::chrono;
  double wall = duration<double>(system_clock::now().time_since_epoch()).count();
  high_water_ = std::max(high_water_, wall + offset_);
  return high_water_;
}

}  // namespace fenceq::daemon
