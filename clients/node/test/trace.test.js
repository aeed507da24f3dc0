'use strict';

// W3C trace context through OpenTelemetry (issue 33; lib/trace.js). With
// @opentelemetry/api's propagator (W3C, from @opentelemetry/core) and a
// context manager (AsyncLocalStorage, from @opentelemetry/context-async-hooks)
// registered, an enqueue inside a span stores that span's traceparent in the
// job's headers, and workNext runs the job function in the context extracted
// from them, in a span `fenceq.process <queue>`. Without a registration
// nothing is injected; without the package at all the client works as
// before. The spans are non-recording ones with a known trace id
// (trace.wrapSpanContext), or those of a small recording tracer below.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const crypto = require('node:crypto');
const path = require('node:path');
const api = require('@opentelemetry/api');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { Client, Snooze } = require('fenceq');
const { withDaemon, startDaemon, uniqueId, recordRequests } = require('./helpers');

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`;

/** Runs `fn` with a non-recording span of a known trace id active. */
function inSpan(fn, traceId = TRACE_ID, spanId = SPAN_ID) {
  const span = api.trace.wrapSpanContext({ traceId, spanId, traceFlags: api.TraceFlags.SAMPLED });
  return api.context.with(api.trace.setSpan(api.context.active(), span), fn);
}

/** The span context active where it is called (undefined: none). */
function activeSpanContext() {
  return api.trace.getSpanContext(api.context.active());
}

/** A tracer that records the spans it starts (name, options, parent, status, end). */
class RecordingTracer {
  constructor() {
    this.spans = [];
  }

  startSpan(name, options, ctx) {
    const parent = api.trace.getSpanContext(ctx ?? api.context.active());
    const spanContext = {
      traceId: parent?.traceId ?? crypto.randomBytes(16).toString('hex'),
      spanId: crypto.randomBytes(8).toString('hex'),
      traceFlags: api.TraceFlags.SAMPLED,
    };
    const record = { name, options, parent, spanContext, ended: false, status: undefined, exceptions: [] };
    this.spans.push(record);
    const span = {
      spanContext: () => spanContext,
      setAttribute: () => span,
      setAttributes: () => span,
      addEvent: () => span,
      addLink: () => span,
      addLinks: () => span,
      updateName: () => span,
      setStatus: (status) => {
        record.status = status;
        return span;
      },
      recordException: (exception) => record.exceptions.push(exception),
      isRecording: () => true,
      end: () => {
        record.ended = true;
      },
    };
    return span;
  }

  startActiveSpan() {
    throw new Error('fenceq starts its spans with startSpan');
  }
}

describe('trace context: OpenTelemetry not registered', () => {
  let c;
  withDaemon({ clock: 'server' }, 1, (...f) => { [, c] = f; });

  it('nothing is injected, even inside a span, and the job function runs in no span', async () => {
    const q = uniqueId('plain');
    const { sent, restore } = recordRequests(c);
    try {
      await inSpan(() => c.enqueue(`${q}-1`, { queue: q }));
      await inSpan(() => c.enqueueMany([{ id: `${q}-2`, queue: q }]));
    } finally {
      restore();
    }
    assert.deepEqual(sent.map(([, f]) => f), [{ id: `${q}-1`, queue: q }, { jobs: [{ id: `${q}-2`, queue: q }] }]);
    assert.equal('headers' in (await c.job(`${q}-1`)), false);
    const seen = [];
    for (let i = 0; i < 2; i++) {
      await c.workNext(q, 'W', 30, (job) => {
        seen.push([job.headers, activeSpanContext()]);
        return 'ok';
      }, { wait: 1 });
    }
    assert.deepEqual(seen, [[undefined, undefined], [undefined, undefined]]);
  });
});

describe('trace context: W3C propagator and an AsyncLocalStorage context manager registered', () => {
  let daemon;
  let c;
  let untraced;
  let tracer;
  withDaemon({ clock: 'server' }, 1, (...f) => { [daemon, c] = f; });
  before(() => {
    assert.equal(api.propagation.setGlobalPropagator(new W3CTraceContextPropagator()), true);
    assert.equal(api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()), true);
    untraced = new Client(daemon.endpoint, { timeoutMs: 5000, traceContext: false });
  });
  after(async () => {
    await untraced?.close();
    api.trace.disable();
    api.propagation.disable();
    api.context.disable();
  });

  it('enqueue inside a span stores its traceparent; the claim and job give it back', async () => {
    const q = uniqueId('traced');
    assert.equal(await inSpan(() => c.enqueue(`${q}-1`, { queue: q })), true);
    assert.deepEqual((await c.job(`${q}-1`)).headers, { traceparent: TRACEPARENT });
    assert.deepEqual((await c.claimNext(q, 'W', 30)).headers, { traceparent: TRACEPARENT });
  });

  it('enqueueMany\'s entries, enqueueAndWait and enqueueFanIn inject too; a caller\'s traceparent wins', async () => {
    const q = uniqueId('many');
    const other = `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01`;
    const { sent, restore } = recordRequests(c);
    try {
      await inSpan(async () => {
        assert.deepEqual(await c.enqueueMany([
          { id: `${q}-1`, queue: q },
          { id: `${q}-2`, queue: q, headers: { tenant: '42' } },
          { id: `${q}-3`, queue: q, headers: { traceparent: other } },
          { id: `${q}-4`, queue: q, headers: { tracestate: 'mine=1' } },
        ]), [true, true, true, true]);
        assert.equal(await c.enqueueAndWait(`${q}-5`, { queue: q, wait: 0 }), null);
        assert.equal(await c.enqueue(`${q}-6`, { queue: q, headers: { traceparent: other } }), true);
        assert.deepEqual(await c.enqueueFanIn([`${q}-7`], `${q}-8`, { queue: q }), [true, true]);
      });
    } finally {
      restore();
    }
    const headersOf = async (n) => (await c.job(`${q}-${n}`)).headers;
    assert.deepEqual(await headersOf(1), { traceparent: TRACEPARENT });
    assert.deepEqual(await headersOf(2), { tenant: '42', traceparent: TRACEPARENT });
    assert.deepEqual(await headersOf(3), { traceparent: other });
    assert.deepEqual(await headersOf(4), { tracestate: 'mine=1', traceparent: TRACEPARENT });
    assert.deepEqual(await headersOf(5), { traceparent: TRACEPARENT });
    assert.deepEqual(await headersOf(6), { traceparent: other });
    assert.deepEqual(await headersOf(7), { traceparent: TRACEPARENT });
    assert.deepEqual(await headersOf(8), { traceparent: TRACEPARENT });
    // Added in the wire's place: the entry's last field, before enqueue_and_wait's wait.
    assert.deepEqual(Object.keys(sent[0][1].jobs[1]), ['id', 'queue', 'headers']);
    assert.deepEqual(Object.keys(sent[1][1]), ['id', 'queue', 'headers', 'wait']);
  });

  it('nothing is injected outside a span, nor with traceContext: false, nor past 4,096 bytes', async () => {
    const q = uniqueId('none');
    assert.equal(await c.enqueue(`${q}-1`, { queue: q }), true);
    assert.equal(await inSpan(() => untraced.enqueue(`${q}-2`, { queue: q })), true);
    assert.deepEqual(await inSpan(() => untraced.enqueueMany([{ id: `${q}-3`, queue: q }])), [true]);
    const full = { k: 'x'.repeat(4096 - 1 - 10) }; // 4,086 bytes: no room for a traceparent
    assert.equal(await inSpan(() => c.enqueue(`${q}-4`, { queue: q, headers: full })), true);
    for (const n of [1, 2, 3]) assert.equal('headers' in (await c.job(`${q}-${n}`)), false, `${q}-${n}`);
    assert.deepEqual((await c.job(`${q}-4`)).headers, full);
  });

  it('workNext runs the job function in the extracted context: the enqueuer\'s trace id', async () => {
    const q = uniqueId('work');
    await inSpan(() => c.enqueue(`${q}-1`, { queue: q }));
    await c.enqueue(`${q}-2`, { queue: q }); // no trace: a root of its own, not the worker's span
    await inSpan(() => c.enqueue(`${q}-3`, { queue: q }));
    const seen = [];
    const fn = async (job) => {
      await new Promise((resolve) => setTimeout(resolve, 5)); // across an await too
      const sc = activeSpanContext();
      seen.push([job.id, job.headers?.traceparent, sc && api.isSpanContextValid(sc) ? sc.traceId : null]);
      return 'ok';
    };
    // The worker loop itself runs inside another trace: the job's is its enqueuer's.
    const elsewhere = 'f'.repeat(32);
    let next = null;
    for (let i = 0; i < 3; i++) { // claimNext, then the jobs completeAndClaimNext took
      next = (await inSpan(() => c.workNext(q, 'W', 30, fn, { takeNext: true, job: next, wait: 1 }),
        elsewhere)).next;
    }
    assert.equal(next, null);
    // With prefetch: claimNext with max.
    const other = '2'.repeat(32);
    await inSpan(() => c.enqueue(`${q}-4`, { queue: q }), other);
    await c.enqueue(`${q}-5`, { queue: q });
    const round = await inSpan(() => c.workNext(q, 'W', 30, fn, { prefetch: 2, wait: 1 }), elsewhere);
    assert.deepEqual(round.outcomes.map((o) => o.status), ['completed', 'completed']);
    assert.deepEqual(seen, [[`${q}-1`, TRACEPARENT, TRACE_ID], [`${q}-2`, undefined, null],
      [`${q}-3`, TRACEPARENT, TRACE_ID], [`${q}-4`, `00-${other}-${SPAN_ID}-01`, other],
      [`${q}-5`, undefined, null]]);
  });

  it('with traceContext: false the job function runs in the worker\'s own context', async () => {
    const q = uniqueId('off');
    await inSpan(() => c.enqueue(`${q}-1`, { queue: q }));
    let seen;
    await untraced.workNext(q, 'W', 30, (job) => {
      seen = [job.headers, activeSpanContext()];
      return 'ok';
    }, { wait: 1 });
    assert.deepEqual(seen, [{ traceparent: TRACEPARENT }, undefined]);
  });

  it('a span fenceq.process <queue> per job, a consumer child of the enqueuer\'s; jobs it enqueues continue the trace', async () => {
    tracer = new RecordingTracer();
    assert.equal(api.trace.setGlobalTracerProvider({ getTracer: () => tracer }), true);
    const q = uniqueId('spans');
    await inSpan(() => c.enqueue(`${q}-ok`, { queue: q }));
    await inSpan(() => c.enqueue(`${q}-boom`, { queue: q }));
    await inSpan(() => c.enqueue(`${q}-later`, { queue: q }));
    const fn = async (job) => {
      if (job.id.endsWith('-boom')) throw new Error('boom');
      if (job.id.endsWith('-later')) throw new Snooze(3600);
      await c.enqueue(`${q}-child`, { queue: `${q}-children` }); // in the job's span
      return 'ok';
    };
    await c.workNext(q, 'W', 30, fn, { wait: 1 });
    await assert.rejects(c.workNext(q, 'W', 30, fn, { wait: 1 }), /boom/);
    assert.equal((await c.workNext(q, 'W', 30, fn, { wait: 1 })).snoozed, true);
    assert.equal(tracer.spans.length, 3);
    for (const span of tracer.spans) {
      assert.equal(span.name, `fenceq.process ${q}`);
      assert.equal(span.options.kind, api.SpanKind.CONSUMER);
      assert.equal(span.options.attributes['messaging.system'], 'fenceq');
      assert.equal(span.options.attributes['messaging.destination.name'], q);
      assert.deepEqual([span.parent.traceId, span.parent.spanId], [TRACE_ID, SPAN_ID]);
      assert.equal(span.ended, true);
    }
    const [ok, boom, later] = tracer.spans;
    assert.equal(ok.options.attributes['messaging.message.id'], `${q}-ok`);
    assert.equal(ok.status, undefined);
    assert.equal(boom.status.code, api.SpanStatusCode.ERROR);
    assert.equal(boom.exceptions[0].message, 'boom');
    assert.equal(later.status, undefined); // a Snooze is not a failure
    const child = (await c.job(`${q}-child`)).headers.traceparent;
    assert.equal(child, `00-${TRACE_ID}-${ok.spanContext.spanId}-01`);
  });
});

describe('trace context: @opentelemetry/api not installed', () => {
  let daemon;
  before(async () => {
    daemon = await startDaemon({ clock: 'server' });
  });
  after(async () => {
    await daemon?.stop();
  });

  it('the client enqueues and works as before (the package is looked up lazily, and missed)', async () => {
    // A process whose require cannot find @opentelemetry/api, as an
    // application without it.
    const script = `
      const Module = require('node:module');
      const resolve = Module._resolveFilename;
      Module._resolveFilename = function (request, ...rest) {
        if (request === '@opentelemetry/api') {
          const err = new Error("Cannot find module '@opentelemetry/api'");
          err.code = 'MODULE_NOT_FOUND';
          throw err;
        }
        return resolve.call(this, request, ...rest);
      };
      const { Client } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
      (async () => {
        const c = new Client(process.argv[1]);
        await c.enqueue('j1', { queue: 'q', headers: { a: '1' } });
        await c.enqueueMany([{ id: 'j2', queue: 'q' }]);
        const one = await c.workNext('q', 'w', 30, (job) => JSON.stringify(job.headers ?? null), { wait: 1 });
        const two = await c.workNext('q', 'w', 30, (job) => JSON.stringify(job.headers ?? null), { wait: 1 });
        console.log(JSON.stringify([one.result, two.result, Object.keys(require.cache)
          .some((f) => f.includes('@opentelemetry'))]));
        await c.close();
      })().catch((err) => { console.error(err); process.exit(1); });
    `;
    const stdout = await new Promise((resolve, reject) => {
      execFile(process.execPath, ['-e', script, daemon.endpoint], { timeout: 30000 }, (err, out, errOut) => {
        if (err) reject(new Error(`${err.message}\n${errOut}`));
        else resolve(out);
      });
    });
    assert.deepEqual(JSON.parse(stdout), ['{"a":"1"}', 'null', false]);
  });
});
