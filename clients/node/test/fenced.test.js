'use strict';

// lib/fenced.js: writes to the application's own table fenced by the job's
// fence, in a real SQLite file (node-sqlite3-wasm) and a real PostgreSQL
// database (pg), with a real fenceqd (issue 34, contract C2.4).
//
// The stale-worker story: worker A claims and stalls, its lease ends, B claims
// (a higher fence), writes the row and completes; A wakes and writes: the
// application's database refuses A's write and the row keeps B's, with
// fenceqd running and with fenceqd stopped before A writes.
//
// PostgreSQL: a throw-away cluster of this file's own (scripts/pg_cluster.sh
// start in a /tmp folder, a Unix socket only), destroyed at the end.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const fs = require('node:fs');
const path = require('node:path');
const pg = require('pg');
const { Database } = require('node-sqlite3-wasm');
const {
  Client, FenceqError, fencedUpsert, fencedUpdate, fencedStatement, quoteIdentifier, RowMissing,
} = require('fenceq');
const { startDaemon, tempDir } = require('./helpers');

const execFileP = promisify(execFile);
const PG_CLUSTER = path.resolve(__dirname, '..', '..', '..', 'scripts', 'pg_cluster.sh');
const JOB = 'invoice-42';

let pgDir;
let pgConfig;
let tableCounter = 0;

