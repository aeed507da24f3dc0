-- The upgrade corpus: version 6, written through the wire by the fenceqd of commit 5da2f87 (scenario.py; make_corpus.py --pg).
--
-- PostgreSQL database dump
--

\restrict bKJDv5zvSzKnyxefaD5mbzZHkq53DLmgMhejTJzZCml76aH0F4rSMjliY0n5000

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

CREATE FUNCTION fenceq_corpus.fenceq_claim_fair(p_queue text, p_owner text, p_until double precision, p_now double precision, p_max bigint) RETURNS TABLE(id text, fence bigint, attempts bigint, priority bigint, seq bigint, payload bytea, payload_binary boolean, c_expired boolean)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
  v_allowed bigint;
  v_top bigint;
  v_grp text;
  v_head text;
  v_prio bigint;
  v_best text;
  v_best_grp text;
  v_best_prio bigint;
  v_taken bigint := 0;
  v_rate bigint;
  v_per double precision;
  v_group_rate bigint;
  v_group_per double precision;
  v_group_limited boolean;
BEGIN
  SELECT k.rate, k.per, k.group_rate, k.group_per, k.group_max_leased > 0 OR k.group_rate > 0
    INTO v_rate, v_per, v_group_rate, v_group_per, v_group_limited
    FROM queue_config k WHERE k.queue = p_queue;
  v_allowed := COALESCE((SELECT CASE WHEN k.paused <> 0 THEN 0 ELSE LEAST(p_max, LEAST(CASE WHEN k.max_leased > 0 THEN GREATEST(0, k.max_leased - (SELECT count(*) FROM jobs WHERE queue = p_queue AND held = 1 AND done = 0 AND dead = 0 AND until > p_now)) ELSE p_max END, CASE WHEN k.rate > 0 THEN GREATEST(0, k.rate - (SELECT count(*) FROM queue_claims r WHERE r.queue = p_queue AND r.at > p_now - k.per)) ELSE p_max END)) END FROM queue_config k WHERE k.queue = p_queue), p_max);
  IF EXISTS (SELECT 1 FROM jobs WHERE queue = p_queue AND grp IS NULL AND done = 0 AND dead = 0) THEN
    INSERT INTO queue_groups(queue, grp) VALUES (p_queue, '') ON CONFLICT DO NOTHING;
  END IF;
  WHILE v_taken < v_allowed LOOP
    v_top := GREATEST((SELECT priority FROM jobs WHERE queue = p_queue AND grp IS NULL AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1), (SELECT priority FROM jobs WHERE queue = p_queue AND grp IS NOT NULL AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1));
    EXIT WHEN v_top IS NULL;
    v_best := NULL;
    FOR v_grp IN SELECT g.grp FROM queue_groups g WHERE g.queue = p_queue ORDER BY g.turn, g.grp LOOP
      IF v_grp <> '' AND v_group_limited AND COALESCE((SELECT CASE WHEN k.group_max_leased > 0 AND (SELECT count(*) FROM jobs WHERE queue = p_queue AND grp = v_grp AND held = 1 AND done = 0 AND dead = 0 AND until > p_now) >= k.group_max_leased THEN 0 WHEN k.group_rate > 0 AND (SELECT count(*) FROM group_claims c WHERE c.queue = p_queue AND c.grp = v_grp AND c.at > p_now - k.group_per) >= k.group_rate THEN 0 ELSE 1 END FROM queue_config k WHERE k.queue = p_queue), 1) = 0 THEN
        CONTINUE;
      END IF;
      IF v_grp = '' THEN
        SELECT j.id, j.priority INTO v_head, v_prio FROM jobs j WHERE j.queue = p_queue AND j.grp IS NULL AND done = 0 AND dead = 0 AND until <= p_now AND not_before <= p_now AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807 ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED;
      ELSE
        SELECT j.id, j.priority INTO v_head, v_prio FROM jobs j WHERE j.queue = p_queue AND j.grp = v_grp AND done = 0 AND dead = 0 AND until <= p_now AND not_before <= p_now AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807 ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED;
      END IF;
      IF NOT FOUND THEN
        IF NOT EXISTS (SELECT 1 FROM jobs WHERE queue = p_queue AND done = 0 AND dead = 0 AND (CASE WHEN v_grp = '' THEN grp IS NULL ELSE grp = v_grp END)) THEN
          PERFORM 1 FROM queue_groups g WHERE g.queue = p_queue AND g.grp = v_grp
            FOR UPDATE SKIP LOCKED;
          IF FOUND AND NOT EXISTS (SELECT 1 FROM jobs WHERE queue = p_queue AND done = 0 AND dead = 0 AND (CASE WHEN v_grp = '' THEN grp IS NULL ELSE grp = v_grp END)) THEN
            DELETE FROM queue_groups g WHERE g.queue = p_queue AND g.grp = v_grp;
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
        END IF;
      END IF;
      EXIT WHEN v_best IS NOT NULL AND v_best_prio >= v_top;
    END LOOP;
    EXIT WHEN v_best IS NULL;
    RETURN QUERY UPDATE jobs SET owner = p_owner, until = p_until, fence = fence + 1, attempts = attempts + 1, progress = NULL, held = 1 FROM (SELECT until > 0 AS e FROM jobs WHERE id = v_best) o
      WHERE jobs.id = v_best RETURNING jobs.id, jobs.fence, jobs.attempts, jobs.priority,
        jobs.seq, jobs.payload, jobs.payload_binary, o.e;
    UPDATE queue_groups g SET turn = nextval('queue_groups_turn_seq')
      WHERE g.queue = p_queue AND g.grp = v_best_grp;
    IF COALESCE(v_group_rate, 0) > 0 AND v_best_grp <> '' THEN
      DELETE FROM group_claims c WHERE c.queue = p_queue AND c.grp = v_best_grp
        AND c.at <= p_now - v_group_per - 60.000000;
      INSERT INTO group_claims(queue, grp, at) VALUES (p_queue, v_best_grp, p_now);
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
    grp text COLLATE pg_catalog."C"
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
    fence bigint NOT NULL
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
    turn bigint DEFAULT 0 NOT NULL
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
-- Name: jobs seq; Type: DEFAULT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.jobs ALTER COLUMN seq SET DEFAULT nextval('fenceq_corpus.jobs_seq'::regclass);


