'use strict';

// Many requests in flight: one client pipelining hundreds of calls, and many
// clients racing for the same job (C3.7).

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('fenceq');
const { withDaemon, uniqueId } = require('./helpers');

describe('pipelining and races (server clock)', () => {
  let daemon, c;
  withDaemon({ clock: 'server', timeoutMs: 10000 }, 1, (...f) => { [daemon, c] = f; });

  it('500 pipelined calls on one client are each answered with their own reply', async () => {
    const N = 500;
    const ids = Array.from({ length: N }, () => uniqueId('pipe'));

    assert.deepEqual(await Promise.all(ids.map((id) => c.enqueue(id))), ids.map(() => true));

    // Distinct owners and distinct expected answers per call: a reply routed to
    // the wrong call shows up as a wrong id, owner or value.
    const fences = await Promise.all(ids.map((id, i) => c.claim(id, `owner-${i}`, 60)));
    assert.deepEqual(fences, ids.map(() => 1));

    const mixed = await Promise.all(ids.map((id, i) => {
      switch (i % 4) {
        case 0: return c.state(id);
        case 1: return c.enqueue(id);
        case 2: return c.claim(id, 'intruder', 60);
        default: return c.renew(id, `owner-${i}`, 1, 60);
      }
    }));
    mixed.forEach((value, i) => {
      switch (i % 4) {
        case 0:
          assert.equal(value.id, ids[i]);
          assert.equal(value.owner, `owner-${i}`);
          assert.equal(value.fence, 1);
          break;
        case 1: assert.equal(value, false, `enqueue #${i}`); break;
        case 2: assert.equal(value, null, `claim #${i}`); break;
        default: assert.equal(value, true, `renew #${i}`);
      }
    });

    const states = await Promise.all(ids.map((id) => c.state(id)));
    states.forEach((row, i) => {
      assert.equal(row.id, ids[i]);
      assert.equal(row.owner, `owner-${i}`);
    });
    assert.equal(c._pending.size, 0, 'no call left pending');
  });

  it('C3.7 one client\'s pipelined requests are applied in the order they were made', async () => {
    const id = uniqueId('order');
    const results = await Promise.all([
      c.enqueue(id),
      c.claim(id, 'w1', 60),
      c.release(id, 'w1', 1),
      c.claim(id, 'w2', 60),
      c.complete(id, 'w2', 2, 'second lease'),
      c.claim(id, 'w3', 60),
      c.state(id),
    ]);
    assert.deepEqual(results.slice(0, 6), [true, 1, true, 2, true, null]);
    assert.equal(results[6].result, 'second lease');
    assert.equal(results[6].fence, 2);
  });

  it('C3.7 10 clients racing for one job: exactly one winner, every time', async () => {
    const clients = Array.from({ length: 10 }, () => new Client(daemon.endpoint, { timeoutMs: 10000 }));
    try {
      await Promise.all(clients.map((client) => client.ping())); // all connected
      for (let round = 0; round < 20; round++) {
        const id = uniqueId('race');
        assert.equal(await c.enqueue(id), true);
        const answers = await Promise.all(clients.map((client, i) => client.claim(id, `racer-${i}`, 60)));
        const winners = answers.map((fence, i) => [fence, i]).filter(([fence]) => fence !== null);
        assert.equal(winners.length, 1, `round ${round}: ${JSON.stringify(answers)}`);
        const [[fence, winner]] = winners;
        assert.equal(fence, 1);
        const row = await c.state(id);
        assert.equal(row.owner, `racer-${winner}`);
        assert.equal(row.fence, 1);
      }
    } finally {
      await Promise.all(clients.map((client) => client.close()));
    }
  });
});
