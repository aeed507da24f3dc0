-- The upgrade corpus: version 22, written through the wire by the fenceqd of commit 48add7d (scenario.py; make_corpus.py --pg).
--
-- PostgreSQL database dump
--

\restrict cTg9PCEUMz4J8kSymmktYDjQ1bE8baw2BQfKIHmxjr9z56g7pLSCKNP5W2EN3mY

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: fenceq_corpus; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA fenceq_corpus;


--
-- Name: fenceq_claim_fair(text, text, double precision, double precision, bigint); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_claim_fair(p_queue text, p_owner text, p_until double precision, p_now double precision, p_max bigint) RETURNS TABLE(id text, fence bigint, attempts bigint, priority bigint, seq bigint, parents text, headers text, steps text, payload bytea, payload_binary boolean, c_expired boolean)
    LANGUAGE plpgsql
    SET enable_sort TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
  v_allowed bigint;
  v_top bigint;
  v_grp text;
  v_head text;
  v_prio bigint;
  v_seq bigint;
  v_head2 text;
  v_prio2 bigint;
  v_seq2 bigint;
  v_best text;
  v_best_grp text;
  v_best_prio bigint;
  v_best_seq bigint;
  v_last_grp text;
  v_taken bigint := 0;
  v_rate bigint;
  v_per double precision;
  v_group_max_leased bigint;
  v_group_rate bigint;
  v_group_per double precision;
  v_group_limited boolean;
  v_at double precision;
  v_i integer;
  v_by_leases boolean;
  v_by_rate boolean;
  v_tk_grp text[] := '{}';
  v_tk_prio bigint[] := '{}';
  v_tk_seq bigint[] := '{}';
  v_ct_grp text[] := '{}';
  v_ct_leased bigint[] := '{}';
  v_ct_logged bigint[] := '{}';
  v_started timestamptz := clock_timestamp();
  v_seen bigint := 0;
  v_open boolean;
