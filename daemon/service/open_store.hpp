// The store factory: opens the store the options name (store.hpp is the
// interface; this file knows both stores and the options), with the locks
// that make this daemon its only writer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "storage/store.hpp"

namespace fenceq::daemon {

struct Options;
class DbLock;

// Fsyncs the directory that holds `path`, so that a name just created there
// survives a power cut.
void sync_dir_of(const std::string& path);

// The store the options name, opened, with the locks that make this daemon
// its only writer (C1.3: the SQLite file's; with PostgreSQL, the paths of the
// daemon's ipc:// sockets). Throws with a one-line reason.
struct OpenedStore {
  std::vector<std::unique_ptr<DbLock>> locks;
  std::unique_ptr<Store> store;
  OpenedStore();
  OpenedStore(OpenedStore&&) noexcept;
  ~OpenedStore();
};
OpenedStore open_store(const Options& options);

}  // namespace fenceq::daemon
