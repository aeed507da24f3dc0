-- The upgrade corpus: PostgreSQL version 2, generated (make_corpus.py --pg-generated: today's ladder to 2, rows as version 2's daemon wrote them, no functions or triggers).
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
    finished double precision DEFAULT 0 NOT NULL
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
\.


--
-- Data for Name: jobs; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.jobs (id, owner, until, fence, result, done, queue, payload, payload_binary, priority, not_before, attempts, max_attempts, dead, error, seq, created, finished) FROM stdin;
ready-a	\N	0	0	\N	0	default	\\x61	f	5	0	0	0	0	\N	1	1800000000	0
ready-b	\N	0	0	\N	0	default	\\x62	f	0	0	0	0	0	\N	2	1800000001	0
delayed	\N	0	0	\N	0	default	\\x64	f	0	1800003602	0	0	0	\N	3	1800000002	0
leased	w1	1800003620	1	\N	0	default	\N	t	0	0	1	0	0	\N	4	1800000003	0
expired	w2	1800000030	1	\N	0	default	\N	t	0	0	1	0	0	\N	5	1800000004	0
done	w3	1800000081	1	ok	1	default	\N	t	0	0	1	0	0	\N	6	1800000005	1800000022
dead	\N	0	1	\N	0	default	\N	t	0	1800000023	1	1	1	boom	7	1800000006	1800000022
retrying	\N	0	1	\N	0	default	\N	t	0	1800003622	1	3	0	transient	8	1800000007	0
exhausted	w6	1800000031	1	\N	0	default	\N	t	0	0	1	1	0	\N	9	1800000008	0
big	\N	0	0	\N	0	default	\\x787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878	f	0	0	0	0	0	\N	10	1800000009	0
big-done	w7	1800000081	1	yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy	1	default	\N	t	0	0	1	0	0	\N	11	1800000010	1800000022
\.


--
-- Data for Name: purged_fences; Type: TABLE DATA; Schema: fenceq_corpus; Owner: -
--

COPY fenceq_corpus.purged_fences (id, fence) FROM stdin;
purged	1
\.


--
-- Name: jobs_seq; Type: SEQUENCE SET; Schema: fenceq_corpus; Owner: -
--

SELECT pg_catalog.setval('fenceq_corpus.jobs_seq', 11, true);


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
-- Name: jobs_finished; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_finished ON fenceq_corpus.jobs USING btree (finished) WHERE ((done = 1) OR (dead = 1));


--
-- Name: jobs_last_attempt; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_last_attempt ON fenceq_corpus.jobs USING btree (until) WHERE ((done = 0) AND (dead = 0) AND (max_attempts > 0) AND (attempts >= max_attempts));


--
-- Name: jobs_next; Type: INDEX; Schema: fenceq_corpus; Owner: -
--

CREATE INDEX jobs_next ON fenceq_corpus.jobs USING btree (queue, priority DESC, seq) WHERE ((done = 0) AND (dead = 0) AND (queue IS NOT NULL));


--
-- PostgreSQL database dump complete
--

\unrestrict fenceqcorpus

