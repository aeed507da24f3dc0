// What a database file must be before fenceqd writes a byte of it
// (docs/operating.md, "What fenceqd refuses to open"): an SQLite file that
// is whole, fenceq's (or new), of a schema this fenceqd knows, and writable.
// Each refusal is a StoreError of one line that names the path and the
// problem, thrown before anything changed the file or created one beside it.
#pragma once

#include <string>

namespace fenceq::daemon {

// Without SQLite, before the lock file is made: an existing `path` is a
// regular file this process can read and write, in a folder it can write (the
// -wal and -shm files), and it starts with SQLite's header and is as long as
// the header says. A missing file (created) and an empty one (a new
// database) pass, and so does ":memory:".
void check_db_file(const std::string& path);

// Through a read-only connection that writes nothing: the file holds no table
// yet, or the contract's six-column jobs table (C1.1, upgraded in place), or
// fenceq's schema of a version this fenceqd knows; and PRAGMA quick_check
// finds it sound.
void check_db_contents(const std::string& path);

}  // namespace fenceq::daemon
