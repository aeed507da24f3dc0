'use strict';

// Fenced writes to the application's own tables (Kleppmann's fencing token).
//
// fenceqd refuses a stale worker's complete, but a worker's real side effect
// is usually a write to a table of the application, which fenceqd does not
// see (contract C2.4). The row keeps the job's fence and the write is
// conditional on it, so the application's database itself refuses the write
// of a worker whose lease was taken over, even when fenceqd is unreachable
// at that moment and even when the worker's complete never arrives.
//
// The rule, the same in every fenceq client: the write applies when the row's
// fence column is NULL (never fenced yet) or not greater than the writer's
// fence (<=: the same lease may write its row again, e.g. a retried
// statement); it is refused when the row holds a higher fence, written by a
// later claim of the job. Fences of one job only grow (C1.2); those of two
// jobs are unrelated: fence a row by the one job that writes it.
//
//   fencedUpsert  INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE fence
//                 (PostgreSQL >= 9.5, SQLite >= 3.24). `key` is a PRIMARY KEY
//                 or UNIQUE constraint's columns; every NOT NULL column with
//                 no default must be in key or values (both databases check
//                 the proposed row before they see the conflict).
//   fencedUpdate  UPDATE ... WHERE key AND fence: an existing row only;
//                 RowMissing when no row has the key.
//
// Both resolve to true (applied) or false (refused: stale). One statement, in
// whatever transaction the connection is in. `db` is a pg Client, Pool or
// PoolClient (`query`), a node-sqlite3-wasm Database (`run`/`get`), a
// better-sqlite3 or node:sqlite database (`prepare`), or a function
// (text, values) => result (or a promise of it) with `dialect` given.
// Identifiers are quoted; values are always parameters. No driver is a
// dependency of this package.

const { FenceqError } = require('./errors');

const DIALECTS = ['postgresql', 'sqlite'];
const KINDS = ['upsert', 'update', 'exists'];
const MAX_FENCE = (1n << 63n) - 1n;

/** fencedUpdate found no row with the key; nothing was written. */
class RowMissing extends Error {
  constructor(message) {
    super(message);
    this.name = 'RowMissing';
    this.code = 'row_missing';
  }
}

function invalid(message) {
  return new FenceqError('invalid_argument', message);
}

/** `name` as one quoted SQL identifier: we"ird -> "we""ird". */
function quoteIdentifier(name) {
  if (typeof name !== 'string' || name.length === 0) {
    throw invalid(`an identifier must be a non-empty string, not ${String(name)}`);
  }
  if (name.includes('\0')) throw invalid(`an identifier cannot hold NUL: ${JSON.stringify(name)}`);
  return `"${name.replaceAll('"', '""')}"`;
}

function quoteTable(table) {
  const parts = typeof table === 'string' ? [table] : table;
  if (!Array.isArray(parts) || parts.length < 1 || parts.length > 2) {
    throw invalid('table: a name or [schema, name]');
  }
  return parts.map(quoteIdentifier).join('.');
}

function entries(map, what) {
  if (map === null || typeof map !== 'object' || Array.isArray(map)) {
    throw invalid(`${what}: an object of column to value`);
  }
  const list = Object.entries(map);
  for (const [column, value] of list) {
    if (value === undefined) throw invalid(`${what}.${column} is undefined`);
  }
  return list;
}

function checkFence(fence) {
  const ok = typeof fence === 'bigint' ? fence >= 0n && fence <= MAX_FENCE
    : Number.isSafeInteger(fence) && fence >= 0;
  if (!ok) throw invalid(`fence must be an integer in [0, 2^63) (a number or a bigint), not ${String(fence)}`);
}

function checkWrite(write) {
  if (write === null || typeof write !== 'object') throw invalid('the write: an object');
  const key = entries(write.key, 'key');
  const values = entries(write.values ?? {}, 'values');
  const fenceColumn = write.fenceColumn ?? 'fence';
  if (key.length === 0) throw invalid('key: at least one column');
  for (const [column, value] of key) {
    if (value === null) throw invalid(`key.${column} is null: NULL matches no row`);
  }
  const keyColumns = new Set(key.map(([c]) => c));
  for (const [column] of values) {
    if (keyColumns.has(column)) throw invalid(`column ${column} is in both key and values`);
  }
  if (keyColumns.has(fenceColumn) || values.some(([c]) => c === fenceColumn)) {
    throw invalid(`the fence column ${fenceColumn} is set by fence, not by key or values`);
  }
  checkFence(write.fence);
  return { key, values, fenceColumn };
}

/**
 * The statement of a fenced write and its parameters: { text, values }.
 * kind: 'upsert', 'update' or 'exists' (SELECT 1 of the row by its key).
 * Placeholders: $1, $2, ... for PostgreSQL, ? for SQLite.
 */