BEGIN
  SELECT k.rate, k.per, k.group_max_leased, k.group_rate, k.group_per,
      k.group_max_leased > 0 OR k.group_rate > 0
    INTO v_rate, v_per, v_group_max_leased, v_group_rate, v_group_per, v_group_limited
    FROM queue_config k WHERE k.queue = p_queue;
  v_allowed := COALESCE((SELECT CASE WHEN k.paused <> 0 THEN 0 ELSE LEAST(p_max, LEAST(CASE WHEN k.max_leased > 0 THEN GREATEST(0, k.max_leased - (SELECT count(*) FROM jobs WHERE queue = p_queue AND held = 1 AND done = 0 AND dead = 0 AND until > p_now)) ELSE p_max END, CASE WHEN k.rate > 0 THEN GREATEST(0, k.rate - (SELECT count(*) FROM queue_claims r WHERE r.queue = p_queue AND r.at > p_now - k.per)) ELSE p_max END)) END FROM queue_config k WHERE k.queue = p_queue), p_max);
  IF EXISTS (SELECT 1 FROM jobs WHERE queue = p_queue AND grp IS NULL AND done = 0 AND dead = 0 AND kids >= 0) THEN
    INSERT INTO queue_groups(queue, grp, wake) VALUES (p_queue, '', 0) ON CONFLICT DO NOTHING;
  END IF;
  UPDATE queue_groups g SET wake = 0, held = false FROM (SELECT w.grp FROM queue_groups w
      WHERE w.queue = p_queue AND w.wake > 0 AND w.wake <= p_now ORDER BY w.wake, w.turn, w.grp
      LIMIT 256 FOR UPDATE SKIP LOCKED) d
    WHERE g.queue = p_queue AND g.grp = d.grp;
  v_top := GREATEST((SELECT priority FROM jobs WHERE queue = p_queue AND grp IS NULL AND kids >= 0 AND ((not_before >= 1e15)::int + (kids & 64)) = 0 AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1), (SELECT priority FROM jobs WHERE queue = p_queue AND grp IS NULL AND kids >= 0 AND ((not_before >= 1e15)::int + (kids & 64)) = 1 AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1), (SELECT priority FROM jobs WHERE queue = p_queue AND grp IS NULL AND kids >= 0 AND ((not_before >= 1e15)::int + (kids & 64)) = 64 AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1), (SELECT priority FROM jobs WHERE queue = p_queue AND grp IS NULL AND kids >= 0 AND ((not_before >= 1e15)::int + (kids & 64)) = 65 AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1), (SELECT priority FROM jobs WHERE queue = p_queue AND grp IS NOT NULL AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1));
  WHILE v_top IS NOT NULL AND v_taken < v_allowed LOOP
    EXIT WHEN v_taken >= 16 AND clock_timestamp() - v_started >= interval '2 milliseconds';
    v_best := NULL;
    FOR v_grp IN SELECT g.grp FROM queue_groups g WHERE g.queue = p_queue AND g.wake = 0
        ORDER BY g.turn, g.grp LOOP
      v_seen := v_seen + 1;
      EXIT WHEN v_seen % 16 = 0 AND v_seen >= 256
        AND clock_timestamp() - v_started >= interval '4 milliseconds';
      IF v_grp <> '' AND v_group_limited THEN
        v_i := array_position(v_ct_grp, v_grp);
        IF v_i IS NULL THEN
          v_ct_grp := v_ct_grp || v_grp;
          v_ct_leased := v_ct_leased || CASE WHEN v_group_max_leased > 0 THEN (SELECT count(*)
            FROM (SELECT 1 FROM jobs WHERE queue = p_queue AND grp = v_grp AND held = 1 AND done = 0 AND dead = 0 AND until > p_now LIMIT v_group_max_leased) n) ELSE 0 END;
          v_ct_logged := v_ct_logged || CASE WHEN v_group_rate > 0 THEN (SELECT count(*)
            FROM (SELECT 1 FROM group_claims c WHERE c.queue = p_queue AND c.grp = v_grp AND c.at > p_now - v_group_per LIMIT v_group_rate) n) ELSE 0 END;
          v_i := cardinality(v_ct_grp);
        END IF;
        
        v_by_leases := v_group_max_leased > 0 AND v_ct_leased[v_i] >= v_group_max_leased;
        v_by_rate := v_group_rate > 0 AND v_ct_logged[v_i] >= v_group_rate;
        IF v_by_leases OR v_by_rate THEN
          v_at := GREATEST(CASE WHEN v_by_leases THEN (SELECT MIN(until + 0) FROM jobs WHERE queue = p_queue AND grp = v_grp AND held = 1 AND done = 0 AND dead = 0 AND until > p_now) END,
            CASE WHEN v_by_rate THEN (SELECT MIN(c.at) FROM group_claims c WHERE c.queue = p_queue AND c.grp = v_grp AND c.at > p_now - v_group_per) + v_group_per END);
          IF v_at > p_now THEN
            UPDATE queue_groups g SET wake = v_at, held = true
              WHERE g.queue = p_queue AND g.grp = v_grp;
          END IF;
        END IF;

        IF v_by_leases OR v_by_rate THEN
          CONTINUE;
        END IF;
      END IF;

      v_i := CASE WHEN v_grp = '' THEN NULL ELSE array_position(v_tk_grp, v_grp) END;
      IF v_grp = '' THEN
        SELECT j.id, j.priority, j.seq INTO v_head, v_prio, v_seq FROM jobs j WHERE j.queue = p_queue AND j.grp IS NULL AND kids >= 0 AND ((not_before >= 1e15)::int + (kids & 64)) = 0 AND done = 0 AND dead = 0 AND until <= p_now AND not_before <= p_now AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807 AND (expires IS NULL OR expires > p_now) ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED;
        SELECT j.id, j.priority, j.seq INTO v_head2, v_prio2, v_seq2 FROM jobs j WHERE j.id IN (SELECT id FROM jobs WHERE queue = p_queue AND grp IS NULL AND done = 0 AND dead = 0 AND until <= p_now AND not_before <= p_now AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807 AND (expires IS NULL OR expires > p_now) AND (kids & 64) <> 0 AND GREATEST(until, not_before) <= p_now ORDER BY GREATEST(until, not_before) LIMIT 256) AND j.queue = p_queue AND done = 0 AND dead = 0 AND until <= p_now AND not_before <= p_now AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807 AND (expires IS NULL OR expires > p_now) ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED;
        IF v_head2 IS NOT NULL AND (v_head IS NULL OR v_prio2 > v_prio OR
            (v_prio2 = v_prio AND v_seq2 < v_seq)) THEN
          v_head := v_head2;
          v_prio := v_prio2;
          v_seq := v_seq2;
        END IF;
      ELSIF v_i IS NULL THEN
        SELECT j.id, j.priority, j.seq INTO v_head, v_prio, v_seq FROM jobs j WHERE j.queue = p_queue AND j.grp = v_grp AND done = 0 AND dead = 0 AND until <= p_now AND not_before <= p_now AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807 AND (expires IS NULL OR expires > p_now) ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED;
      ELSE
        SELECT j.id, j.priority, j.seq INTO v_head, v_prio, v_seq FROM jobs j WHERE j.queue = p_queue AND j.grp = v_grp AND j.priority = v_tk_prio[v_i] AND j.seq > v_tk_seq[v_i] AND done = 0 AND dead = 0 AND until <= p_now AND not_before <= p_now AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807 AND (expires IS NULL OR expires > p_now) ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
          SELECT j.id, j.priority, j.seq INTO v_head, v_prio, v_seq FROM jobs j WHERE j.queue = p_queue AND j.grp = v_grp AND j.priority < v_tk_prio[v_i] AND done = 0 AND dead = 0 AND until <= p_now AND not_before <= p_now AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807 AND (expires IS NULL OR expires > p_now) ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED;
        END IF;
      END IF;
      IF v_head IS NULL THEN
        IF v_grp = '' THEN
          v_open := EXISTS(SELECT 1 FROM jobs WHERE queue = p_queue AND grp IS NULL AND done = 0
            AND dead = 0 AND kids >= 0);
        ELSE
          v_open := EXISTS(SELECT 1 FROM jobs WHERE queue = p_queue AND grp = v_grp AND done = 0
            AND dead = 0);
        END IF;
        IF NOT v_open THEN
          PERFORM 1 FROM queue_groups g WHERE g.queue = p_queue AND g.grp = v_grp
            FOR UPDATE SKIP LOCKED;
          IF FOUND THEN
        IF v_grp = '' THEN
          v_open := EXISTS(SELECT 1 FROM jobs WHERE queue = p_queue AND grp IS NULL AND done = 0
            AND dead = 0 AND kids >= 0);
        ELSE
          v_open := EXISTS(SELECT 1 FROM jobs WHERE queue = p_queue AND grp = v_grp AND done = 0
            AND dead = 0);
        END IF;
            IF NOT v_open THEN
              DELETE FROM queue_groups g WHERE g.queue = p_queue AND g.grp = v_grp;
            END IF;
          END IF;
        ELSIF v_grp <> '' THEN
          SELECT COALESCE(MIN(GREATEST(until, not_before)), 'Infinity')
            INTO v_at FROM jobs WHERE queue = p_queue AND grp = v_grp AND done = 0 AND dead = 0
              AND not_before < 1e15 AND (max_attempts = 0 OR attempts < max_attempts);
          IF v_at > p_now THEN
            UPDATE queue_groups g SET wake = v_at, held = false
              WHERE g.queue = p_queue AND g.grp = v_grp;
          END IF;
        END IF;
        CONTINUE;
      END IF;

      IF v_best IS NULL OR v_prio > v_best_prio THEN
        PERFORM 1 FROM queue_groups g WHERE g.queue = p_queue AND g.grp = v_grp
          FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
          v_best := v_head;
          v_best_grp := v_grp;
          v_best_prio := v_prio;
          v_best_seq := v_seq;
        END IF;
      END IF;
      EXIT WHEN v_best IS NOT NULL AND v_best_prio >= v_top;
    END LOOP;
    EXIT WHEN v_best IS NULL;
    RETURN QUERY UPDATE jobs SET owner = p_owner, until = CASE WHEN max_runtime > 0 THEN LEAST(p_until, (p_now + max_runtime)) ELSE p_until END, fence = fence + 1, attempts = attempts + 1, progress = NULL, held = 1, deadline = CASE WHEN max_runtime > 0 THEN (p_now + max_runtime) ELSE 0 END, kids = kids | 64 FROM (SELECT until > 0 AS e FROM jobs WHERE id = v_best) o
      WHERE jobs.id = v_best RETURNING jobs.id, jobs.fence, jobs.attempts, jobs.priority,
        jobs.seq, CASE WHEN jobs.kids & 2 <> 0 THEN (SELECT string_agg(octet_length(parent) || ':' || parent, '' ORDER BY parent) FROM job_after WHERE child = jobs.id) END, jobs.headers, CASE WHEN jobs.kids & 128 <> 0 THEN (SELECT string_agg(octet_length(s.step)::text || ':' || s.step || CASE WHEN s.value IS NULL THEN 'n' WHEN s.is_bin THEN 'b' ELSE 's' END || COALESCE(encode(s.value, 'hex'), '') || ';', '') FROM job_steps s WHERE s.id = jobs.id) END, jobs.payload,
        jobs.payload_binary, o.e;
    IF v_best_grp IS DISTINCT FROM v_last_grp THEN
      UPDATE queue_groups g SET turn = nextval('queue_groups_turn_seq')
        WHERE g.queue = p_queue AND g.grp = v_best_grp;
      v_last_grp := v_best_grp;
    END IF;
    IF v_best_grp <> '' THEN
      IF COALESCE(v_group_rate, 0) > 0 THEN
        IF array_position(v_tk_grp, v_best_grp) IS NULL THEN
          DELETE FROM group_claims c WHERE c.queue = p_queue AND c.grp = v_best_grp
            AND c.at <= p_now - v_group_per - 60.000000;
        END IF;
        INSERT INTO group_claims(queue, grp, at) VALUES (p_queue, v_best_grp, p_now);
      END IF;
      v_i := array_position(v_tk_grp, v_best_grp);
      IF v_i IS NULL THEN
        v_tk_grp := v_tk_grp || v_best_grp;
        v_tk_prio := v_tk_prio || v_best_prio;
        v_tk_seq := v_tk_seq || v_best_seq;
      ELSE
        v_tk_prio[v_i] := v_best_prio;
        v_tk_seq[v_i] := v_best_seq;
      END IF;
      v_i := array_position(v_ct_grp, v_best_grp);
      IF v_i IS NOT NULL THEN
        v_ct_leased[v_i] := v_ct_leased[v_i] + 1;
        IF COALESCE(v_group_rate, 0) > 0 THEN
          v_ct_logged[v_i] := v_ct_logged[v_i] + 1;
        END IF;
        v_grp := v_best_grp;
        v_by_leases := v_group_max_leased > 0 AND v_ct_leased[v_i] >= v_group_max_leased;
        v_by_rate := v_group_rate > 0 AND v_ct_logged[v_i] >= v_group_rate;
        IF v_by_leases OR v_by_rate THEN
          v_at := GREATEST(CASE WHEN v_by_leases THEN (SELECT MIN(until + 0) FROM jobs WHERE queue = p_queue AND grp = v_grp AND held = 1 AND done = 0 AND dead = 0 AND until > p_now) END,
            CASE WHEN v_by_rate THEN (SELECT MIN(c.at) FROM group_claims c WHERE c.queue = p_queue AND c.grp = v_grp AND c.at > p_now - v_group_per) + v_group_per END);
          IF v_at > p_now THEN
            UPDATE queue_groups g SET wake = v_at, held = true
              WHERE g.queue = p_queue AND g.grp = v_grp;
          END IF;
        END IF;

      END IF;
    END IF;

    v_taken := v_taken + 1;
  END LOOP;
  IF COALESCE(v_rate, 0) > 0 AND v_taken > 0 THEN
    DELETE FROM queue_claims r WHERE r.queue = p_queue
      AND r.at <= p_now - v_per - 60.000000;
    INSERT INTO queue_claims(queue, at) SELECT p_queue, p_now FROM generate_series(1, v_taken);
  END IF;