--
-- Data for Name: fenceq_meta; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.fenceq_meta (key, value) FROM stdin;
\.


--
-- Data for Name: fenceq_schema_version; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.fenceq_schema_version (version, applied) FROM stdin;
1	2026-12-07 05:16:59.919172+00
2	2026-12-07 05:16:59.919172+00
3	2026-12-07 05:16:59.919172+00
4	2026-12-07 05:16:59.919172+00
5	2026-12-07 05:16:59.919172+00
6	2026-12-07 05:16:59.919172+00
\.


--
-- Data for Name: group_claims; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.group_claims (queue, grp, at) FROM stdin;
\.


--
-- Data for Name: jobs; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.jobs (id, owner, until, fence, result, done, queue, payload, payload_binary, priority, not_before, attempts, max_attempts, dead, error, seq, created, finished, cancelled, progress, held, ukey, grp) FROM stdin;
ready-a	\N	0	0	\N	0	default	\\x61	f	5	0	0	25	0	\N	1	1800000000	0	0	\N	0	\N	\N
ready-b	\N	0	0	\N	0	default	\\x62	f	0	0	0	25	0	\N	2	1800000001	0	0	\N	0	\N	\N
delayed	\N	0	0	\N	0	default	\\x64	f	0	1800003602	0	25	0	\N	3	1800000002	0	0	\N	0	\N	\N
big	\N	0	0	\N	0	default	\\x787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878	f	0	0	0	25	0	\N	10	1800000009	0	0	\N	0	\N	\N
leased	w1	1800003620	1	\N	0	default	\N	t	0	0	1	25	0	\N	4	1800000003	0	0	\N	1	\N	\N
expired	w2	1800000030	1	\N	0	default	\N	t	0	0	1	25	0	\N	5	1800000004	0	0	\N	1	\N	\N
done	w3	1800000081	1	ok	1	default	\N	t	0	0	1	25	0	\N	6	1800000005	1800000022	0	\N	1	\N	\N
dead	\N	0	1	\N	0	default	\N	t	0	1800000023	1	1	1	boom	7	1800000006	1800000022	0	\N	1	\N	\N
retrying	\N	0	1	\N	0	default	\N	t	0	1800003622	1	3	0	transient	8	1800000007	0	0	\N	1	\N	\N
exhausted	w6	1800000031	1	\N	0	default	\N	t	0	0	1	1	0	\N	9	1800000008	0	0	\N	1	\N	\N
big-done	w7	1800000081	1	yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy	1	default	\N	t	0	0	1	25	0	\N	11	1800000010	1800000022	0	\N	1	\N	\N
cancelled	\N	0	1	\N	0	default	\N	t	0	0	0	25	1	\N	13	1800000024	1800000025	1	\N	0	\N	\N
cancelled-leased	\N	0	2	\N	0	default	\N	t	0	0	1	25	1	\N	14	1800000024	1800000026	1	\N	1	\N	\N
progress	w16	1800003600	1	\N	0	default	\N	t	0	0	1	25	0	\N	15	1800000026	0	0	50%	1	\N	\N
held	w10	1800003628	1	\N	0	limited	\N	t	0	0	1	25	0	\N	16	1800000027	0	0	\N	1	\N	\N
key-old	w11	1800000090	1	k	1	default	\N	t	0	0	1	25	0	\N	17	1800000029	1800000031	0	\N	1	K	\N
key-new	\N	0	0	\N	0	default	\N	t	0	0	0	25	0	\N	18	1800000032	0	0	\N	0	K	\N
key-leased	w12	1800003633	1	\N	0	other	\N	t	0	0	1	25	0	\N	19	1800000032	0	0	\N	1	L	\N
g-a2	\N	0	0	\N	0	gq	\N	t	1	0	0	25	0	\N	21	1800000034	0	0	\N	0	\N	A
g-b1	\N	0	0	\N	0	gq	\N	t	0	0	0	25	0	\N	22	1800000035	0	0	\N	0	\N	B
g-a1	w13	1800003636	1	\N	0	gq	\N	t	0	0	1	25	0	\N	20	1800000034	0	0	\N	1	\N	A
key-later	w18	1800000110	1	r	1	default	\N	t	0	0	1	25	0	\N	24	1800000048	1800000050	0	\N	1	R	\N
key-revived	\N	0	1	\N	0	default	\N	t	0	0	0	1	0	boom	23	1800000047	0	0	\N	1	R	\N
\.


