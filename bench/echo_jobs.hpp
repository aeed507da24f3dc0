// `fenceq-bench --target echo-pg --echo-jobs fenceq|open`: a stand-in for a
// PostgreSQL sidecar's complete_next, to measure a schema before a store is
// built on it (issue 29; bench/pg_schema/README.md). The echo server's batch
// of n requests becomes one pipeline on one connection, as a sidecar's: BEGIN,
// for each request the complete of the oldest job held and the claim of the
// next one, COMMIT. K jobs are held at a time, as K workers hold them.
//
//   fenceq  fenceqd's own statements on fenceqd's schema (the `jobs` table a
//           sidecar made; the jobs queue `q`, enqueued beforehand).
//   open1   the same schema, complete_next as one statement a request.
//   open    the schema of bench/pg_schema/open.sql: the open jobs (claimable,
//           delayed, leased) in a narrow table of their own, `jobs_open`,
//           where a claim's lease is a HOT update; the job's own row in
//           `jobs_body`, without an index on what a claim or a completion
//           changes (HOT too); finished jobs by time in `jobs_finished_at`.
//
// Both read the clock as 1000 (leases run to 1030): every lease is current
// when its complete comes, and nothing expires.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <stdexcept>
#include <string>
#include <utility>

class EchoJobs {
 public:
  EchoJobs(const std::string& uri, const std::string& schema, int held)
      : c_(PQconnectdb(uri.c_str())), held_max_(held) {
    if (PQstatus(c_) != CONNECTION_OK) fail("connect");
    merged_ = schema == "open1";
    const bool open = schema != "fenceq";
    if (merged_) {
      prepare("complete_next", complete_next_open(), 2);
    } else {
      prepare("complete", open ? complete_open() : kCompleteFenceq, 2);
      prepare("claim", open ? claim_open() : kClaimFenceq, 0);
    }
    if (PQenterPipelineMode(c_) != 1) fail("pipeline mode");
  }
  ~EchoJobs() { PQfinish(c_); }
  EchoJobs(const EchoJobs&) = delete;
  EchoJobs& operator=(const EchoJobs&) = delete;