END
$$;


--
-- Name: fenceq_enqueue(text, text, text, bigint, double precision, bigint, text, double precision, jsonb, bytea); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_enqueue(p_id text, p_queue text DEFAULT 'default'::text, p_payload text DEFAULT NULL::text, p_priority bigint DEFAULT 0, p_delay double precision DEFAULT 0, p_max_attempts bigint DEFAULT 25, p_grp text DEFAULT NULL::text, p_max_runtime double precision DEFAULT NULL::double precision, p_headers jsonb DEFAULT NULL::jsonb, p_payload_bytes bytea DEFAULT NULL::bytea) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'fenceq_corpus', 'pg_temp'
    SET "fenceq.events" TO 'off'
    AS $_$
#variable_conflict use_column
DECLARE
  v_now double precision;
  v_headers text;
  v_kept bigint;
BEGIN
  IF p_id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: id must not be NULL';
  END IF;
  IF octet_length(p_id) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: id is longer than 1024 bytes';
  END IF;
  IF p_id ~ '.@[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z$' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: id: NAME@YYYY-MM-DDTHH:MMZ is a periodic job''s id, the schedules'' alone';
  END IF;
  IF p_queue IS NULL OR p_queue = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: queue must not be empty';
  END IF;
  IF octet_length(p_queue) > 256 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: queue is longer than 256 bytes';
  END IF;
  IF p_payload IS NOT NULL AND p_payload_bytes IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: give payload or payload_bytes, not both';
  END IF;
  IF COALESCE(octet_length(p_payload), octet_length(p_payload_bytes), 0) > 262144 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: payload is longer than 262144 bytes';
  END IF;
  IF p_priority IS NULL OR p_priority < -2147483648 OR p_priority > 2147483647 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: priority must be an integer from -2^31 to 2^31-1';
  END IF;
  IF p_delay IS NULL OR NOT (p_delay >= 0 AND p_delay <= 1e9) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: delay must be from 0 to 1e9 seconds';
  END IF;
  IF p_max_attempts IS NULL OR p_max_attempts < 0 OR p_max_attempts > 1000000 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: max_attempts must be from 0 (no limit) to 1000000';
  END IF;
  IF p_grp = '' OR octet_length(p_grp) > 256 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: grp must be 1 to 256 bytes';
  END IF;
  IF p_max_runtime IS NOT NULL AND NOT (p_max_runtime > 0 AND p_max_runtime <= 1e9) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: max_runtime must be > 0 and at most 1e9 seconds';
  END IF;
  IF p_headers IS NOT NULL AND jsonb_typeof(p_headers) <> 'object' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: headers must be a JSON object of strings';
  END IF;
  IF EXISTS (SELECT 1 FROM jsonb_each(p_headers) h WHERE h.key = '' OR jsonb_typeof(h.value) <> 'string') THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: headers must be a JSON object of strings with non-empty keys';
  END IF;
  IF (SELECT COALESCE(sum(octet_length(h.key) + octet_length(h.value)), 0) FROM jsonb_each_text(p_headers) h) > 4096 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: headers hold more than 4096 bytes of keys and values';
  END IF;

  v_now := GREATEST(extract(epoch from clock_timestamp())::float8,
    COALESCE((SELECT m.value FROM fenceq_meta m WHERE m.key = 'clock_high_water'), 0));
  -- rows::headers_text: each key and value as BYTES:TEXT, in byte order of the keys.
  SELECT string_agg(octet_length(h.key) || ':' || h.key || octet_length(h.value) || ':' || h.value,
      '' ORDER BY h.key COLLATE "C")
    INTO v_headers FROM jsonb_each_text(p_headers) h;
  INSERT INTO jobs(id, queue, payload, payload_binary, priority, not_before, max_attempts, created,
      fence, grp, max_runtime, headers)
    VALUES (p_id, p_queue, COALESCE(convert_to(p_payload, 'UTF8'), p_payload_bytes),
      p_payload IS NULL, p_priority, CASE WHEN p_delay > 0 THEN v_now + p_delay ELSE 0 END,
      p_max_attempts, v_now, COALESCE((SELECT f.fence FROM purged_fences f WHERE f.id = p_id), 0),
      p_grp, COALESCE(p_max_runtime, 0), v_headers)
    ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  -- As kUnpurge: a purge another transaction committed after the INSERT's
  -- snapshot leaves its kept fence, which the job takes (a fence never goes back).
  DELETE FROM purged_fences f WHERE f.id = p_id RETURNING f.fence INTO v_kept;
  IF FOUND THEN
    UPDATE jobs SET fence = v_kept WHERE id = p_id AND fence < v_kept;
  END IF;
  IF p_grp IS NOT NULL THEN
    INSERT INTO queue_groups(queue, grp) VALUES (p_queue, p_grp)
      ON CONFLICT (queue, grp) DO UPDATE SET turn = queue_groups.turn;
    PERFORM pg_notify('fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16) || '_g', p_queue);
  END IF;
  PERFORM pg_notify('fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16), p_queue);
  RETURN true;
END
$_$;


--
-- Name: FUNCTION fenceq_enqueue(p_id text, p_queue text, p_payload text, p_priority bigint, p_delay double precision, p_max_attempts bigint, p_grp text, p_max_runtime double precision, p_headers jsonb, p_payload_bytes bytea); Type: COMMENT; Schema: fenceq_corpus; Owner: -
--

COMMENT ON FUNCTION fenceq_corpus.fenceq_enqueue(p_id text, p_queue text, p_payload text, p_priority bigint, p_delay double precision, p_max_attempts bigint, p_grp text, p_max_runtime double precision, p_headers jsonb, p_payload_bytes bytea) IS 'SECURITY DEFINER: runs with the rights of fenceq''s sidecars. What the caller cannot influence: its search_path is pinned (fenceq''s schema, then pg_temp last), so no table, function or operator of the caller''s temporary schema is resolved; it names no relation in pg_temp; fenceq.events is forced off while it runs, so the events trigger, which writes into the session''s pg_temp.fenceq_events, never fires on its behalf (and that trigger also requires the session''s login role to be a member of the current role); its arguments are checked against the protocol''s limits (SQLSTATE 22023) before anything is written; the job''s times come from the database clock, not the caller. The caller can only add a job, as enqueue would.';


--
-- Name: fenceq_enqueue_after(text, text, bytea, boolean, bigint, double precision, bigint, double precision, text, text[], boolean, double precision, double precision, text, double precision); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_enqueue_after(p_id text, p_queue text, p_payload bytea, p_binary boolean, p_priority bigint, p_not_before double precision, p_max_attempts bigint, p_now double precision, p_grp text, p_parents text[], p_run boolean, p_wait double precision, p_max_runtime double precision, p_headers text, p_expires double precision) RETURNS TABLE(fence bigint)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
  v_fence bigint;
  v_parent text;
  v_state integer;
  v_waiting bigint := 0;
  v_failed text;
  v_met boolean;
BEGIN
  INSERT INTO jobs(id, queue, payload, payload_binary, priority, not_before, max_attempts, created,
      fence, grp, kids, max_runtime, headers, expires)
    VALUES (p_id, p_queue, p_payload, p_binary, p_priority, p_not_before, p_max_attempts, p_now,
      COALESCE((SELECT f.fence FROM purged_fences f WHERE f.id = p_id), 0), p_grp,
      CASE WHEN p_not_before > p_now THEN 66 ELSE 2 END, p_max_runtime,
      p_headers, p_expires)
    ON CONFLICT (id) DO NOTHING RETURNING jobs.fence INTO v_fence;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  FOREACH v_parent IN ARRAY p_parents LOOP
    UPDATE jobs j SET kids = j.kids | 1 WHERE j.id = v_parent
      RETURNING CASE WHEN j.done = 1 THEN 1 WHEN j.cancelled = 1 THEN 3 WHEN j.dead = 1 THEN 2
        ELSE 0 END INTO v_state;
    IF NOT FOUND THEN
      -- Purged: as it ended (version 16), so a failed one cancels the job.
      v_state := COALESCE((SELECT f.ended FROM purged_fences f WHERE f.id = v_parent), 1);
    END IF;
    v_met := v_state = 1 OR (v_state >= 2 AND p_run);
    IF NOT v_met AND v_state = 0 THEN
      v_waiting := v_waiting + 1;
    END IF;
    IF NOT v_met AND v_state >= 2 AND v_failed IS NULL THEN
      v_failed := 'parent ' || v_parent || CASE WHEN v_state = 3 THEN ' cancelled' ELSE ' dead' END;
    END IF;
    INSERT INTO job_after(parent, child, met) VALUES (v_parent, p_id, v_met::int)
      ON CONFLICT DO NOTHING;
  END LOOP;
  INSERT INTO job_waits(child, blocked, after_run, wait) VALUES (p_id, v_waiting, p_run::int, p_wait)
    ON CONFLICT (child) DO UPDATE SET blocked = EXCLUDED.blocked, after_run = EXCLUDED.after_run,
      wait = EXCLUDED.wait;
  IF v_waiting > 0 THEN
    UPDATE jobs SET not_before = 1e15 WHERE id = p_id;
  END IF;
  IF v_failed IS NOT NULL THEN
    UPDATE jobs SET owner = NULL, until = 0, dead = 1, cancelled = 1, finished = p_now, fence = CASE WHEN fence < 9223372036854775807 THEN fence + 1 ELSE fence END, error = v_failed
      WHERE id = p_id AND done = 0 AND dead = 0;
  ELSIF v_waiting = 0 THEN
    PERFORM pg_notify('fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16), p_queue);
  END IF;
  fence := v_fence;
  RETURN NEXT;
END
$$;


--
-- Name: fenceq_group_freed(); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_group_freed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  UPDATE queue_groups g SET wake = 0, held = false
    WHERE g.queue = OLD.queue AND g.grp = OLD.grp AND g.wake > 0 AND g.held;
  RETURN NULL;
END
$$;


--
-- Name: fenceq_group_sooner(); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_group_sooner() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  UPDATE queue_groups g SET wake = CASE WHEN NEW.not_before >= 1e15 OR NOT (NEW.max_attempts = 0 OR NEW.attempts < NEW.max_attempts) THEN 'Infinity'::float8 ELSE GREATEST(NEW.until, NEW.not_before) END
    WHERE g.queue = NEW.queue AND g.grp = NEW.grp AND g.wake > CASE WHEN NEW.not_before >= 1e15 OR NOT (NEW.max_attempts = 0 OR NEW.attempts < NEW.max_attempts) THEN 'Infinity'::float8 ELSE GREATEST(NEW.until, NEW.not_before) END;
  RETURN NULL;
END
$$;


--
-- Name: fenceq_groups_joined(); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_groups_joined() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  UPDATE queue_groups g SET wake = n.at FROM (SELECT j.queue, j.grp, MIN(CASE WHEN j.not_before >= 1e15 OR NOT (j.max_attempts = 0 OR j.attempts < j.max_attempts) THEN 'Infinity'::float8 ELSE GREATEST(j.until, j.not_before) END) AS at
      FROM fenceq_new j WHERE j.grp IS NOT NULL AND j.done = 0 AND j.dead = 0
      GROUP BY j.queue, j.grp) n
    WHERE g.queue = n.queue AND g.grp = n.grp AND g.wake > n.at;
  RETURN NULL;
END
$$;


--
-- Name: fenceq_groups_settings(); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_groups_settings() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  UPDATE queue_groups g SET wake = 0, held = false
    WHERE g.queue = CASE WHEN TG_OP = 'DELETE' THEN OLD.queue ELSE NEW.queue END
      AND g.wake > 0 AND g.held;
  RETURN NULL;
END
$$;


--
-- Name: fenceq_recount(); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_recount() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_blocked bigint;
BEGIN
  UPDATE job_after a SET met = COALESCE((SELECT (p.done = 1 OR (p.dead = 1 AND w.after_run = 1))::int
    FROM jobs p, job_waits w WHERE p.id = a.parent AND w.child = a.child),
    (SELECT (f.ended = 1 OR (f.ended >= 2 AND w.after_run = 1))::int
    FROM purged_fences f, job_waits w WHERE f.id = a.parent AND w.child = a.child), 1)
    WHERE a.child = NEW.id;
  UPDATE job_waits w SET blocked = (SELECT count(*) FROM job_after a WHERE a.child = NEW.id AND a.met = 0)
    WHERE w.child = NEW.id RETURNING w.blocked INTO v_blocked;
  IF FOUND AND v_blocked > 0 THEN
    UPDATE jobs SET not_before = 1e15 WHERE id = NEW.id;
  END IF;
  RETURN NULL;
END
$$;


--
-- Name: fenceq_settle(); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_settle() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF pg_catalog.pg_trigger_depth() > 1
     OR pg_catalog.current_setting('fenceq.settling', true) = 'on' THEN
    RETURN NULL;
  END IF;
  PERFORM fenceq_settle_walk(NEW.id, CASE WHEN NEW.done = 1 THEN 1 WHEN NEW.cancelled = 1 THEN 3
    ELSE 2 END, '', NEW.finished);
  RETURN NULL;
END
$$;


--
-- Name: fenceq_settle_step(double precision, bigint, double precision); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_settle_step(p_now double precision, p_chunk bigint, p_ms double precision, OUT changed bigint, OUT more boolean) RETURNS record
    LANGUAGE plpgsql
    SET enable_sort TO 'off'
    SET lock_timeout TO '200ms'
    AS $$
DECLARE
  v_end timestamptz := pg_catalog.clock_timestamp() + make_interval(secs => p_ms / 1000);
  v_parent text;
  v_how integer;
  v_to text;
  v_state integer;
BEGIN
  -- Its COMMIT does not wait for the WAL's flush: lost in a crash, the step
  -- is done again from settle_pending, and any later commit that saw what
  -- it did (a claim of a child it made ready) flushes it first.
  PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
  changed := 0;
  more := false;
  LOOP
    IF pg_catalog.clock_timestamp() >= v_end THEN
      more := true;
      EXIT;
    END IF;
    SELECT p.parent, p.how, p.settled_to INTO v_parent, v_how, v_to FROM settle_pending p
      ORDER BY p.n LIMIT 1 FOR UPDATE SKIP LOCKED;
    EXIT WHEN NOT FOUND;
    DELETE FROM settle_pending WHERE parent = v_parent;
    changed := changed + 1;
    SELECT CASE WHEN j.done = 1 THEN 1 WHEN j.cancelled = 1 THEN 3 WHEN j.dead = 1 THEN 2 ELSE 0 END
      INTO v_state FROM jobs j WHERE j.id = v_parent;
    IF NOT FOUND THEN
      v_state := v_how;
    END IF;
    CONTINUE WHEN v_state = 0;
    PERFORM pg_catalog.set_config('fenceq.settle_left', p_chunk::text, true);
    changed := changed + fenceq_settle_walk(v_parent, v_state, v_to, p_now, v_end);
  END LOOP;
END
$$;


--
-- Name: fenceq_settle_walk(text, integer, text, double precision, timestamp with time zone); Type: FUNCTION; Schema: fenceq_corpus; Owner: -
--

CREATE FUNCTION fenceq_corpus.fenceq_settle_walk(p_parent text, p_how integer, p_to text, p_now double precision, p_until timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET enable_sort TO 'off'
    AS $$
DECLARE
  v_left bigint := COALESCE(NULLIF(pg_catalog.current_setting('fenceq.settle_left', true), '')::bigint,
                            100);
  v_met_n bigint := 0;
  v_parents text[] := ARRAY[p_parent];
  v_hows integer[] := ARRAY[p_how];
  v_tos text[] := ARRAY[p_to];
  v_k integer;
  v_parent text;
  v_how integer;
  v_to text;
  v_last text;
  v_read bigint;
  v_take bigint;
  v_children text[];
  v_more text[];
  v_queues text[];
  v_n bigint;
  v_queue text;
  v_now double precision := p_now;
BEGIN
  PERFORM pg_catalog.set_config('fenceq.settling', 'on', true);
  WHILE cardinality(v_parents) > 0 AND v_left > 0
      AND (p_until IS NULL OR pg_catalog.clock_timestamp() < p_until) LOOP
    v_k := cardinality(v_parents);
    v_parent := v_parents[v_k];
    v_how := v_hows[v_k];
    v_to := v_tos[v_k];
    v_parents := v_parents[1:v_k - 1];
    v_hows := v_hows[1:v_k - 1];
    v_tos := v_tos[1:v_k - 1];
    -- A page: the next edges, met or not (each read counts), then those
    -- of them not met yet, met by this transaction.
    v_take := LEAST(v_left, 16);
    SELECT count(*), max(e.child) INTO v_read, v_last FROM (SELECT a.child FROM job_after a
      WHERE a.parent = v_parent AND a.child > v_to ORDER BY a.child LIMIT v_take) e;
    IF v_read = 0 THEN
      CONTINUE;
    END IF;
    v_left := v_left - v_read;
    IF v_read >= v_take THEN
      -- Its next page, if any: after the children this one cancels.
      v_parents := v_parents || v_parent;
      v_hows := v_hows || v_how;
      v_tos := v_tos || v_last;
    END IF;
    WITH m AS (UPDATE job_after a SET met = 1 WHERE a.parent = v_parent AND a.child > v_to
                 AND a.child <= v_last AND a.met = 0 RETURNING a.child)
      SELECT array_agg(m.child ORDER BY m.child) INTO v_children FROM m;
    v_met_n := v_met_n + COALESCE(cardinality(v_children), 0);
    CONTINUE WHEN v_children IS NULL;
    -- Done: each child loses a blocking parent (set-based, a page at a
    -- time; rows taken in id order through the primary keys).
    IF v_how = 1 THEN
      WITH w AS (
        UPDATE job_waits w SET blocked = w.blocked - 1
          WHERE w.child = ANY(v_children) AND w.blocked > 0 AND true
          RETURNING w.child, w.blocked, w.wait),
      r AS (
        UPDATE jobs j SET not_before = v_now + w.wait FROM w
          WHERE j.id = w.child AND w.blocked = 0 AND j.done = 0 AND j.dead = 0
          RETURNING j.queue)
      SELECT array_agg(DISTINCT r.queue) INTO v_queues FROM r;
      FOREACH v_queue IN ARRAY COALESCE(v_queues, '{}') LOOP
        PERFORM pg_notify('fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16) || '_u', v_queue);
      END LOOP;
      CONTINUE;
    END IF;
    -- Dead or cancelled: each child still blocked and unfinished is
    -- cancelled, and settled in turn if others wait for it; ...
    WITH c AS (
      UPDATE jobs j SET owner = NULL, until = 0, dead = 1, cancelled = 1, finished = v_now, fence = CASE WHEN fence < 9223372036854775807 THEN fence + 1 ELSE fence END,
        error = 'parent ' || v_parent || CASE WHEN v_how = 3 THEN ' cancelled' ELSE ' dead' END
        FROM job_waits w
        WHERE j.id = ANY(v_children) AND j.done = 0 AND j.dead = 0 AND w.child = j.id
          AND w.after_run = 0 AND w.blocked > 0
        RETURNING j.id, j.kids)
      SELECT count(*), array_agg(c.id ORDER BY c.id DESC) FILTER (WHERE (c.kids & 1) <> 0)
        INTO v_n, v_more FROM c;
    v_parents := v_parents || COALESCE(v_more, '{}');
    v_hows := v_hows || array_fill(3, ARRAY[COALESCE(cardinality(v_more), 0)]);
    v_tos := v_tos || array_fill(''::text, ARRAY[COALESCE(cardinality(v_more), 0)]);
    -- ... and one with after_failure "run" loses a blocking parent.
    IF v_n < cardinality(v_children) THEN
      WITH w AS (
        UPDATE job_waits w SET blocked = w.blocked - 1
          WHERE w.child = ANY(v_children) AND w.blocked > 0 AND w.after_run = 1 AND EXISTS(SELECT 1 FROM jobs j WHERE j.id = w.child AND j.done = 0 AND j.dead = 0)
          RETURNING w.child, w.blocked, w.wait),
      r AS (
        UPDATE jobs j SET not_before = v_now + w.wait FROM w
          WHERE j.id = w.child AND w.blocked = 0 AND j.done = 0 AND j.dead = 0
          RETURNING j.queue)
      SELECT array_agg(DISTINCT r.queue) INTO v_queues FROM r;
      FOREACH v_queue IN ARRAY COALESCE(v_queues, '{}') LOOP
        PERFORM pg_notify('fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16) || '_u', v_queue);
      END LOOP;
    END IF;
  END LOOP;
  FOR v_k IN 1 .. COALESCE(cardinality(v_parents), 0) LOOP
    INSERT INTO settle_pending(parent, how, settled_to) VALUES (v_parents[v_k], v_hows[v_k], v_tos[v_k])
      ON CONFLICT (parent) DO UPDATE SET how = EXCLUDED.how, settled_to = EXCLUDED.settled_to;
  END LOOP;
  PERFORM pg_catalog.set_config('fenceq.settle_left', GREATEST(v_left, 0)::text, true);
  PERFORM pg_catalog.set_config('fenceq.settling', 'off', true);
  RETURN v_met_n;
END
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: fenceq_meta; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.fenceq_meta (
    key text NOT NULL,
    value double precision
);


--
-- Name: fenceq_schema_version; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.fenceq_schema_version (
    version integer NOT NULL,
    applied timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: group_claims; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.group_claims (
    queue text NOT NULL COLLATE pg_catalog."C",
    grp text NOT NULL COLLATE pg_catalog."C",
    at double precision NOT NULL
);


--
-- Name: job_after; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.job_after (
    parent text NOT NULL COLLATE pg_catalog."C",
    child text NOT NULL COLLATE pg_catalog."C",
    met integer DEFAULT 0 NOT NULL
);


--
-- Name: job_steps; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.job_steps (
    id text NOT NULL COLLATE pg_catalog."C",
    step text NOT NULL COLLATE pg_catalog."C",
    value bytea,
    is_bin boolean NOT NULL
);


--
-- Name: job_suspends; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.job_suspends (
    id text NOT NULL COLLATE pg_catalog."C",
    token text NOT NULL COLLATE pg_catalog."C",
    timeout double precision NOT NULL,
    fail boolean NOT NULL
);


--
-- Name: job_waits; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.job_waits (
    child text NOT NULL COLLATE pg_catalog."C",
    blocked bigint NOT NULL,
    after_run integer NOT NULL,
    wait double precision NOT NULL
);


--
-- Name: jobs; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.jobs (
    id text NOT NULL COLLATE pg_catalog."C",
    owner text,
    until double precision DEFAULT 0 NOT NULL,
    fence bigint DEFAULT 0 NOT NULL,
    result text,
    done integer DEFAULT 0 NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL COLLATE pg_catalog."C",
    payload bytea,
    payload_binary boolean DEFAULT true NOT NULL,
    priority bigint DEFAULT 0 NOT NULL,
    not_before double precision DEFAULT 0 NOT NULL,
    attempts bigint DEFAULT 0 NOT NULL,
    max_attempts bigint DEFAULT 0 NOT NULL,
    dead integer DEFAULT 0 NOT NULL,
    error text,
    seq bigint NOT NULL,
    created double precision DEFAULT 0 NOT NULL,
    finished double precision DEFAULT 0 NOT NULL,
    cancelled integer DEFAULT 0 NOT NULL,
    progress text,
    held integer DEFAULT 0 NOT NULL,
    ukey text COLLATE pg_catalog."C",
    grp text COLLATE pg_catalog."C",
    kids integer DEFAULT 0 NOT NULL,
    max_runtime double precision DEFAULT 0 NOT NULL,
    deadline double precision DEFAULT 0 NOT NULL,
    headers text,
    expires double precision
);


--
-- Name: jobs_seq; Type: SEQUENCE; Schema: fenceq_corpus; Owner: -
--

CREATE SEQUENCE fenceq_corpus.jobs_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: jobs_seq; Type: SEQUENCE OWNED BY; Schema: fenceq_corpus; Owner: -
--

ALTER SEQUENCE fenceq_corpus.jobs_seq OWNED BY fenceq_corpus.jobs.seq;


--
-- Name: purged_fences; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.purged_fences (
    id text NOT NULL COLLATE pg_catalog."C",
    fence bigint NOT NULL,
    ended integer DEFAULT 1 NOT NULL
);


--
-- Name: queue_claims; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.queue_claims (
    queue text NOT NULL COLLATE pg_catalog."C",
    at double precision NOT NULL
);


--
-- Name: queue_config; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.queue_config (
    queue text NOT NULL COLLATE pg_catalog."C",
    paused integer DEFAULT 0 NOT NULL,
    max_leased bigint DEFAULT 0 NOT NULL,
    rate bigint DEFAULT 0 NOT NULL,
    per double precision DEFAULT 1 NOT NULL,
    group_max_leased bigint DEFAULT 0 NOT NULL,
    group_rate bigint DEFAULT 0 NOT NULL,
    group_per double precision DEFAULT 1 NOT NULL
);


--
-- Name: queue_groups; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.queue_groups (
    queue text NOT NULL COLLATE pg_catalog."C",
    grp text NOT NULL COLLATE pg_catalog."C",
    turn bigint DEFAULT 0 NOT NULL,
    wake double precision DEFAULT 0 NOT NULL,
    held boolean DEFAULT false NOT NULL
);


--
-- Name: queue_groups_turn_seq; Type: SEQUENCE; Schema: fenceq_corpus; Owner: -
--

CREATE SEQUENCE fenceq_corpus.queue_groups_turn_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: queue_retention; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.queue_retention (
    queue text NOT NULL COLLATE pg_catalog."C",
    keep_done double precision,
    keep_dead double precision,
    keep_cancelled double precision
);


--
-- Name: schedules; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.schedules (
    name text NOT NULL COLLATE pg_catalog."C",
    cron text NOT NULL,
    tz text NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    payload bytea,
    payload_binary boolean DEFAULT true NOT NULL,
    priority bigint DEFAULT 0 NOT NULL,
    max_attempts bigint DEFAULT 0 NOT NULL,
    created double precision NOT NULL,
    last double precision
);


--
-- Name: settle_pending; Type: TABLE; Schema: fenceq_corpus; Owner: -
--

CREATE TABLE fenceq_corpus.settle_pending (
    parent text NOT NULL COLLATE pg_catalog."C",
    how integer NOT NULL,
    settled_to text NOT NULL COLLATE pg_catalog."C",
    n bigint NOT NULL
);


--
-- Name: settle_pending_n_seq; Type: SEQUENCE; Schema: fenceq_corpus; Owner: -
--

CREATE SEQUENCE fenceq_corpus.settle_pending_n_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: settle_pending_n_seq; Type: SEQUENCE OWNED BY; Schema: fenceq_corpus; Owner: -
--

ALTER SEQUENCE fenceq_corpus.settle_pending_n_seq OWNED BY fenceq_corpus.settle_pending.n;


--
-- Name: jobs seq; Type: DEFAULT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.jobs ALTER COLUMN seq SET DEFAULT nextval('fenceq_corpus.jobs_seq'::regclass);


--
-- Name: settle_pending n; Type: DEFAULT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.settle_pending ALTER COLUMN n SET DEFAULT nextval('fenceq_corpus.settle_pending_n_seq'::regclass);


--
-- Data for Name: fenceq_meta; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.fenceq_meta (key, value) FROM stdin;
\.


--
-- Data for Name: fenceq_schema_version; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.fenceq_schema_version (version, applied) FROM stdin;
1	2026-12-07 14:54:43.281641+00
2	2026-12-07 14:54:43.281641+00
3	2026-12-07 14:54:43.281641+00
4	2026-12-07 14:54:43.281641+00
5	2026-12-07 14:54:43.281641+00
6	2026-12-07 14:54:43.281641+00
7	2026-12-07 14:54:43.281641+00
8	2026-12-07 14:54:43.281641+00
9	2026-12-07 14:54:43.281641+00
10	2026-12-07 14:54:43.281641+00
11	2026-12-07 14:54:43.281641+00
12	2026-12-07 14:54:43.281641+00
13	2026-12-07 14:54:43.281641+00
14	2026-12-07 14:54:43.281641+00
15	2026-12-07 14:54:43.281641+00
16	2026-12-07 14:54:43.281641+00
17	2026-12-07 14:54:43.281641+00
18	2026-12-07 14:54:43.281641+00
19	2026-12-07 14:54:43.281641+00
20	2026-12-07 14:54:43.281641+00
21	2026-12-07 14:54:43.281641+00
22	2026-12-07 14:54:43.281641+00
\.


--
-- Data for Name: group_claims; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.group_claims (queue, grp, at) FROM stdin;
\.


--
-- Data for Name: job_after; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.job_after (parent, child, met) FROM stdin;
parent	child	0
parent-done	child-met	1
\.


--
-- Data for Name: job_steps; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.job_steps (id, step, value, is_bin) FROM stdin;
steps	charge	\\x63685f31	f
steps	none	\N	f
\.


--
-- Data for Name: job_suspends; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.job_suspends (id, token, timeout, fail) FROM stdin;
suspended	abb934f9f79300dcebaeed0929428e2b	1800003652	f
\.


--
-- Data for Name: job_waits; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.job_waits (child, blocked, after_run, wait) FROM stdin;
child	1	0	0
child-met	0	0	0
\.


--
-- Data for Name: jobs; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.jobs (id, owner, until, fence, result, done, queue, payload, payload_binary, priority, not_before, attempts, max_attempts, dead, error, seq, created, finished, cancelled, progress, held, ukey, grp, kids, max_runtime, deadline, headers, expires) FROM stdin;
ready-a	\N	0	0	\N	0	default	\\x61	f	5	0	0	25	0	\N	1	1800000000	0	0	\N	0	\N	\N	0	0	0	\N	\N
ready-b	\N	0	0	\N	0	default	\\x62	f	0	0	0	25	0	\N	2	1800000001	0	0	\N	0	\N	\N	0	0	0	\N	\N
delayed	\N	0	0	\N	0	default	\\x64	f	0	1800003602	0	25	0	\N	3	1800000002	0	0	\N	0	\N	\N	64	0	0	\N	\N
big	\N	0	0	\N	0	default	\\x787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878	f	0	0	0	25	0	\N	10	1800000009	0	0	\N	0	\N	\N	0	0	0	\N	\N
leased	w1	1800003620	1	\N	0	default	\N	t	0	0	1	25	0	\N	4	1800000003	0	0	\N	1	\N	\N	64	0	0	\N	\N
expired	w2	1800000030	1	\N	0	default	\N	t	0	0	1	25	0	\N	5	1800000004	0	0	\N	1	\N	\N	64	0	0	\N	\N
done	w3	1800000081	1	ok	1	default	\N	t	0	0	1	25	0	\N	6	1800000005	1800000022	0	\N	1	\N	\N	64	0	0	\N	\N
dead	\N	0	1	\N	0	default	\N	t	0	1800000023	1	1	1	boom	7	1800000006	1800000022	0	\N	1	\N	\N	64	0	0	\N	\N
retrying	\N	0	1	\N	0	default	\N	t	0	1800003622	1	3	0	transient	8	1800000007	0	0	\N	1	\N	\N	64	0	0	\N	\N
exhausted	w6	1800000031	1	\N	0	default	\N	t	0	0	1	1	0	\N	9	1800000008	0	0	\N	1	\N	\N	64	0	0	\N	\N
big-done	w7	1800000081	1	yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy	1	default	\N	t	0	0	1	25	0	\N	11	1800000010	1800000022	0	\N	1	\N	\N	64	0	0	\N	\N
cancelled	\N	0	1	\N	0	default	\N	t	0	0	0	25	1	\N	13	1800000024	1800000025	1	\N	0	\N	\N	0	0	0	\N	\N
cancelled-leased	\N	0	2	\N	0	default	\N	t	0	0	1	25	1	\N	14	1800000024	1800000026	1	\N	1	\N	\N	64	0	0	\N	\N
progress	w16	1800003600	1	\N	0	default	\N	t	0	0	1	25	0	\N	15	1800000026	0	0	50%	1	\N	\N	64	0	0	\N	\N
held	w10	1800003628	1	\N	0	limited	\N	t	0	0	1	25	0	\N	16	1800000027	0	0	\N	1	\N	\N	64	0	0	\N	\N
key-old	w11	1800000090	1	k	1	default	\N	t	0	0	1	25	0	\N	17	1800000029	1800000031	0	\N	1	K	\N	64	0	0	\N	\N
key-new	\N	0	0	\N	0	default	\N	t	0	0	0	25	0	\N	18	1800000032	0	0	\N	0	K	\N	0	0	0	\N	\N
key-leased	w12	1800003633	1	\N	0	other	\N	t	0	0	1	25	0	\N	19	1800000032	0	0	\N	1	L	\N	64	0	0	\N	\N
g-a2	\N	0	0	\N	0	gq	\N	t	1	0	0	25	0	\N	21	1800000034	0	0	\N	0	\N	A	0	0	0	\N	\N
g-b1	\N	0	0	\N	0	gq	\N	t	0	0	0	25	0	\N	22	1800000035	0	0	\N	0	\N	B	0	0	0	\N	\N
g-a1	w13	1800003636	1	\N	0	gq	\N	t	0	0	1	25	0	\N	20	1800000034	0	0	\N	1	\N	A	64	0	0	\N	\N
parent	\N	0	0	\N	0	default	\N	t	0	0	0	25	0	\N	23	1800000037	0	0	\N	0	\N	\N	1	0	0	\N	\N
child	\N	0	0	\N	0	default	\N	t	0	1e+15	0	25	0	\N	24	1800000038	0	0	\N	0	\N	\N	2	0	0	\N	\N
parent-done	w14	1800000100	1	\N	1	default	\N	t	0	0	1	25	0	\N	25	1800000038	1800000041	0	\N	1	\N	\N	65	0	0	\N	\N
child-met	\N	0	0	\N	0	default	\N	t	0	1800000041	0	25	0	\N	26	1800000039	0	0	\N	0	\N	\N	2	0	0	\N	\N
runtime	w15	1800000103	1	\N	0	default	\N	t	0	0	1	25	0	\N	27	1800000042	0	0	\N	1	\N	\N	64	600	1800000643	\N	\N
headers	\N	0	0	\N	0	default	\N	t	0	0	0	25	0	\N	28	1800000044	0	0	\N	0	\N	\N	0	0	0	1:h1:v	\N
key-later	w18	1800000110	1	r	1	default	\N	t	0	0	1	25	0	\N	30	1800000048	1800000050	0	\N	1	R	\N	64	0	0	\N	\N
key-revived	\N	0	1	\N	0	default	\N	t	0	0	0	1	0	boom	29	1800000047	0	0	\N	1	R	\N	64	0	0	\N	\N
steps	w19	1800003651	1	\N	0	default	\N	t	0	0	1	25	0	\N	31	1800000051	0	0	\N	1	\N	\N	192	0	0	\N	\N
suspended	\N	0	1	\N	0	default	\N	t	0	2e+15	0	25	0	\N	32	1800000052	0	0	\N	1	\N	\N	320	0	0	\N	\N
deadline	\N	0	0	\N	0	default	\N	t	0	0	0	25	0	\N	33	1800000053	0	0	\N	0	\N	\N	0	0	0	\N	1801000000
\.


--
-- Data for Name: purged_fences; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.purged_fences (id, fence, ended) FROM stdin;
purged	1	1
\.


--
-- Data for Name: queue_claims; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.queue_claims (queue, at) FROM stdin;
\.


--
-- Data for Name: queue_config; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.queue_config (queue, paused, max_leased, rate, per, group_max_leased, group_rate, group_per) FROM stdin;
limited	0	5	0	1	0	0	1
\.


--
-- Data for Name: queue_groups; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.queue_groups (queue, grp, turn, wake, held) FROM stdin;
gq	A	0	0	f
gq	B	0	0	f
\.


--
-- Data for Name: queue_retention; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.queue_retention (queue, keep_done, keep_dead, keep_cancelled) FROM stdin;
\.


--
-- Data for Name: schedules; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.schedules (name, cron, tz, queue, payload, payload_binary, priority, max_attempts, created, last) FROM stdin;
nightly	0 3 * * *	UTC	default	\\x73	f	2	25	1800000028	\N
\.


--
-- Data for Name: settle_pending; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.settle_pending (parent, how, settled_to, n) FROM stdin;
\.


--
-- Name: jobs_seq; Type: SEQUENCE SET; Schema: fenceq_corpus; Owner: -
--

SELECT pg_catalog.setval('fenceq_corpus.jobs_seq', 33, true);


--
-- Name: queue_groups_turn_seq; Type: SEQUENCE SET; Schema: fenceq_corpus; Owner: -
--

SELECT pg_catalog.setval('fenceq_corpus.queue_groups_turn_seq', 1, false);


--
-- Name: settle_pending_n_seq; Type: SEQUENCE SET; Schema: fenceq_corpus; Owner: -
--

SELECT pg_catalog.setval('fenceq_corpus.settle_pending_n_seq', 1, false);


--
-- Name: fenceq_meta fenceq_meta_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.fenceq_meta
    ADD CONSTRAINT fenceq_meta_pkey PRIMARY KEY (key);


--
-- Name: fenceq_schema_version fenceq_schema_version_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.fenceq_schema_version
    ADD CONSTRAINT fenceq_schema_version_pkey PRIMARY KEY (version);


--
-- Name: job_after job_after_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.job_after
    ADD CONSTRAINT job_after_pkey PRIMARY KEY (parent, child);


--
-- Name: job_steps job_steps_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.job_steps
    ADD CONSTRAINT job_steps_pkey PRIMARY KEY (id, step);


--
-- Name: job_suspends job_suspends_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.job_suspends
    ADD CONSTRAINT job_suspends_pkey PRIMARY KEY (id);


--
-- Name: job_suspends job_suspends_token_key; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.job_suspends
    ADD CONSTRAINT job_suspends_token_key UNIQUE (token);


--
-- Name: job_waits job_waits_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.job_waits
    ADD CONSTRAINT job_waits_pkey PRIMARY KEY (child);


--
-- Name: jobs jobs_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);


--
-- Name: purged_fences purged_fences_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.purged_fences
    ADD CONSTRAINT purged_fences_pkey PRIMARY KEY (id);


--
-- Name: queue_config queue_config_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.queue_config
    ADD CONSTRAINT queue_config_pkey PRIMARY KEY (queue);


--
-- Name: queue_groups queue_groups_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.queue_groups
    ADD CONSTRAINT queue_groups_pkey PRIMARY KEY (queue, grp);


--
-- Name: queue_retention queue_retention_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.queue_retention
    ADD CONSTRAINT queue_retention_pkey PRIMARY KEY (queue);


--
-- Name: schedules schedules_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (name);


--
-- Name: settle_pending settle_pending_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.settle_pending
    ADD CONSTRAINT settle_pending_pkey PRIMARY KEY (parent);


--
-- Name: group_claims_at; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX group_claims_at ON fenceq_corpus.group_claims USING btree (queue, grp, at);


--
-- Name: job_after_child; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX job_after_child ON fenceq_corpus.job_after USING btree (child, parent);


--
-- Name: job_suspends_timeout; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX job_suspends_timeout ON fenceq_corpus.job_suspends USING btree (timeout);


--
-- Name: jobs_dead; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_dead ON fenceq_corpus.jobs USING btree (queue, cancelled, id) WHERE (dead = 1);


--
-- Name: jobs_deadline; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_deadline ON fenceq_corpus.jobs USING btree (deadline) WHERE (deadline > (0)::double precision);


--
-- Name: jobs_expires; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_expires ON fenceq_corpus.jobs USING btree (expires) WHERE (expires IS NOT NULL);


--
-- Name: jobs_finished; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_finished ON fenceq_corpus.jobs USING btree (finished) WHERE ((done = 1) OR (dead = 1));


--
-- Name: jobs_group; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_group ON fenceq_corpus.jobs USING btree (queue, grp, priority DESC, seq) WHERE ((done = 0) AND (dead = 0) AND (grp IS NOT NULL));


--
-- Name: jobs_group_leased; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_group_leased ON fenceq_corpus.jobs USING btree (queue, grp) WHERE ((held = 1) AND (done = 0) AND (dead = 0) AND (grp IS NOT NULL));


--
-- Name: jobs_group_top; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_group_top ON fenceq_corpus.jobs USING btree (queue, priority DESC) WHERE ((done = 0) AND (dead = 0) AND (grp IS NOT NULL));


--
-- Name: jobs_held; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_held ON fenceq_corpus.jobs USING btree (queue, until) WHERE ((held = 1) AND (done = 0) AND (dead = 0) AND (queue IS NOT NULL));


--
-- Name: jobs_last_attempt; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_last_attempt ON fenceq_corpus.jobs USING btree (until) WHERE ((done = 0) AND (dead = 0) AND (max_attempts > 0) AND (attempts >= max_attempts));


--
-- Name: jobs_next; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_next ON fenceq_corpus.jobs USING btree (queue, ((((not_before >= ('1000000000000000'::numeric)::double precision))::integer + (kids & 64))), priority DESC, seq) WHERE ((done = 0) AND (dead = 0) AND (queue IS NOT NULL) AND (grp IS NULL) AND (kids >= 0));


--
-- Name: jobs_ukey; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_ukey ON fenceq_corpus.jobs USING btree (queue, ukey, created) WHERE (ukey IS NOT NULL);


--
-- Name: jobs_ukey_open; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE UNIQUE INDEX jobs_ukey_open ON fenceq_corpus.jobs USING btree (queue, ukey) WHERE ((ukey IS NOT NULL) AND (done = 0) AND (dead = 0));


--
-- Name: jobs_wake; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_wake ON fenceq_corpus.jobs USING btree (queue, GREATEST(until, not_before)) WHERE (((kids & 64) <> 0) AND (done = 0) AND (dead = 0) AND (grp IS NULL));


--
-- Name: queue_claims_at; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX queue_claims_at ON fenceq_corpus.queue_claims USING btree (queue, at);


--
-- Name: queue_groups_waking; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX queue_groups_waking ON fenceq_corpus.queue_groups USING btree (queue, wake, turn, grp) WHERE (wake > (0)::double precision);


--
-- Name: queue_groups_walk; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX queue_groups_walk ON fenceq_corpus.queue_groups USING btree (queue, turn, grp) WHERE (wake = (0)::double precision);


--
-- Name: settle_pending_n; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX settle_pending_n ON fenceq_corpus.settle_pending USING btree (n);


--
-- Name: jobs fenceq_group_freed; Type: TRIGGER; Schema: fenceq_corpus; Owner: -
--

CREATE TRIGGER fenceq_group_freed AFTER UPDATE OF done, dead, until, held ON fenceq_corpus.jobs FOR EACH ROW WHEN (((old.grp IS NOT NULL) AND (old.held = 1) AND (old.done = 0) AND (old.dead = 0) AND ((new.done <> 0) OR (new.dead <> 0) OR (new.held = 0) OR (new.until < old.until)))) EXECUTE FUNCTION fenceq_corpus.fenceq_group_freed();


--
-- Name: jobs fenceq_group_sooner; Type: TRIGGER; Schema: fenceq_corpus; Owner: -
--

CREATE TRIGGER fenceq_group_sooner AFTER UPDATE OF until, not_before, attempts, max_attempts, done, dead, grp, queue ON fenceq_corpus.jobs FOR EACH ROW WHEN (((new.grp IS NOT NULL) AND (new.done = 0) AND (new.dead = 0) AND ((old.done <> 0) OR (old.dead <> 0) OR (new.until < old.until) OR (new.not_before < old.not_before) OR (new.attempts < old.attempts) OR (new.max_attempts IS DISTINCT FROM old.max_attempts) OR (new.grp IS DISTINCT FROM old.grp) OR (new.queue IS DISTINCT FROM old.queue)))) EXECUTE FUNCTION fenceq_corpus.fenceq_group_sooner();


--
-- Name: jobs fenceq_groups_joined; Type: TRIGGER; Schema: fenceq_corpus; Owner: -
--

CREATE TRIGGER fenceq_groups_joined AFTER INSERT ON fenceq_corpus.jobs REFERENCING NEW TABLE AS fenceq_new FOR EACH STATEMENT EXECUTE FUNCTION fenceq_corpus.fenceq_groups_joined();


--
-- Name: queue_config fenceq_groups_settings; Type: TRIGGER; Schema: fenceq_corpus; Owner: -
--

CREATE TRIGGER fenceq_groups_settings AFTER INSERT OR DELETE OR UPDATE OF group_max_leased, group_rate, group_per ON fenceq_corpus.queue_config FOR EACH ROW EXECUTE FUNCTION fenceq_corpus.fenceq_groups_settings();


--
-- Name: jobs fenceq_recount; Type: TRIGGER; Schema: fenceq_corpus; Owner: -
--

CREATE TRIGGER fenceq_recount AFTER UPDATE OF dead ON fenceq_corpus.jobs FOR EACH ROW WHEN ((((new.kids & 2) <> 0) AND (old.dead = 1) AND (new.dead = 0))) EXECUTE FUNCTION fenceq_corpus.fenceq_recount();


--
-- Name: jobs fenceq_settle; Type: TRIGGER; Schema: fenceq_corpus; Owner: -
--

CREATE TRIGGER fenceq_settle AFTER UPDATE OF done, dead ON fenceq_corpus.jobs FOR EACH ROW WHEN ((((new.kids & 1) <> 0) AND (((new.done = 1) AND (old.done = 0)) OR ((new.dead = 1) AND (old.dead = 0))))) EXECUTE FUNCTION fenceq_corpus.fenceq_settle();


--
-- Name: job_steps job_steps_id_fkey; Type: FK CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.job_steps
    ADD CONSTRAINT job_steps_id_fkey FOREIGN KEY (id) REFERENCES fenceq_corpus.jobs(id) ON DELETE CASCADE;


--
-- Name: job_suspends job_suspends_id_fkey; Type: FK CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.job_suspends
    ADD CONSTRAINT job_suspends_id_fkey FOREIGN KEY (id) REFERENCES fenceq_corpus.jobs(id) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--

\unrestrict cTg9PCEUMz4J8kSymmktYDjQ1bE8baw2BQfKIHmxjr9z56g7pLSCKNP5W2EN3mY

