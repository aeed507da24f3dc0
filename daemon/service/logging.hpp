// fenceqd's log: spdlog on stderr. On a terminal or in a file each line has a
// timestamp; when stderr is connected to the systemd journal (JOURNAL_STREAM
// names it) each line starts with its syslog priority, "<4>" for a warning,
// and carries no timestamp of its own: journald keeps both, so that
// `journalctl -p warning -u fenceqd` selects by level.
#pragma once

#include <string>

namespace fenceq::daemon {

// True when JOURNAL_STREAM is set and names the device and inode of fd 2
// (a child that inherited the variable but not the stream gets false).
bool stderr_is_journal();

// The syslog priority prefix for a message printed to stderr before logging
// is set up (e.g. "<3>" for an error), or "" when stderr is not the journal.
std::string journal_prefix(int priority);

// Installs the default logger "fenceqd" at `level` (a spdlog level name).
void init_logging(const std::string& level);

}  // namespace fenceq::daemon