--
-- Data for Name: purged_fences; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.purged_fences (id, fence) FROM stdin;
purged	1
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

COPY fenceq_corpus.queue_groups (queue, grp, turn) FROM stdin;
gq	A	0
gq	B	0
\.


--
-- Data for Name: schedules; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.schedules (name, cron, tz, queue, payload, payload_binary, priority, max_attempts, created, last) FROM stdin;
nightly	0 3 * * *	UTC	default	\\x73	f	2	25	1800000028	\N
\.


--
-- Name: jobs_seq; Type: SEQUENCE SET; Schema: fenceq_corpus; Owner: -
--

SELECT pg_catalog.setval('fenceq_corpus.jobs_seq', 24, true);


--
-- Name: queue_groups_turn_seq; Type: SEQUENCE SET; Schema: fenceq_corpus; Owner: -
--

SELECT pg_catalog.setval('fenceq_corpus.queue_groups_turn_seq', 1, false);


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
-- Name: schedules schedules_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (name);


--
-- Name: group_claims_at; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX group_claims_at ON fenceq_corpus.group_claims USING btree (queue, grp, at);


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

CREATE INDEX jobs_next ON fenceq_corpus.jobs USING btree (queue, priority DESC, seq) WHERE ((done = 0) AND (dead = 0) AND (queue IS NOT NULL) AND (grp IS NULL));


--
-- Name: jobs_ukey; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_ukey ON fenceq_corpus.jobs USING btree (queue, ukey, created) WHERE (ukey IS NOT NULL);


--
-- Name: jobs_ukey_open; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE UNIQUE INDEX jobs_ukey_open ON fenceq_corpus.jobs USING btree (queue, ukey) WHERE ((ukey IS NOT NULL) AND (done = 0) AND (dead = 0));


--
-- Name: queue_claims_at; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX queue_claims_at ON fenceq_corpus.queue_claims USING btree (queue, at);


--
-- Name: queue_groups_turn; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX queue_groups_turn ON fenceq_corpus.queue_groups USING btree (queue, turn, grp);


--
-- PostgreSQL database dump complete
--

\unrestrict bKJDv5zvSzKnyxefaD5mbzZHkq53DLmgMhejTJzZCml76aH0F4rSMjliY0n5000