/** One application database: connect() opens a connection (each worker its own). */
function sqliteStore() {
  const dir = tempDir();
  const file = path.join(dir, 'app.db');
  const open = [];
  return {
    kind: 'sqlite',
    dir,
    table: 'invoices',
    async connect() {
      const db = new Database(file);
      open.push(db);
      return { db, exec: async (sql) => db.exec(sql), close: async () => {} };
    },
    async row(key = JOB) {
      const db = new Database(file);
      try {
        return normalize(db.get(`SELECT customer, status, paid_by, fence FROM ${this.table} WHERE id = ?`, [key]));
      } finally {
        db.close();
      }
    },
    async close() {
      for (const db of open) if (db.isOpen) db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function pgStore() {
  tableCounter += 1;
  const open = [];
  return {
    kind: 'postgresql',
    table: `invoices_${process.pid}_${tableCounter}`,
    async connect() {
      const db = new pg.Client(pgConfig);
      await db.connect();
      open.push(db);
      return { db, exec: async (sql) => db.query(sql), close: () => db.end() };
    },
    async row(key = JOB) {
      const db = new pg.Client(pgConfig);
      await db.connect();
      try {
        const r = await db.query(`SELECT customer, status, paid_by, fence FROM ${this.table} WHERE id = $1`, [key]);
        return normalize(r.rows[0]);
      } finally {
        await db.end();
      }
    },
    async close() {
      for (const db of open) await db.end().catch(() => {});
    },
  };
}

/** A row with its fence as a number (pg reads BIGINT as a string). */
function normalize(row) {
  return row ? { ...row, fence: row.fence === null ? null : Number(row.fence) } : null;
}

const STORES = { sqlite: sqliteStore, postgresql: pgStore };

/** The application's table: a NOT NULL column the worker does not write, and the fence, NULL until fenced. */
async function createTable(conn, table) {
  await conn.exec(`CREATE TABLE ${table} (id TEXT PRIMARY KEY, customer TEXT NOT NULL, ` +
    'status TEXT NOT NULL, paid_by TEXT, fence BIGINT)');
}

/** The worker's side effect, through the helper (one statement: autocommit). */
function pay(mode, db, table, worker, fence) {
  const values = { status: 'paid', paid_by: worker };
  return mode === 'upsert'
    ? fencedUpsert(db, { table, key: { id: JOB }, values: { customer: 'acme', ...values }, fence })
    : fencedUpdate(db, { table, key: { id: JOB }, values, fence });
}

async function story(kind, mode, daemonUp) {
  const store = STORES[kind]();
  const daemon = await startDaemon({ clock: 'client' });
  const a = new Client(daemon.endpoint, { timeoutMs: 5000 });
  const b = new Client(daemon.endpoint, { timeoutMs: 5000 });
  try {
    const setup = await store.connect();
    await createTable(setup, store.table);
    if (mode === 'update') { // the application's row exists, never fenced yet
      await setup.exec(`INSERT INTO ${store.table} (id, customer, status) VALUES ('${JOB}', 'acme', 'open')`);
    }
    const [connA, connB] = [await store.connect(), await store.connect()];
    assert.equal(await a.enqueue(JOB), true);
    const fenceA = await a.claim(JOB, 'worker-a', 30, { now: 100 });
    assert.notEqual(fenceA, null); // A stalls here
    assert.equal(await b.claim(JOB, 'worker-b', 30, { now: 120 }), null); // A's lease holds
    const fenceB = await b.claim(JOB, 'worker-b', 30, { now: 131 }); // A's lease ended at 130
    assert.ok(fenceB > fenceA);
    assert.equal(await pay(mode, connB.db, store.table, 'worker-b', fenceB), true);
    assert.equal(await b.complete(JOB, 'worker-b', fenceB, 'paid by worker-b', { now: 132 }), true);
    if (!daemonUp) {
      await daemon.stop();
      const probe = new Client(daemon.endpoint, { timeoutMs: 500 });
      await assert.rejects(probe.ping(), FenceqError);
      await probe.close();
    }
    // A wakes up and writes anyway: the application's database refuses it.
    assert.equal(await pay(mode, connA.db, store.table, 'worker-a', fenceA), false);
    if (daemonUp) {
      assert.equal(await a.complete(JOB, 'worker-a', fenceA, 'paid by worker-a', { now: 133 }), false);
      assert.equal((await a.state(JOB)).result, 'paid by worker-b');
    }
    assert.deepEqual(await store.row(),
      { customer: 'acme', status: 'paid', paid_by: 'worker-b', fence: fenceB });
  } finally {
    await a.close();
    await b.close();
    await daemon.stop();
    await store.close();
  }
}

describe('fenced writes to the application\'s own table', () => {
  before(async () => {
    pgDir = fs.mkdtempSync('/tmp/fqn-pg-');
    const { stdout } = await execFileP(PG_CLUSTER, ['start', pgDir], { timeout: 180000 });
    const uri = new URL(stdout.trim().split('\n').pop());
    pgConfig = {
      host: uri.searchParams.get('host'), user: uri.searchParams.get('user'),
      database: uri.pathname.slice(1),
    };
  });
  after(async () => {
    await execFileP(PG_CLUSTER, ['destroy', pgDir], { timeout: 120000 });
  });

  for (const kind of Object.keys(STORES)) {
    for (const mode of ['upsert', 'update']) {
      for (const daemonUp of [true, false]) {
        it(`${kind} ${mode}: the stale worker's write is refused and the row keeps B's ` +
          `(fenceqd ${daemonUp ? 'running' : 'stopped'})`, () => story(kind, mode, daemonUp));
      }
    }

    it(`${kind}: a NULL fence applies; a lower fence is refused; the same fence writes again`, async () => {
      const store = STORES[kind]();
      try {
        const conn = await store.connect();
        await createTable(conn, store.table);
        await conn.exec(`INSERT INTO ${store.table} (id, customer, status) VALUES ('${JOB}', 'acme', 'open')`);
        const steps = [[5, 'w5', true], [4, 'w4', false], [5, 'w5-again', true], [7n, 'w7', true],
          [6, 'w6', false]];
        for (const [fence, worker, applied] of steps) {
          const write = { table: store.table, key: { id: JOB }, values: { paid_by: worker }, fence };
          assert.equal(await fencedUpdate(conn.db, write), applied, `fence ${fence}`);
        }
        assert.deepEqual(await store.row(), { customer: 'acme', status: 'open', paid_by: 'w7', fence: 7 });
        const up = (fence, worker) => fencedUpsert(conn.db, {
          table: store.table, key: { id: JOB }, fence,
          values: { customer: 'acme', status: 'paid', paid_by: worker },
        });
        assert.equal(await up(6, 'w6'), false);
        assert.equal(await up(8, 'w8'), true);
        assert.deepEqual(await store.row(), { customer: 'acme', status: 'paid', paid_by: 'w8', fence: 8 });
      } finally {
        await store.close();
      }
    });

    it(`${kind}: fencedUpdate of a missing row rejects with RowMissing and writes nothing`, async () => {
      const store = STORES[kind]();
      try {
        const conn = await store.connect();
        await createTable(conn, store.table);
        await assert.rejects(
          fencedUpdate(conn.db, { table: store.table, key: { id: 'nope' }, values: { status: 'x' }, fence: 3 }),
          (err) => err instanceof RowMissing && err.code === 'row_missing');
        assert.equal(await store.row('nope'), null);
      } finally {
        await store.close();
      }
    });

    it(`${kind}: a query function; a qualified table and odd identifiers; values stay parameters`, async () => {
      const store = STORES[kind]();
      try {
        const conn = await store.connect();
        const table = ['bill ing', 'in"v%oice'];
        const quoted = table.map(quoteIdentifier).join('.');
        if (kind === 'sqlite') {
          await conn.exec(`ATTACH DATABASE '${store.dir}/billing.db' AS "bill ing"`);
        } else {
          await conn.exec(`CREATE SCHEMA "bill ing"`);
        }
        await conn.exec(`CREATE TABLE ${quoted} ("the id" TEXT, "k2" INTEGER, "100% paid" TEXT, ` +
          '"my fence" BIGINT, PRIMARY KEY ("the id", "k2"))');
        const query = kind === 'sqlite'
          ? (text, values) => (text.startsWith('SELECT') ? conn.db.all(text, values) : conn.db.run(text, values))
          : (text, values) => conn.db.query(text, values);
        const nasty = "x'); DROP TABLE t; --";
        const write = (values, fence) => ({
          table, key: { 'the id': JOB, k2: 7 }, values, fence, fenceColumn: 'my fence', dialect: kind,
        });
        assert.equal(await fencedUpsert(query, write({ '100% paid': nasty }, 3)), true);
        assert.equal(await fencedUpsert(query, write({ '100% paid': 'stale' }, 2)), false);
        assert.equal(await fencedUpdate(query, write({ '100% paid': `${nasty}!` }, 3)), true);
        assert.equal(await fencedUpdate(query, write({ '100% paid': 'stale' }, 2)), false);
        const rows = kind === 'sqlite'
          ? conn.db.all(`SELECT "100% paid" AS v, "my fence" AS f FROM ${quoted}`)
          : (await conn.db.query(`SELECT "100% paid" AS v, "my fence" AS f FROM ${quoted}`)).rows;
        assert.deepEqual(rows.map((r) => [r.v, Number(r.f)]), [[`${nasty}!`, 3]]);
      } finally {
        await store.close();
      }
    });
  }
});

describe('fencedStatement', () => {
  it('writes the upsert, the update and the existence check with placeholders per dialect', () => {
    const write = { table: 'invoices', key: { id: 'k' }, values: { status: 'paid' }, fence: 2 };
    assert.deepEqual(fencedStatement('upsert', 'sqlite', write), {
      text: 'INSERT INTO "invoices" ("id", "status", "fence") VALUES (?, ?, ?) ' +
        'ON CONFLICT ("id") DO UPDATE SET "status" = excluded."status", "fence" = excluded."fence" ' +
        'WHERE "invoices"."fence" IS NULL OR "invoices"."fence" <= excluded."fence"',
      values: ['k', 'paid', 2],
    });
    assert.deepEqual(fencedStatement('update', 'postgresql', write), {
      text: 'UPDATE "invoices" SET "status" = $1, "fence" = $2 WHERE "id" = $3 ' +
        'AND ("fence" IS NULL OR "fence" <= $4)',
      values: ['paid', 2, 'k', 2],
    });
    assert.deepEqual(fencedStatement('exists', 'postgresql', write),
      { text: 'SELECT 1 FROM "invoices" WHERE "id" = $1', values: ['k'] });
    assert.equal(quoteIdentifier('we"ird'), '"we""ird"');
  });

  const bad = {
    'an empty key': { key: {} },
    'a null key value': { key: { id: null } },
    'an undefined value': { values: { a: undefined } },
    'a column in key and values': { values: { id: 2 } },
    'the fence column in values': { values: { fence: 2 } },
    'a float fence': { fence: 2.5 },
    'a negative fence': { fence: -1 },
    'an unsafe fence': { fence: 2 ** 53 },
    'a fence past int64': { fence: 1n << 63n },
    'a string fence': { fence: '2' },
    'an empty table': { table: '' },
    'a three-part table': { table: ['a', 'b', 'c'] },
    'a NUL in a name': { key: { 'i\0d': 1 } },
  };
  for (const [name, change] of Object.entries(bad)) {
    it(`refuses ${name} with invalid_argument before any SQL`, async () => {
      const write = { table: 't', key: { id: 1 }, values: {}, fence: 1, ...change };
      assert.throws(() => fencedStatement('upsert', 'sqlite', write),
        (err) => err instanceof FenceqError && err.code === 'invalid_argument');
      let ran = false;
      await assert.rejects(fencedUpsert(() => { ran = true; return 1; }, { ...write, dialect: 'sqlite' }),
        (err) => err instanceof FenceqError && err.code === 'invalid_argument');
      assert.equal(ran, false);
    });
  }

  it('refuses an unknown dialect or kind, and a query function without a dialect', async () => {
    const write = { table: 't', key: { id: 1 }, fence: 1 };
    assert.throws(() => fencedStatement('upsert', 'mysql', write), FenceqError);
    assert.throws(() => fencedStatement('merge', 'sqlite', write), FenceqError);
    await assert.rejects(fencedUpsert(() => 1, write), FenceqError);
    await assert.rejects(fencedUpsert({}, write), FenceqError);
  });
});
