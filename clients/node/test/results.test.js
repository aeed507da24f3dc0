'use strict';

// results (issue 32, fan-in: a job reads its parents' results in one round
// trip) through the Node client, against a real client-clock fenceqd.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { withDaemon, rejectsWith, recordRequests, uniqueId } = require('./helpers');

describe('results', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('maps each id asked, once, to {state, result}, or null for an unknown id', async () => {
    const done = uniqueId('parent-done');
    const ready = uniqueId('parent-ready');
    const missing = uniqueId('missing');
    assert.equal(await c.enqueue(done, { now: 10 }), true);
    assert.equal(await c.enqueue(ready, { now: 10 }), true);
    const fence = await c.claim(done, 'w', 10, { now: 10 });
    assert.equal(await c.complete(done, 'w', fence, 'A', { now: 11 }), true);
    const { sent, restore } = recordRequests(c);
    const answer = await c.results([ready, missing, done, ready], { now: 12 });
    restore();
    assert.deepEqual(sent, [['results', { ids: [ready, missing, done, ready], now: 12 }]]);
    assert.deepEqual(answer, {
      [ready]: { state: 'ready', result: null },
      [missing]: null,
      [done]: { state: 'done', result: 'A' },
    });
    // Duplicates collapse; the wire's order (first asked) is the object's here.
    assert.deepEqual(Object.keys(answer), [ready, missing, done]);
  });

  it('a leased job, and a job completed with null, have a null result', async () => {
    const leased = uniqueId('leased');
    const nulled = uniqueId('nulled');
    assert.equal(await c.enqueue(leased, { now: 20 }), true);
    assert.equal(await c.enqueue(nulled, { now: 20 }), true);
    await c.claim(leased, 'w', 100, { now: 20 });
    const fence = await c.claim(nulled, 'w', 100, { now: 20 });
    assert.equal(await c.complete(nulled, 'w', fence, null, { now: 21 }), true);
    assert.deepEqual(await c.results([leased, nulled]), {
      [leased]: { state: 'leased', result: null },
      [nulled]: { state: 'done', result: null },
    });
  });

  it('bad ids are the daemon\'s coded errors', async () => {
    await rejectsWith(c.results([]), 'invalid_argument');
    await rejectsWith(c.results(['']), 'invalid_argument');
    await rejectsWith(c.results(Array.from({ length: 1001 }, (_, i) => `j${i}`)), 'invalid_argument');
    await rejectsWith(c.results(['a', 5]), 'bad_request');
    await rejectsWith(c.results('a'), 'bad_request');
    await rejectsWith(c.results(), 'bad_request');
    await rejectsWith(c.results(['a'], { now: 1, wait: 1 }), 'invalid_argument');  // unknown option
    const many = await c.results(Array.from({ length: 1000 }, (_, i) => uniqueId(`m${i}`)));
    assert.equal(Object.keys(many).length, 1000);
  });
});
