-- The upgrade corpus: PostgreSQL version 10, generated (make_corpus.py --pg-generated: today's ladder to 10, rows as version 10's daemon wrote them, no functions or triggers).
--
-- PostgreSQL database dump
--

\restrict fenceqcorpus

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
    kids integer DEFAULT 0 NOT NULL
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
1	2026-12-07 00:00:00+00
2	2026-12-07 00:00:00+00
3	2026-12-07 00:00:00+00
4	2026-12-07 00:00:00+00
5	2026-12-07 00:00:00+00
6	2026-12-07 00:00:00+00
7	2026-12-07 00:00:00+00
8	2026-12-07 00:00:00+00
9	2026-12-07 00:00:00+00
10	2026-12-07 00:00:00+00
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
lost-c	orphan-c	0
lost-c	orphan-x	1
lost-d	orphan-d	0
\.


--
-- Data for Name: job_waits; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.job_waits (child, blocked, after_run, wait) FROM stdin;
child	1	0	0
child-met	0	0	0
orphan-c	1	0	0
orphan-x	1	0	0
orphan-d	1	0	0
\.


--
-- Data for Name: jobs; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.jobs (id, owner, until, fence, result, done, queue, payload, payload_binary, priority, not_before, attempts, max_attempts, dead, error, seq, created, finished, cancelled, progress, held, ukey, grp, kids) FROM stdin;
ready-a	\N	0	0	\N	0	default	\\x61	f	5	0	0	25	0	\N	1	1800000000	0	0	\N	0	\N	\N	0
ready-b	\N	0	0	\N	0	default	\\x62	f	0	0	0	25	0	\N	2	1800000001	0	0	\N	0	\N	\N	0
delayed	\N	0	0	\N	0	default	\\x64	f	0	1800003602	0	25	0	\N	3	1800000002	0	0	\N	0	\N	\N	0
leased	w1	1800003620	1	\N	0	default	\N	t	0	0	1	25	0	\N	4	1800000003	0	0	\N	1	\N	\N	0
expired	w2	1800000030	1	\N	0	default	\N	t	0	0	1	25	0	\N	5	1800000004	0	0	\N	1	\N	\N	0
done	w3	1800000081	1	ok	1	default	\N	t	0	0	1	25	0	\N	6	1800000005	1800000022	0	\N	1	\N	\N	0
dead	\N	0	1	\N	0	default	\N	t	0	1800000023	1	1	1	boom	7	1800000006	1800000022	0	\N	1	\N	\N	0
retrying	\N	0	1	\N	0	default	\N	t	0	1800003622	1	3	0	transient	8	1800000007	0	0	\N	1	\N	\N	0
exhausted	w6	1800000031	1	\N	0	default	\N	t	0	0	1	1	0	\N	9	1800000008	0	0	\N	1	\N	\N	0
big	\N	0	0	\N	0	default	\\x787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878	f	0	0	0	25	0	\N	10	1800000009	0	0	\N	0	\N	\N	0
big-done	w7	1800000081	1	yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy	1	default	\N	t	0	0	1	25	0	\N	11	1800000010	1800000022	0	\N	1	\N	\N	0
cancelled	\N	0	1	\N	0	default	\N	t	0	0	0	25	1	\N	12	1800000024	1800000025	1	\N	0	\N	\N	0
cancelled-leased	\N	0	2	\N	0	default	\N	t	0	0	1	25	1	\N	13	1800000024	1800000026	1	\N	1	\N	\N	0
progress	w16	1800003600	1	\N	0	default	\N	t	0	0	1	25	0	\N	14	1800000026	0	0	50%	1	\N	\N	0
held	w10	1800003628	1	\N	0	limited	\N	t	0	0	1	25	0	\N	15	1800000027	0	0	\N	1	\N	\N	0
key-old	w11	1800000090	1	k	1	default	\N	t	0	0	1	25	0	\N	16	1800000029	1800000031	0	\N	1	K	\N	0
key-new	\N	0	0	\N	0	default	\N	t	0	0	0	25	0	\N	17	1800000032	0	0	\N	0	K	\N	0
key-leased	w12	1800003633	1	\N	0	other	\N	t	0	0	1	25	0	\N	18	1800000032	0	0	\N	1	L	\N	0
g-a1	w13	1800003636	1	\N	0	gq	\N	t	0	0	1	25	0	\N	19	1800000034	0	0	\N	1	\N	A	0
g-a2	\N	0	0	\N	0	gq	\N	t	1	0	0	25	0	\N	20	1800000034	0	0	\N	0	\N	A	0
g-b1	\N	0	0	\N	0	gq	\N	t	0	0	0	25	0	\N	21	1800000035	0	0	\N	0	\N	B	0
parent	\N	0	0	\N	0	default	\N	t	0	0	0	25	0	\N	22	1800000037	0	0	\N	0	\N	\N	1
child	\N	0	0	\N	0	default	\N	t	0	1e+15	0	25	0	\N	23	1800000038	0	0	\N	0	\N	\N	2
parent-done	w14	1800000100	1	\N	1	default	\N	t	0	0	1	25	0	\N	24	1800000038	1800000041	0	\N	1	\N	\N	1
child-met	\N	0	0	\N	0	default	\N	t	0	1800000041	0	25	0	\N	25	1800000039	0	0	\N	0	\N	\N	2
orphan-c	\N	0	1	\N	0	default	\N	t	0	1e+15	0	25	0	parent lost-c cancelled	26	1800000045	0	0	\N	0	\N	\N	2
orphan-x	\N	0	1	\N	0	default	\N	t	0	1e+15	0	25	1	parent lost-c cancelled	27	1800000045	1800000045	1	\N	0	\N	\N	2
orphan-d	\N	0	1	\N	0	default	\N	t	0	1e+15	0	25	0	parent lost-d dead	28	1800000046	0	0	\N	0	\N	\N	2
key-revived	\N	0	1	\N	0	default	\N	t	0	0	0	1	0	boom	29	1800000047	0	0	\N	1	R	\N	0
key-later	w18	1800000110	1	r	1	default	\N	t	0	0	1	25	0	\N	30	1800000048	1800000050	0	\N	1	R	\N	0
\.


--
-- Data for Name: purged_fences; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.purged_fences (id, fence) FROM stdin;
purged	1
lost-c	1
lost-d	1
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

SELECT pg_catalog.setval('fenceq_corpus.jobs_seq', 30, true);


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
-- Name: job_after job_after_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.job_after
    ADD CONSTRAINT job_after_pkey PRIMARY KEY (parent, child);


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
-- Name: schedules schedules_pkey; Type: CONSTRAINT; Schema: fenceq_corpus; Owner: -
--

ALTER TABLE ONLY fenceq_corpus.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (name);


--
-- Name: group_claims_at; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX group_claims_at ON fenceq_corpus.group_claims USING btree (queue, grp, at);


--
-- Name: job_after_child; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX job_after_child ON fenceq_corpus.job_after USING btree (child, parent);


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

\unrestrict fenceqcorpus