  // One batch of n requests: one pipeline, one commit.
  void commit(std::size_t n) {
    send("BEGIN");
    for (std::size_t i = 0; i < n; ++i) {
      if (merged_) {  // the complete (of none at first) and the claim in one statement
        std::pair<std::string, std::int64_t> job{"", 0};
        if (static_cast<int>(held_.size()) >= held_max_) {
          job = std::move(held_.front());
          held_.pop_front();
          ++completes_sent_;
        }
        const std::string f = std::to_string(job.second);
        const char* values[2] = {job.first.c_str(), f.c_str()};
        if (PQsendQueryPrepared(c_, "complete_next", 2, values, nullptr, nullptr, 0) != 1) {
          fail("send");
        }
        continue;
      }
      if (static_cast<int>(held_.size()) >= held_max_) {
        auto [id, fence] = std::move(held_.front());
        held_.pop_front();
        const std::string f = std::to_string(fence);
        const char* values[2] = {id.c_str(), f.c_str()};
        if (PQsendQueryPrepared(c_, "complete", 2, values, nullptr, nullptr, 0) != 1) fail("send");
        ++completes_sent_;
      }
      if (PQsendQueryPrepared(c_, "claim", 0, nullptr, nullptr, nullptr, 0) != 1) fail("send");
    }
    send("COMMIT");
    if (PQpipelineSync(c_) != 1) fail("sync");
    // Results in order; a claim's row is a job held from now on.
    for (;;) {
      PGresult* r = PQgetResult(c_);
      if (r == nullptr) {  // the end of one statement's results
        if (PQstatus(c_) == CONNECTION_BAD) fail("connection lost");
        continue;
      }
      const auto st = PQresultStatus(r);
      if (st == PGRES_PIPELINE_SYNC) {
        PQclear(r);
        break;
      }
      if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        const std::string why = PQresultErrorMessage(r);
        PQclear(r);
        throw std::runtime_error("echo-pg --echo-jobs: " + why);
      }
      const int cols = st == PGRES_TUPLES_OK ? PQnfields(r) : 0;
      if (cols >= 2 && std::string(PQfname(r, 1)) == "fence") {
        if (PQntuples(r) == 1) {
          held_.emplace_back(PQgetvalue(r, 0, 0), std::strtoll(PQgetvalue(r, 0, 1), nullptr, 10));
          if (std::string(PQfname(r, cols - 1)) == "completed") {
            completes_done_ += std::strtol(PQgetvalue(r, 0, cols - 1), nullptr, 10);
          }
        } else {
          ++empty_claims_;
        }
      } else if (cols == 1 && std::string(PQfname(r, 0)) == "queue") {
        completes_done_ += PQntuples(r);
      }
      PQclear(r);
    }
  }
  // Claims that found no job, and completes that found no lease: neither
  // may happen in a run that measures what it says.
  long misses() const { return empty_claims_ + (completes_sent_ - completes_done_); }

 private:
  // fenceqd's complete (pg_writes.cpp, kComplete) and claim_next of one job
  // of a queue without settings (kClaimNextFast), their rules spelled out.
  static constexpr const char* kCompleteFenceq =
      "UPDATE jobs SET result = NULL, done = 1, finished = 1000 WHERE id = $1 AND owner = 'w' "
      "AND fence = $2 AND done = 0 AND dead = 0 AND until > 1000 RETURNING queue";
  static constexpr const char* kClaimFenceq =
      "UPDATE jobs SET owner = 'w', until = CASE WHEN max_runtime > 0 THEN LEAST(1030, (1000 + "
      "max_runtime)) ELSE 1030 END, fence = fence + 1, attempts = attempts + 1, progress = NULL, "
      "held = 1, deadline = CASE WHEN max_runtime > 0 THEN (1000 + max_runtime) ELSE 0 END FROM "
      "(SELECT id AS c_id, until > 0 AS c_expired FROM jobs WHERE queue = 'q' AND grp IS NULL AND "
      "done = 0 AND dead = 0 AND until <= 1000 AND not_before <= 1000 AND (max_attempts = 0 OR "
      "attempts < max_attempts) AND fence < 9223372036854775807 AND NOT EXISTS (SELECT 1 FROM "
      "queue_config WHERE queue = 'q') AND NOT EXISTS (SELECT 1 FROM queue_groups WHERE queue = "
      "'q') ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED) c WHERE jobs.id = c.c_id "
      "RETURNING jobs.id, jobs.fence, jobs.attempts, jobs.priority, jobs.seq, CASE WHEN jobs.kids "
      "& 1 <> 0 THEN (SELECT string_agg(octet_length(parent) || ':' || parent, ',' ORDER BY "
      "parent) FROM job_after WHERE child = jobs.id) END, jobs.headers, jobs.payload, "
      "jobs.payload_binary, c.c_expired";
  // The same two on the open schema (bench/pg_schema/open.sql), in pieces:
  // the lease is checked in jobs_open, the owner and fence in jobs_body.
  // kFinishOpen and kTakeOpen run after their CTEs.
  static constexpr const char* kFinishCtesOpen =
      "j AS (SELECT queue, priority, seq FROM jobs_body WHERE id = $1 AND owner = 'w' AND "
      "fence = $2 AND done = 0 AND dead = 0), d AS (DELETE FROM jobs_open o USING j WHERE "
      "o.queue = j.queue AND o.priority = j.priority AND o.seq = j.seq AND o.until > 1000 "
      "RETURNING o.id), f AS (INSERT INTO jobs_finished_at(finished, id) SELECT 1000, id FROM d)";
  static constexpr const char* kFinishOpen =
      "UPDATE jobs_body SET result = NULL, done = 1, finished = 1000 FROM d WHERE jobs_body.id = "
      "d.id RETURNING jobs_body.queue";
  static constexpr const char* kTakeCtesOpen =
      "c AS (SELECT ctid AS c_ctid, until > 0 AS c_expired FROM jobs_open WHERE queue = 'q' "
      "AND until <= 1000 AND not_before <= 1000 ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE "
      "SKIP LOCKED), o AS (UPDATE jobs_open SET until = 1030 FROM c WHERE jobs_open.ctid = "
      "c.c_ctid RETURNING jobs_open.id, c.c_expired)";
  static constexpr const char* kTakeOpen =
      "UPDATE jobs_body SET owner = 'w', fence = fence + 1, attempts = attempts + 1, progress = "
      "NULL FROM o WHERE jobs_body.id = o.id AND (jobs_body.max_attempts = 0 OR "
      "jobs_body.attempts < jobs_body.max_attempts) RETURNING jobs_body.id, jobs_body.fence, "
      "jobs_body.attempts, jobs_body.priority, jobs_body.seq, jobs_body.headers, "
      "jobs_body.payload, jobs_body.payload_binary, o.c_expired";
  static std::string complete_open() {
    return std::string("WITH ") + kFinishCtesOpen + " " + kFinishOpen;
  }
  static std::string claim_open() { return std::string("WITH ") + kTakeCtesOpen + " " + kTakeOpen; }
  // open1: complete_next as one statement, the complete's CTEs then the
  // claim's (one snapshot: the claim cannot see the job just completed,
  // which its lease keeps from being claimable anyway).
  static std::string complete_next_open() {
    return std::string("WITH ") + kFinishCtesOpen + ", u AS (" + kFinishOpen + "), " +
           kTakeCtesOpen + " " + kTakeOpen + ", (SELECT count(*) FROM u) AS completed";
  }

  void prepare(const char* name, const std::string& sql, int params) {
    PGresult* r = PQprepare(c_, name, sql.c_str(), params, nullptr);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) fail(std::string("prepare ") + name);
  }
  void send(const char* sql) {
    if (PQsendQueryParams(c_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0) != 1) fail(sql);
  }
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("echo-pg --echo-jobs: " + what + ": " + PQerrorMessage(c_));
  }

  PGconn* c_;
  bool merged_ = false;
  int held_max_;
  std::deque<std::pair<std::string, std::int64_t>> held_;
  long empty_claims_ = 0;
  long completes_sent_ = 0, completes_done_ = 0;
};