function fencedStatement(kind, dialect, write) {
  if (!KINDS.includes(kind)) throw invalid(`kind must be one of ${KINDS.join(', ')}`);
  if (!DIALECTS.includes(dialect)) throw invalid(`dialect must be one of ${DIALECTS.join(', ')}`);
  const { key, values, fenceColumn } = checkWrite(write);
  const params = [];
  const mark = (value) => {
    params.push(value);
    return dialect === 'postgresql' ? `$${params.length}` : '?';
  };
  const q = quoteIdentifier;
  const t = quoteTable(write.table);
  const f = q(fenceColumn);
  const whereKey = () => key.map(([c, v]) => `${q(c)} = ${mark(v)}`).join(' AND ');
  let text;
  if (kind === 'exists') {
    text = `SELECT 1 FROM ${t} WHERE ${whereKey()}`;
  } else if (kind === 'update') {
    const sets = values.map(([c, v]) => `${q(c)} = ${mark(v)}`);
    sets.push(`${f} = ${mark(write.fence)}`);
    text = `UPDATE ${t} SET ${sets.join(', ')} WHERE ${whereKey()} ` +
      `AND (${f} IS NULL OR ${f} <= ${mark(write.fence)})`;
  } else {
    const keys = key.map(([c]) => q(c));
    const rest = [...values.map(([c]) => q(c)), f];
    const marks = [...key, ...values].map(([, v]) => mark(v));
    marks.push(mark(write.fence));
    text = `INSERT INTO ${t} (${[...keys, ...rest].join(', ')}) VALUES (${marks.join(', ')}) ` +
      `ON CONFLICT (${keys.join(', ')}) DO UPDATE SET ` +
      `${rest.map((c) => `${c} = excluded.${c}`).join(', ')} ` +
      `WHERE ${t}.${f} IS NULL OR ${t}.${f} <= excluded.${f}`;
  }
  return { text, values: params };
}

/** The rows a write changed, from a driver's result. */
function changedRows(result) {
  if (typeof result === 'number') return result;
  if (typeof result === 'bigint') return Number(result);
  if (result && typeof result.rowCount === 'number') return result.rowCount;
  if (result && (typeof result.changes === 'number' || typeof result.changes === 'bigint')) {
    return Number(result.changes);
  }
  throw invalid('the query function resolved to no row count (a number, {rowCount} or {changes})');
}

/** Whether a query's result holds a row. */
function hasRow(result) {
  if (result === null || result === undefined) return false;
  if (Array.isArray(result)) return result.length > 0;
  if (typeof result === 'number' || typeof result === 'bigint') return result > 0;
  if (Array.isArray(result.rows)) return result.rows.length > 0;
  if (typeof result.rowCount === 'number') return result.rowCount > 0;
  return true; // a row itself (a get()-style result)
}

/** { dialect, write(text, values) -> rows changed, exists(text, values) -> bool } for `db`. */
function driver(db, dialect) {
  if (typeof db === 'function') {
    if (!dialect) throw invalid("a query function needs the write's dialect ('postgresql' or 'sqlite')");
    return {
      dialect,
      write: async (text, values) => changedRows(await db(text, values)),
      exists: async (text, values) => hasRow(await db(text, values)),
    };
  }
  if (db && typeof db.query === 'function') { // pg's Client, Pool, PoolClient
    return {
      dialect: dialect ?? 'postgresql',
      write: async (text, values) => changedRows(await db.query(text, values)),
      exists: async (text, values) => hasRow(await db.query(text, values)),
    };
  }
  if (db && typeof db.run === 'function' && typeof db.get === 'function') { // node-sqlite3-wasm
    return {
      dialect: dialect ?? 'sqlite',
      write: async (text, values) => changedRows(db.run(text, values)),
      exists: async (text, values) => hasRow(db.get(text, values)),
    };
  }
  if (db && typeof db.prepare === 'function') { // better-sqlite3, node:sqlite
    return {
      dialect: dialect ?? 'sqlite',
      write: async (text, values) => changedRows(db.prepare(text).run(...values)),
      exists: async (text, values) => hasRow(db.prepare(text).get(...values)),
    };
  }
  throw invalid('db: a pg client or pool, an SQLite database (node-sqlite3-wasm, better-sqlite3, ' +
    'node:sqlite) or a query function (text, values)');
}

async function fencedWrite(kind, db, write) {
  const d = driver(db, write?.dialect);
  const { text, values } = fencedStatement(kind, d.dialect, write);
  if ((await d.write(text, values)) > 0) return true;
  if (kind === 'update') {
    const exists = fencedStatement('exists', d.dialect, { ...write, values: {} });
    if (!(await d.exists(exists.text, exists.values))) {
      throw new RowMissing(`no row of ${quoteTable(write.table)} has the key ${
        JSON.stringify(write.key, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`);
    }
  }
  return false;
}

/**
 * Inserts the row key + values with the fence, or updates the row of that key
 * unless a higher fence wrote it. true: applied; false: refused as stale.
 */
function fencedUpsert(db, write) {
  return fencedWrite('upsert', db, write);
}

/**
 * Updates values and the fence of the existing row of key unless a higher
 * fence wrote it. true: applied; false: refused as stale; rejects with
 * RowMissing when there is no such row.
 */
function fencedUpdate(db, write) {
  return fencedWrite('update', db, write);
}

module.exports = { fencedUpsert, fencedUpdate, fencedStatement, quoteIdentifier, RowMissing };
