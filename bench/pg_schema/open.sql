-- A PostgreSQL schema for fenceq's jobs where a claim and a completion are
-- HOT updates (issue 29; bench/pg_schema/README.md): measured through
-- `fenceq-bench --target echo-pg --echo-jobs open` (bench/echo_jobs.hpp),
-- not used by fenceqd. psql variable :n, the jobs to enqueue (queue q).
DROP TABLE IF EXISTS jobs_body, jobs_open, jobs_finished_at;
-- A job's own row: nothing a claim or a completion changes is indexed, and
-- each page keeps room for the new versions (fillfactor), so both are HOT.
CREATE TABLE jobs_body (
  id text COLLATE "C" PRIMARY KEY, queue text COLLATE "C" NOT NULL, payload bytea,
  payload_binary boolean NOT NULL DEFAULT true, priority bigint NOT NULL DEFAULT 0,
  seq bigint NOT NULL, owner text, fence bigint NOT NULL DEFAULT 0,
  attempts bigint NOT NULL DEFAULT 0, max_attempts bigint NOT NULL DEFAULT 0,
  done integer NOT NULL DEFAULT 0, dead integer NOT NULL DEFAULT 0, result text,
  finished double precision NOT NULL DEFAULT 0, created double precision NOT NULL DEFAULT 0,
  kids integer NOT NULL DEFAULT 0, headers text, progress text) WITH (fillfactor = 70);
-- The open jobs only (claimable, delayed or leased), narrow: a claim's lease
-- end is a HOT update here, a completion deletes the row, and the table stays
-- as small as the backlog, so that VACUUM of it is cheap.
CREATE TABLE jobs_open (
  queue text COLLATE "C" NOT NULL, priority bigint NOT NULL, seq bigint NOT NULL,
  id text COLLATE "C" NOT NULL, until double precision NOT NULL DEFAULT 0,
  not_before double precision NOT NULL DEFAULT 0) WITH (fillfactor = 70);
CREATE UNIQUE INDEX jobs_open_next ON jobs_open(queue, priority DESC, seq);
-- Finished jobs by finishing time, for purges and retention.
CREATE TABLE jobs_finished_at (finished double precision NOT NULL, id text COLLATE "C" NOT NULL);
CREATE INDEX jobs_finished_at_time ON jobs_finished_at(finished);
INSERT INTO jobs_body(id, queue, payload, seq, created)
  SELECT 'j' || g, 'q', '\x00', g, 0 FROM generate_series(1, :n) g;
INSERT INTO jobs_open(queue, priority, seq, id) SELECT 'q', 0, g, 'j' || g FROM generate_series(1, :n) g;
VACUUM ANALYZE jobs_body;
VACUUM ANALYZE jobs_open;
