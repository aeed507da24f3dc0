"""What an application role can and cannot do to fenceq's tables on PostgreSQL
(issue 55, part 1; docs/operating.md, "What the application role can do").

The role gets exactly what docs/operating.md grants: USAGE on fenceq's schema
and EXECUTE on fenceq_enqueue(). Everything else it tries here is what a
hostile application would: objects of its own in its temporary schema, the
session settings fenceq's triggers look at, then a call of the SECURITY
DEFINER function, which runs with the sidecars' rights. Each attempt must
fail or do nothing, and the jobs must be exactly as they were.

Real fenceqd sidecars ($FENCEQD, one with --events so that the events
trigger is installed) on ctest's throw-away cluster, a schema per test.
"""

from __future__ import annotations

from pathlib import Path

import psycopg2
import psycopg2.errors
import pytest

from app_support import Fenceqd, with_params

import fenceq  # noqa: E402  (app_support puts the client on the path)

SIGNATURE = ("fenceq_enqueue(text, text, text, bigint, double precision, bigint, text, "
             "double precision, jsonb, bytea)")

# The columns fenceq_note_event() writes (daemon/storage/pg/pg_events.cpp).
EVENT_COLUMNS = ("n bigserial, ins boolean, id text, queue text, grp text, owner text, "
                 "fence bigint, done integer, dead integer, cancelled integer, attempts bigint, "
                 "not_before float8, o_owned boolean, o_fence bigint, o_done integer, "
                 "o_dead integer, o_cancelled integer, o_attempts bigint, o_not_before float8, "
                 "error_changed boolean")


@pytest.fixture
def deployment(schema, folder):
    """One sidecar with --events on the schema, a paid job done at fence 1,
    and an application role with the documented grants: (sidecar, app
    connection, schema URI, schema name, role)."""
    uri, name = schema
    sidecar = Fenceqd(["--db", uri, "--events", f"ipc://{folder}/events.sock"], folder, "s0")
    with fenceq.Client(sidecar.endpoint) as c:
        assert c.enqueue("paid", queue="billing")
        job = c.claim_next("billing", "w", 30)
        assert job["fence"] == 1
        assert c.complete("paid", "w", 1, "paid")
    role = f"{name}_app"
    admin = psycopg2.connect(uri)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE ROLE {role} LOGIN")
        cur.execute(f"GRANT USAGE ON SCHEMA {name} TO {role}")
        cur.execute(f"GRANT EXECUTE ON FUNCTION {SIGNATURE} TO {role}")
    app = psycopg2.connect(with_params(uri, user=role))
    try:
        yield sidecar, app, uri, name, role
    finally:
        app.close()
        sidecar.stop()
        with admin.cursor() as cur:
            cur.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
        admin.close()


def jobs_as_admin(uri: str) -> list[tuple]:
    with psycopg2.connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, fence, done, result, owner FROM jobs ORDER BY id")
        return cur.fetchall()


def privileges(uri: str, role: str, name: str) -> list[str]:
    """Every right `role` holds on a table of fenceq's schema."""
    with psycopg2.connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT c.relname || ':' || p.privilege_type FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace, "
                    "LATERAL aclexplode(c.relacl) a "
                    "JOIN LATERAL (SELECT a.privilege_type) p ON true "
                    "WHERE n.nspname = %s AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = %s)",
                    (name, role))
        return sorted(r[0] for r in cur.fetchall())


# What the role's own trigger tries when it runs: take every right on jobs,
# and rewind the paid job to fence 0, ready, no result.
TAKEOVER = """
CREATE FUNCTION pg_temp.takeover() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_trigger_depth() > 2 THEN  -- its own UPDATE below fires the events trigger again
    RETURN NULL;
  END IF;
  EXECUTE format('GRANT ALL ON %I.jobs TO %I', '{name}', '{role}');
  EXECUTE format('UPDATE %I.jobs SET fence = 0, done = 0, result = NULL WHERE id = ''paid''', '{name}');
  RETURN NULL;
END $$;
"""


