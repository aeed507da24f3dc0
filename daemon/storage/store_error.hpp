// What a store reports besides its answers, for every store and for what
// sits below one (pg_connection.hpp) without the whole interface (store.hpp):
// StoreError, the failure of an operation (and SyncMode, base/sync_mode.hpp,
// how durably a SQLite store commits: --sync).
#pragma once

#include <stdexcept>
#include <string>

#include "base/sync_mode.hpp"

namespace fenceq::daemon {

struct StoreError : std::runtime_error {
  // What the caller should make of it.
  enum class Kind {
    internal,     // a failure of the store: the batch is answered `internal`
    unavailable,  // the database cannot be reached: `unavailable`, try later
    retry,        // a transient conflict (deadlock, serialization): the batch
                  // was rolled back whole and may simply be run again
    outcome_unknown,  // the connection broke during COMMIT: the batch may or
                      // may not have been applied (`outcome_unknown`)
    fatal,  // COMMIT's fsync failed: the batch may or may not be on disk
            // (`outcome_unknown`), and nothing written since the last good
            // fsync is known durable, so the daemon stops
    refused,  // this one operation cannot be stored as asked (PostgreSQL
              // text cannot hold U+0000): refused before the database saw
              // it; the transaction goes on, the request alone gets
              // `invalid_argument`
  };
  explicit StoreError(const std::string& what, Kind kind = Kind::internal)
      : std::runtime_error(what), kind(kind) {}
  Kind kind;
};

}  // namespace fenceq::daemon
