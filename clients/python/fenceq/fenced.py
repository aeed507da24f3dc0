"""Fenced writes to the application's own tables (Kleppmann's fencing token).

fenceqd refuses a stale worker's ``complete``, but a worker's real side effect
is usually a write to a table of the application, which fenceqd does not see
(contract C2.4). Keep the job's fence in that row and make the write
conditional on it: the database itself then refuses the write of a worker
whose lease was taken over, even when fenceqd is unreachable at that moment
and even when the worker's ``complete`` never arrives::

    import sqlite3, fenceq                      # or psycopg2: the same calls
    db = sqlite3.connect("app.db")
    db.execute("CREATE TABLE IF NOT EXISTS invoices"
               "(id TEXT PRIMARY KEY, status TEXT, fence BIGINT)")
    fence = client.claim("invoice-42", "worker-a", ttl=30)
    ...
    if fenceq.fenced_upsert(db, "invoices", {"id": "invoice-42"},
                            {"status": "paid"}, fence):
        db.commit()                             # applied
    else:
        db.rollback()                           # stale: a newer lease wrote the row

The rule, the same in every fenceq client: the write applies when the row's
fence column is NULL (the row was never fenced) or not greater than the
writer's fence (``<=``: the same lease may write its row again, e.g. a retried
statement); it is refused when the row holds a higher fence, i.e. a later
claim of the job wrote it. A job's fences only grow (C1.2), but the fences of
two different jobs are unrelated: fence a row by the one job that writes it.

- :func:`fenced_upsert` inserts the row or updates it (``INSERT ... ON
  CONFLICT (key) DO UPDATE ... WHERE``; PostgreSQL >= 9.5, SQLite >= 3.24).
  ``key`` must be the columns of a PRIMARY KEY or UNIQUE constraint. Every
  NOT NULL column without a default must be in ``key`` or ``values``: both
  databases check the proposed row before they see the conflict.
- :func:`fenced_update` updates an existing row only (``UPDATE ... WHERE key
  AND fence``), for rows other columns of which the worker does not know;
  :class:`RowMissing` if no row has that key.

Both answer ``True`` (applied) or ``False`` (refused: stale), run one
statement in the caller's transaction (commit as usual) and take a DB-API
connection or cursor: ``sqlite3`` and ``psycopg2`` (also ``psycopg`` 3 and
``pg8000``) are recognised, with their paramstyle; ``dialect=`` and
``paramstyle=`` name them for another driver. Identifiers are quoted (a
qualified table is a tuple, ``("billing", "invoices")``); values are always
parameters. :func:`fenced_statement` answers the statement and its parameters
without running them.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import InvalidArgument

#: SQL dialects the statements are written for.
DIALECTS = ("postgresql", "sqlite")
#: DB-API paramstyles (PEP 249) the statements can be written in.
PARAMSTYLES = ("qmark", "numeric", "named", "format", "pyformat")
#: Statement kinds of :func:`fenced_statement`.
KINDS = ("upsert", "update", "exists")

_MAX_FENCE = (1 << 63) - 1
# Driver modules (the top package of a connection's or cursor's type) and
# their dialect.
_DRIVERS = {"sqlite3": "sqlite", "psycopg2": "postgresql", "psycopg": "postgresql",
            "pg8000": "postgresql"}

Table = Union[str, Sequence[str]]


class RowMissing(LookupError):
    """:func:`fenced_update` found no row with the key: nothing was written
    (an upsert would have inserted it)."""


def quote_identifier(name: str) -> str:
    """``name`` as one quoted SQL identifier (PostgreSQL and SQLite):
    ``we"ird`` -> ``"we""ird"``. Empty names and NUL characters are refused."""
    if not isinstance(name, str) or not name:
        raise InvalidArgument("invalid_argument", f"an identifier must be a non-empty str, not {name!r}")
    if "\0" in name:
        raise InvalidArgument("invalid_argument", f"an identifier cannot hold NUL: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def _quote_table(table: Table) -> str:
    parts = [table] if isinstance(table, str) else list(table)
    if not 1 <= len(parts) <= 2:
        raise InvalidArgument("invalid_argument", f"table: a name or (schema, name), not {table!r}")
    return ".".join(quote_identifier(p) for p in parts)


class _Params:
    """Placeholders in one paramstyle, and the values they bind, in order."""

    def __init__(self, paramstyle: str) -> None:
        if paramstyle not in PARAMSTYLES:
            raise InvalidArgument("invalid_argument", f"paramstyle must be one of {PARAMSTYLES}, "
                                  f"not {paramstyle!r}")
        self.style = paramstyle
        self.values: List[Any] = []

    def add(self, value: Any) -> str:
        self.values.append(value)
        n = len(self.values)
        return {"qmark": "?", "numeric": f":{n}", "named": f":p{n}", "format": "%s",
                "pyformat": f"%(p{n})s"}[self.style]

    def bound(self) -> Union[List[Any], Dict[str, Any]]:
        if self.style in ("named", "pyformat"):
            return {f"p{i}": v for i, v in enumerate(self.values, 1)}
        return list(self.values)


def _check_write(key: Mapping[str, Any], values: Mapping[str, Any], fence: int,
                 fence_column: str) -> None:
    if not isinstance(key, Mapping) or not key:
        raise InvalidArgument("invalid_argument", "key: a non-empty mapping of column to value")
    if not isinstance(values, Mapping):
        raise InvalidArgument("invalid_argument", "values: a mapping of column to value")
    for column, value in key.items():
        if value is None:
            raise InvalidArgument("invalid_argument", f"key column {column!r} is None: "
                                  "NULL matches no row")
    both = set(key) & set(values)
    if both:
        raise InvalidArgument("invalid_argument", f"columns in both key and values: {sorted(both)}")
    if fence_column in key or fence_column in values:
        raise InvalidArgument("invalid_argument", f"the fence column {fence_column!r} is set "
                              "by the fence argument, not by key or values")
    if isinstance(fence, bool) or not isinstance(fence, int) or not 0 <= fence <= _MAX_FENCE:
        raise InvalidArgument("invalid_argument", f"fence must be an int in [0, 2**63), not {fence!r}")


def fenced_statement(kind: str, table: Table, key: Mapping[str, Any], values: Mapping[str, Any],
                     fence: int, *, dialect: str, fence_column: str = "fence",
                     paramstyle: Optional[str] = None) -> Tuple[str, Union[List[Any], Dict[str, Any]]]:
    """The statement of a fenced write and its parameters, for ``cursor.execute``.

    ``kind``: ``"upsert"`` (the statement :func:`fenced_upsert` runs),
    ``"update"`` (:func:`fenced_update`'s) or ``"exists"`` (``SELECT 1`` of
    the row by its key). ``paramstyle`` defaults to ``qmark`` for SQLite and
    ``format`` (``%s``) for PostgreSQL; with ``format`` and ``pyformat`` a
    ``%`` of an identifier is written ``%%``."""
    if kind not in KINDS:
        raise InvalidArgument("invalid_argument", f"kind must be one of {KINDS}, not {kind!r}")
    if dialect not in DIALECTS:
        raise InvalidArgument("invalid_argument", f"dialect must be one of {DIALECTS}, not {dialect!r}")
    _check_write(key, values, fence, fence_column)
    p = _Params(paramstyle or ("qmark" if dialect == "sqlite" else "format"))
    percent = p.style in ("format", "pyformat")

    def q(name: str) -> str:
        quoted = quote_identifier(name)
        return quoted.replace("%", "%%") if percent else quoted

    t = _quote_table(table)
    t = t.replace("%", "%%") if percent else t
    f = q(fence_column)

    def where_key() -> str:
        return " AND ".join(f"{q(c)} = {p.add(v)}" for c, v in key.items())

    if kind == "exists":
        sql = f"SELECT 1 FROM {t} WHERE {where_key()}"
    elif kind == "update":
        sets = [f"{q(c)} = {p.add(v)}" for c, v in values.items()]
        sets.append(f"{f} = {p.add(fence)}")
        sql = (f"UPDATE {t} SET {', '.join(sets)} WHERE {where_key()} "
               f"AND ({f} IS NULL OR {f} <= {p.add(fence)})")
    else:
        keys = [q(c) for c in key]
        rest = [q(c) for c in values] + [f]
        marks = [p.add(v) for v in [*key.values(), *values.values(), fence]]
        sets = ", ".join(f"{c} = excluded.{c}" for c in rest)
        sql = (f"INSERT INTO {t} ({', '.join(keys + rest)}) VALUES ({', '.join(marks)}) "
               f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets} "
               f"WHERE {t}.{f} IS NULL OR {t}.{f} <= excluded.{f}")
    return sql, p.bound()