def test_the_events_trigger_never_writes_into_the_caller_s_temporary_table(deployment):
    """The escalation of issue 55 as it was measured: a temporary
    pg_temp.fenceq_events of the role's own with an AFTER INSERT trigger, the
    events setting switched on, then fenceq_enqueue(). Before the fix the
    role's trigger ran as the sidecars' role, granted itself ALL on jobs and
    rewound the paid job."""
    sidecar, app, uri, name, role = deployment
    before = jobs_as_admin(uri)
    with app.cursor() as cur:
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            cur.execute("SELECT count(*) FROM jobs")
    app.rollback()
    with app.cursor() as cur:
        cur.execute(f"CREATE TEMP TABLE fenceq_events({EVENT_COLUMNS})")
        cur.execute(TAKEOVER.format(name=name, role=role))
        cur.execute("CREATE TRIGGER takeover AFTER INSERT ON pg_temp.fenceq_events "
                    "FOR EACH ROW EXECUTE FUNCTION pg_temp.takeover()")
        cur.execute("SET fenceq.events = 'on'")
        cur.execute("SELECT fenceq_enqueue('x', 'q')")
        assert cur.fetchone()[0] is True
        # The role's table got nothing: the trigger wrote into no table of the caller's.
        cur.execute("SELECT count(*) FROM pg_temp.fenceq_events")
        assert cur.fetchone()[0] == 0
    app.commit()
    # The job it enqueued exists; nothing else changed, and the role has no right on any table.
    after = jobs_as_admin(uri)
    assert [r for r in after if r[0] != "x"] == before
    assert ("x", 0, 0, None, None) in after
    assert privileges(uri, role, name) == []
    with app.cursor() as cur:
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            cur.execute("SELECT count(*) FROM jobs")
    app.rollback()
    with fenceq.Client(sidecar.endpoint) as c:
        assert c.state("paid")["fence"] == 1 and c.state("paid")["result"] == "paid"
        assert c.claim_next("q", "w", 30)["id"] == "x"


def test_the_caller_s_settings_and_temporary_objects_reach_nothing_inside_fenceq_enqueue(deployment):
    """The same class of hole through other doors: temporary tables named as
    fenceq's own (a function whose search_path put pg_temp first would read
    them), a temporary function named as one fenceq calls, and settings the
    function could read. Each must leave the jobs as they were and give the
    role no right."""
    sidecar, app, uri, name, role = deployment
    before = jobs_as_admin(uri)
    with app.cursor() as cur:
        for table in ("jobs", "purged_fences", "queue_groups", "fenceq_meta"):
            cur.execute(f"CREATE TEMP TABLE {table}(id text, fence bigint, key text, value float8, "
                        f"queue text, grp text, turn bigint)")
        # A purged fence of 1000 in the role's own table.
        cur.execute("INSERT INTO pg_temp.purged_fences(id, fence) VALUES ('y', 1000)")
        cur.execute(TAKEOVER.format(name=name, role=role))
        for table in ("jobs", "purged_fences", "queue_groups", "fenceq_meta"):
            cur.execute(f"CREATE TRIGGER takeover_{table} AFTER INSERT OR UPDATE OR DELETE ON "
                        f"pg_temp.{table} FOR EACH ROW EXECUTE FUNCTION pg_temp.takeover()")
        cur.execute("CREATE FUNCTION pg_temp.pg_notify(text, text) RETURNS void LANGUAGE sql AS "
                    "'SELECT NULL'")
        cur.execute("SET fenceq.events = 'on'")
        cur.execute("SET search_path = pg_temp, public")
        cur.execute(f"SELECT {name}.fenceq_enqueue('y', 'q', p_grp => 'g')")
        assert cur.fetchone()[0] is True
    app.commit()
    after = jobs_as_admin(uri)
    assert [r for r in after if r[0] != "y"] == before
    assert ("y", 0, 0, None, None) in after  # the role's purged fence was not read
    assert privileges(uri, role, name) == []
    with fenceq.Client(sidecar.endpoint) as c:
        job = c.claim_next("q", "w", 30)
        assert job is not None and job["id"] == "y" and job["fence"] == 1


def test_every_security_definer_function_pins_its_settings(deployment):
    """Every SECURITY DEFINER function in fenceq's schema has its search_path
    pinned with pg_temp last and the events setting forced off, and a comment
    naming what the caller cannot influence (issue 55's done-when)."""
    sidecar, app, uri, name, role = deployment
    with psycopg2.connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT p.proname, p.proconfig, obj_description(p.oid, 'pg_proc') FROM pg_proc p "
                    "JOIN pg_namespace n ON n.oid = p.pronamespace "
                    "WHERE n.nspname = %s AND p.prosecdef", (name,))
        rows = cur.fetchall()
    assert [r[0] for r in rows] == ["fenceq_enqueue"]
    for proname, config, comment in rows:
        settings = dict(c.split("=", 1) for c in config)
        assert settings["search_path"].split(", ")[-1] == "pg_temp", config
        assert settings["fenceq.events"] == "off", config
        assert comment and "caller" in comment, comment
