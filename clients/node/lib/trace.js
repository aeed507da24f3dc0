'use strict';

// W3C trace context through OpenTelemetry (issue 33), when the application
// has @opentelemetry/api (an optional peer dependency: the client works the
// same without it, and this module then does nothing).
//
//  - On enqueue (enqueueMany's entries, enqueueAndWait, enqueueFanIn) the
//    client injects the active context's trace context into the job's
//    headers with the registered propagator (W3C: `traceparent`, and
//    `tracestate` when there is one), unless the caller set a `traceparent`
//    itself. A key the caller set is never replaced.
//  - workNext extracts the context from the job's headers (on ROOT_CONTEXT:
//    the job's trace is its enqueuer's, not the worker loop's) and runs the
//    job function in a span `fenceq.process <queue>` (SpanKind.CONSUMER) of
//    the tracer 'fenceq', a child of the enqueuer's span.
//
// Nothing is injected while no propagator is registered (the API's default
// propagator writes nothing), and the span is a non-recording one while no
// tracer provider is. The Client option `traceContext: false` turns both off.
// A failing propagator or tracer never fails a call: the job is enqueued, or
// run, without trace context.

/** The most bytes of keys and values a job's headers may hold (the daemon refuses more). */
const MAX_HEADERS_BYTES = 4096;

let api; // undefined: not looked up yet; null: not installed

/** @opentelemetry/api, or null when the application does not have it. */
function otel() {
  if (api === undefined) {
    try {
      api = require('@opentelemetry/api');
    } catch {
      api = null;
    }
  }
  return api;
}

/** A plain object (`{...}` or `Object.create(null)`): headers a carrier can be made of. */
function isPlainObject(value) {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function headersBytes(headers) {
  let bytes = 0;
  for (const [key, value] of Object.entries(headers)) {
    bytes += Buffer.byteLength(key) + Buffer.byteLength(String(value));
  }
  return bytes;
}

/**
 * The active context's trace context as headers (`{traceparent, ...}`, the
 * registered propagator's keys and string values), or null when there is
 * none to send: no @opentelemetry/api, no propagator registered, no span
 * active (W3C writes nothing then), or a propagator that threw.
 * @returns {Record<string, string> | null}
 */
function activeTraceHeaders() {
  const otelApi = otel();
  if (otelApi === null) return null;
  const carrier = {};
  try {
    otelApi.propagation.inject(otelApi.context.active(), carrier);
  } catch {
    return null;
  }
  const out = {};
  for (const [key, value] of Object.entries(carrier)) {
    if (key !== '' && typeof value === 'string') out[key] = value;
  }
  return Object.keys(out).length > 0 ? out : null;
}

/**
 * A job's headers with `injected` (activeTraceHeaders) added: the caller's
 * first, as given, then the injected keys the caller did not set. Unchanged
 * (the same value) when there is nothing to inject, when the caller set a
 * `traceparent` (its trace wins), when the headers are not a plain object
 * (the daemon's to refuse), or when the injected keys would take them past
 * the daemon's 4,096 bytes (the job goes without trace context rather than
 * being refused).
 */
function withTraceHeaders(headers, injected) {
  if (injected === null) return headers;
  if (headers === undefined || headers === null) {
    return headersBytes(injected) <= MAX_HEADERS_BYTES ? { ...injected } : headers;
  }
  if (!isPlainObject(headers) || Object.hasOwn(headers, 'traceparent')) return headers;
  const out = { ...headers };
  let added = false;
  for (const [key, value] of Object.entries(injected)) {
    if (!Object.hasOwn(out, key)) {
      out[key] = value;
      added = true;
    }
  }
  if (!added || headersBytes(out) > MAX_HEADERS_BYTES) return headers;
  return out;
}

/**
 * Runs `call()` (the job function) in the context extracted from the job's
 * headers, in a span `fenceq.process <queue>` of the tracer 'fenceq': ended
 * when `call` settles, its status ERROR (and the exception recorded) when it
 * throws something `failed(err)` says is a failure (a Snooze is not). Without
 * @opentelemetry/api (or with `enabled` false) it only calls `call()`.
 * @param {boolean} enabled the client's traceContext option
 * @param {string} queue
 * @param {{id: string, fence: number, attempts: number, headers?: Record<string, string>}} job
 * @param {() => Promise<any>} call
 * @param {(err: unknown) => boolean} failed
 */
function runInJobContext(enabled, queue, job, call, failed) {
  const otelApi = enabled ? otel() : null;
  if (otelApi === null) return call();
  let parent;
  let tracer;
  try {
    parent = otelApi.propagation.extract(otelApi.ROOT_CONTEXT, job.headers ?? {});
    tracer = otelApi.trace.getTracer('fenceq');
  } catch {
    return call();
  }
  const attributes = {
    'messaging.system': 'fenceq',
    'messaging.operation.type': 'process',
    'messaging.destination.name': queue,
    'messaging.message.id': job.id,
    'fenceq.fence': job.fence,
    'fenceq.attempts': job.attempts,
  };
  let span;
  try {
    span = tracer.startSpan(`fenceq.process ${queue}`,
      { kind: otelApi.SpanKind.CONSUMER, attributes }, parent);
  } catch {
    return otelApi.context.with(parent, call);
  }
  const settle = (fn) => {
    try {
      fn();
    } catch {
      // a tracer's own failure is not the job's
    }
  };
  return otelApi.context.with(otelApi.trace.setSpan(parent, span), async () => {
    try {
      return await call();
    } catch (err) {
      if (failed(err)) {
        settle(() => {
          span.recordException(err instanceof Error ? err : String(err));
          span.setStatus({ code: otelApi.SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
        });
      }
      throw err;
    } finally {
      settle(() => span.end());
    }
  });
}

module.exports = { MAX_HEADERS_BYTES, activeTraceHeaders, withTraceHeaders, runInJobContext };
