// The daemon's figures in the Prometheus text exposition format (0.0.4):
// served by the `metrics` op (`fenceq metrics`) and the optional HTTP endpoint.
#pragma once

#include <string>

#include "fenceq_protocol/codec.hpp"

namespace fenceq::daemon {

std::string prometheus_text(const protocol::Stats& stats);

}  // namespace fenceq::daemon
