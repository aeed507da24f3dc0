-- The upgrade corpus: version 0 (make_corpus.py).
CREATE SCHEMA fenceq_corpus;
CREATE TABLE fenceq_corpus.jobs(
  id     text COLLATE "C" PRIMARY KEY,
  owner  text,
  until  double precision NOT NULL DEFAULT 0,
  fence  bigint NOT NULL DEFAULT 0,
  result text,
  done   integer NOT NULL DEFAULT 0
);
INSERT INTO fenceq_corpus.jobs(id, owner, until, fence, result, done) VALUES('ready-a', NULL, 0.0, 0, NULL, 0);
INSERT INTO fenceq_corpus.jobs(id, owner, until, fence, result, done) VALUES('ready-b', NULL, 0.0, 0, NULL, 0);
INSERT INTO fenceq_corpus.jobs(id, owner, until, fence, result, done) VALUES('leased', 'w1', 1800003620.0, 1, NULL, 0);
INSERT INTO fenceq_corpus.jobs(id, owner, until, fence, result, done) VALUES('expired', 'w2', 1800000030.0, 1, NULL, 0);
INSERT INTO fenceq_corpus.jobs(id, owner, until, fence, result, done) VALUES('done', 'w3', 1800000081.0, 1, 'ok', 1);
