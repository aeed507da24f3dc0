-- fenceqd's jobs table (made by a sidecar that started on this schema),
-- emptied and given :n jobs of queue q, as enqueue would (seq from jobs_seq).
TRUNCATE jobs;
INSERT INTO jobs(id, queue, payload, payload_binary, priority, created)
  SELECT 'j' || g, 'q', '\x00', true, 0, 0 FROM generate_series(1, :n) g;
VACUUM ANALYZE jobs;
