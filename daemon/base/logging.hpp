// fenceqd's log: spdlog on stderr. On a terminal or in a file each line has a
// timestamp; when stderr is connected to the systemd journal (JOURNAL_STREAM
// names it) each line starts with its syslog priority, "<4>" for a warning,
// and carries no timestamp of its own: journald keeps both, so that
// `journalctl -p warning -u fenceqd` selects by level.
#pragma once

#include <string>
#include <string_view>

namespace fenceq::daemon {

// True when JOURNAL_STREAM is set and names the device and inode of fd 2
// (a child that inherited the variable but not the stream gets false).
bool stderr_is_journal();

// The syslog priority prefix for a message printed to stderr before logging
// is set up (e.g. "<3>" for an error), or "" when stderr is not the journal.
std::string journal_prefix(int priority);

// Text from a client (a queue, schedule or user name, an id, an HTTP path or
// header) as it goes into a log line or an error message: in single quotes,
// every byte below 0x20 or from 0x7f on (newlines, ESC, BEL, and every
// non-ASCII byte, so bidi controls too), a quote and a backslash as \xHH,
// and cut after 300 bytes ("..."). So no client can forge a log line or
// send escape sequences to the operator's terminal.
std::string client_text(std::string_view s);

// Installs the default logger "fenceqd" at `level` (a spdlog level name).
void init_logging(const std::string& level);

}  // namespace fenceq::daemon
