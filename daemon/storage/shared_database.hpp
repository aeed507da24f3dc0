// What a database shared with other fenceqd adds to a store (PostgreSQL:
// Store::shared()); the connection below the PostgreSQL store fills in its
// Wakeups without knowing the store interface.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fenceq::daemon {

// A database written by the fenceqd of several hosts. Other writers make jobs
// claimable without this daemon seeing the statement, and time is the
// database's. Used by the executor's thread only.
class SharedDatabase {
 public:
  // The database's clock minus this host's wall clock in seconds, measured
  // by the last begin(); nullopt until measured once.
  virtual std::optional<double> clock_offset() const = 0;
  // Readable when another writer may have freed a job (LISTEN/NOTIFY); -1
  // while disconnected. take_wakeups() reads what came. A lost wake-up only
  // delays: a reconnection wakes every parked claim.
  virtual int wakeup_fd() = 0;
  struct Wakeups {
    bool all = false;                 // any queue (a reconnect, a sender with many queues)
    std::vector<std::string> queues;  // the queues another writer freed a job in
    std::vector<std::string> grouped;  // of those, the ones it put a job of a group in
    bool any() const { return all || !queues.empty(); }
  };
  virtual Wakeups take_wakeups() = 0;
  // Grows with every (re)connection: the executor then re-reads the clock's
  // high-water mark (another server may have stored a higher one, or the
  // database failed over to a slower clock) and retries its parked claims.
  virtual std::uint64_t connection_epoch() const = 0;

 protected:
  ~SharedDatabase() = default;
};

}  // namespace fenceq::daemon
