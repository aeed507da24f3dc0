"""Fixtures of the application-side suites (tests/app)."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import psycopg2
import pytest

from app_support import base_uri, with_params


@pytest.fixture
def schema():
    """A fresh schema: (its URI, the schema's name), dropped afterwards."""
    name = "app_" + uuid.uuid4().hex[:12]
    admin = psycopg2.connect(base_uri())
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE SCHEMA {name}")
    uri = with_params(base_uri(), options=f"-csearch_path={name}")
    yield uri, name
    with admin.cursor() as cur:
        cur.execute(f"DROP SCHEMA {name} CASCADE")
        # What the test wrote goes to disk now, not in a checkpoint of the
        # cluster's own during the next test: after a chain of 100,000 its
        # fsyncs held a SQLite test's commits (ping p99 36 ms for 9 alone).
        cur.execute("CHECKPOINT")
    admin.close()


@pytest.fixture
def folder():
    with tempfile.TemporaryDirectory(prefix="fenceq-app-") as d:
        yield Path(d)
