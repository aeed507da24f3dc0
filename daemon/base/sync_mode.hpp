// How durably a SQLite store commits (--sync): at the ground, as the command
// line (options.hpp) and the stores (storage/) both name it.
#pragma once

namespace fenceq::daemon {

enum class SyncMode { full, normal, off };

}  // namespace fenceq::daemon