def _driver(db: Any) -> Tuple[Optional[str], Optional[str]]:
    """The (dialect, paramstyle) of a DB-API connection or cursor's module."""
    root = type(db).__module__.split(".")[0]
    module = sys.modules.get(root)
    return _DRIVERS.get(root), getattr(module, "paramstyle", None)


def _run(db: Any, sql: str, params: Any, fetch: bool) -> Any:
    """Executes on a cursor of ``db`` (a connection) or on ``db`` (a cursor):
    the row count, or with ``fetch`` whether a row came back."""
    owned = callable(getattr(db, "cursor", None))
    cursor = db.cursor() if owned else db
    try:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None if fetch else cursor.rowcount
    finally:
        if owned:
            cursor.close()


def _write(kind: str, db: Any, table: Table, key: Mapping[str, Any], values: Mapping[str, Any],
           fence: int, fence_column: str, dialect: Optional[str], paramstyle: Optional[str]) -> bool:
    found_dialect, found_style = _driver(db)
    dialect = dialect or found_dialect
    if dialect is None:
        raise InvalidArgument("invalid_argument", f"unknown driver {type(db).__module__}: pass "
                              f"dialect= ({' or '.join(DIALECTS)}) and paramstyle=")
    style = paramstyle or found_style
    sql, params = fenced_statement(kind, table, key, values, fence, dialect=dialect,
                                   fence_column=fence_column, paramstyle=style)
    changed = _run(db, sql, params, fetch=False)
    if changed > 0:
        return True
    if changed < 0:
        raise InvalidArgument("invalid_argument", f"the driver {type(db).__module__} does not "
                              "report the rows a statement changed (rowcount -1)")
    if kind == "update":
        sql, params = fenced_statement("exists", table, key, {}, fence, dialect=dialect,
                                       fence_column=fence_column, paramstyle=style)
        if not _run(db, sql, params, fetch=True):
            raise RowMissing(f"no row of {_quote_table(table)} has the key {dict(key)!r}")
    return False


def fenced_upsert(db: Any, table: Table, key: Mapping[str, Any], values: Mapping[str, Any],
                  fence: int, *, fence_column: str = "fence", dialect: Optional[str] = None,
                  paramstyle: Optional[str] = None) -> bool:
    """Inserts the row ``key`` + ``values`` with ``fence``, or updates the row
    of that key unless a higher fence wrote it. ``True``: applied; ``False``:
    refused as stale (the row keeps what the newer lease wrote). Runs in the
    caller's transaction: commit afterwards."""
    return _write("upsert", db, table, key, values, fence, fence_column, dialect, paramstyle)


def fenced_update(db: Any, table: Table, key: Mapping[str, Any], values: Mapping[str, Any],
                  fence: int, *, fence_column: str = "fence", dialect: Optional[str] = None,
                  paramstyle: Optional[str] = None) -> bool:
    """Updates ``values`` and the fence of the existing row ``key`` unless a
    higher fence wrote it. ``True``: applied; ``False``: refused as stale;
    :class:`RowMissing`: no such row (nothing written). Runs in the caller's
    transaction: commit afterwards."""
    return _write("update", db, table, key, values, fence, fence_column, dialect, paramstyle)
