'use strict';

// Events (issue 33; protocol/PROTOCOL.md, "Events: a stream of committed
// changes"): `fenceqd --events ENDPOINT` publishes every committed job change
// on a ZeroMQ XPUB socket, as two frames: the topic (the job's queue name,
// UTF-8) and a msgpack map {seq, t, event, id, queue, fence, owner?, group?}.
//
// A Subscriber is one ZeroMQ SUB socket connected to that endpoint. Its
// subscription is the queue's name, which ZeroMQ matches by prefix
// ("emails" also gets "emails-eu"): next() compares the topic frame with the
// queue exactly and skips the others.
//
// Receiving is pulled, never pushed: next() asks the socket for one message
// at a time, so a subscriber that stops reading leaves its messages in
// ZeroMQ's queue (up to the high-water marks; past them the daemon drops
// events, which shows as a gap in `seq`: `missed`), not in this process's
// memory. One receive is in progress at most: a next() that times out leaves
// it for the next call, so no message is lost to a timeout.

const zmq = require('zeromq');
const codec = require('./codec');
const { FenceqError } = require('./errors');
const { curveSocketOptions } = require('./client');

// setTimeout fires at once beyond this (about 24.8 days): such a timeout is
// treated as no timeout at all, as the Client does.
const MAX_TIMER_MS = 2 ** 31 - 1;
const MAX_QUEUE_BYTES = 256;
const OPTION_KEYS = ['queue', 'curve'];

function isPlainMap(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value) &&
    !(value instanceof Uint8Array);
}

/**
 * The seq bookkeeping of one subscriber: the state after an event `seq`
 * arrived when the last one was `lastSeq` (null: none yet) and `missed` were
 * missed so far. A seq past lastSeq + 1 is a gap (events the daemon dropped,
 * or, with a queue filter, published for other queues): seq - lastSeq - 1 are
 * added to missed. A seq at or below lastSeq is a daemon that restarted (seq
 * starts at 1 again): lastSeq starts over from it and nothing is counted.
 * The first event counts nothing either (there is no replay: a subscriber
 * gets the events from when it connected).
 * @param {{lastSeq: number|null, missed: number}} state
 * @param {number} seq
 * @returns {{lastSeq: number, missed: number}}
 */
function advanceSeq(state, seq) {
  const { lastSeq, missed } = state;
  if (lastSeq === null || seq <= lastSeq) return { lastSeq: seq, missed };
  return { lastSeq: seq, missed: missed + (seq - lastSeq - 1) };
}

function badEvent(endpoint, why) {
  return new FenceqError('bad_reply', `fenceq: a malformed event from ${endpoint}: ${why}`);
}

/**
 * One received message as an event object, checked: two frames, the second
 * a msgpack map with the keys and types of the protocol, its `queue` the
 * topic. Keys the protocol does not name are left out.
 * @returns {{topic: Buffer, event: object}}
 * @throws {FenceqError} bad_reply naming what is wrong
 */
function parseEvent(frames, endpoint) {
  if (!Array.isArray(frames) || frames.length !== 2) {
    throw badEvent(endpoint, `${Array.isArray(frames) ? frames.length : 0} frames, expected 2 (topic, map)`);
  }
  const [topic, body] = frames;
  let map;
  try {
    map = codec.decode(body);
  } catch (err) {
    throw badEvent(endpoint, `not msgpack (${err.message})`);
  }
  if (!isPlainMap(map)) throw badEvent(endpoint, 'not a msgpack map');
  const checks = [
    ['seq', Number.isInteger(map.seq) && map.seq >= 1, 'an integer >= 1'],
    ['t', typeof map.t === 'number' && Number.isFinite(map.t), 'a number'],
    ['event', typeof map.event === 'string', 'a string'],
    ['id', typeof map.id === 'string', 'a string'],
    ['queue', typeof map.queue === 'string', 'a string'],
    ['fence', Number.isInteger(map.fence) && map.fence >= 0, 'an integer >= 0'],
    ['owner', map.owner === undefined || typeof map.owner === 'string', 'a string when present'],
    ['group', map.group === undefined || typeof map.group === 'string', 'a string when present'],
  ];
  for (const [key, ok, expected] of checks) {
    if (!ok) {
      throw badEvent(endpoint, key in map
        ? `'${key}' must be ${expected}, got ${JSON.stringify(map[key]) ?? typeof map[key]}`
        : `no '${key}'`);
    }
  }
  if (!Buffer.from(map.queue, 'utf8').equals(Buffer.from(topic))) {
    throw badEvent(endpoint, `its queue ${JSON.stringify(map.queue)} is not its topic ` +
      `${JSON.stringify(Buffer.from(topic).toString('utf8'))}`);
  }
  const event = {
    seq: map.seq, t: map.t, event: map.event, id: map.id, queue: map.queue, fence: map.fence,
  };
  if (map.owner !== undefined) event.owner = map.owner;
  if (map.group !== undefined) event.group = map.group;
  return { topic, event };
}

class Subscriber {
  /**
   * Connects a ZeroMQ SUB socket to a daemon's `--events` endpoint and
   * subscribes to one queue, or to every queue. Connects lazily, as the
   * Client does: constructing never waits and never fails because the daemon
   * is not there. ZeroMQ subscriptions take a moment to reach the daemon:
   * events published before that are not delivered (no replay).
   *
   * @param {string} endpoint the daemon's --events endpoint, e.g.
   *   'ipc://var/fenceqd-events.sock'
   * @param {{queue?: string|null, curve?: {serverPublic: string, publicKey: string,
   *   secretKey: string}|null}} [options] queue: only this queue's events
   *   (1..256 bytes of UTF-8; compared exactly); absent or null: every
   *   queue. curve: ZeroMQ CURVE keys for a tcp:// endpoint, as Client's
   *   (see curveKeys); a refused handshake shows only as no events
   * @throws {FenceqError} invalid_argument for a malformed endpoint, queue,
   *   curve key or option (before any socket is made)
   */
  constructor(endpoint, options) {
    if (typeof endpoint !== 'string' || endpoint === '') {
      throw new FenceqError('invalid_argument',
        'fenceq: Subscriber: endpoint must be a non-empty string (the daemon\'s --events endpoint)');
    }
    if (options !== undefined && options !== null && !isPlainMap(options)) {
      throw new FenceqError('invalid_argument', 'fenceq: Subscriber options must be an object');
    }
    for (const key of Object.keys(options ?? {})) {
      if (!OPTION_KEYS.includes(key)) {
        throw new FenceqError('invalid_argument',
          `fenceq: Subscriber: unknown option '${key}' (expected: ${OPTION_KEYS.join(', ')})`);
      }
    }
    const queue = options?.queue ?? null;
    if (queue !== null) {
      const bytes = typeof queue === 'string' ? Buffer.byteLength(queue, 'utf8') : -1;
      if (bytes < 1 || bytes > MAX_QUEUE_BYTES) {
        throw new FenceqError('invalid_argument',
          'fenceq: Subscriber: queue must be a string of 1..256 bytes (leave it out for every queue), ' +
          `got ${typeof queue === 'string' ? `${bytes} bytes` : typeof queue}`);
      }
    }
    const curve = options?.curve ?? undefined;
    const curveOptions = curve === undefined ? {} : curveSocketOptions(curve);
    if (curve !== undefined && !endpoint.startsWith('tcp://')) {
      throw new FenceqError('invalid_argument',
        `fenceq: CURVE keys are for tcp:// endpoints; fenceqd serves ${endpoint} without CURVE`);
    }

    /** The endpoint connected to. */
    this.endpoint = endpoint;
    /** The queue subscribed to, or null: every queue. */
    this.queue = queue;
    this._topic = queue === null ? null : Buffer.from(queue, 'utf8');
    this._seq = { lastSeq: null, missed: 0 };
    this._closed = false;
    /** The receive in progress (at most one), kept across a next() that timed out. */
    this._inflight = null;
    /** The previous next() call: calls take their turns, each gets its own event. */
    this._turn = Promise.resolve();

    // linger 0: nothing is sent on a SUB but subscriptions; close() never waits.
    this._socket = new zmq.Subscriber({ linger: 0, ...curveOptions });
    try {
      this._socket.connect(endpoint);
    } catch (err) {
      this._closed = true;
      this._socket.close();
      throw new FenceqError('invalid_argument',
        `fenceq: cannot connect to endpoint ${JSON.stringify(endpoint)}: ${err.message}`);
    }
    if (this._topic === null) this._socket.subscribe();
    else this._socket.subscribe(this._topic);
  }

  /**
   * The `seq` of the last event received (of any queue the socket got,
   * including the ones next() skipped), or null before the first.
   * @returns {number|null}
   */
  get lastSeq() {
    return this._seq.lastSeq;
  }

  /**
   * How many events the gaps in `seq` skipped since this subscriber
   * connected (a restarted daemon's seq starting over is not a gap). `seq`
   * counts every event of the daemon: with a `queue`, the other queues'
   * events are gaps too, so `missed` tells dropped events only for a
   * subscriber of every queue.
   * @returns {number}
   */
  get missed() {
    return this._seq.missed;
  }

  /** true after close(). */
  get closed() {
    return this._closed;
  }

  /**
   * The next event of the queue (of any queue without one), in the daemon's
   * commit order: `{seq, t, event, id, queue, fence, owner?, group?}`.
   * @param {{timeout?: number}} [options] timeout: at most this many
   *   milliseconds (default: wait until one comes)
   * @returns {Promise<object|null>} null when `timeout` passed first, or
   *   close() was called while it waited
   * @throws {FenceqError} bad_reply: a malformed message (it is consumed: the
   *   next call reads the one after); misuse: a call after close();
   *   transport: the socket failed; invalid_argument: a bad timeout
   */
  next(options) {
    let timeout = Infinity;
    if (options !== undefined && options !== null) {
      if (!isPlainMap(options)) {
        return Promise.reject(new FenceqError('invalid_argument', 'fenceq: next options must be an object'));
      }
      for (const key of Object.keys(options)) {
        if (key !== 'timeout') {
          return Promise.reject(new FenceqError('invalid_argument',
            `fenceq: next: unknown option '${key}' (expected: timeout)`));
        }
      }
      timeout = options.timeout ?? Infinity;
      if (typeof timeout !== 'number' || Number.isNaN(timeout) || timeout < 0) {
        return Promise.reject(new FenceqError('invalid_argument',
          `fenceq: next: timeout must be a number of milliseconds >= 0, got ${String(timeout)}`));
      }
    }
    if (this._closed) {
      return Promise.reject(new FenceqError('misuse', 'fenceq: next on a closed Subscriber'));
    }
    const deadline = timeout <= MAX_TIMER_MS ? Date.now() + timeout : Infinity;
    const result = this._turn.then(() => this._next(deadline));
    this._turn = result.then(() => {}, () => {});
    return result;
  }

  async _next(deadline) {
    for (;;) {
      if (this._closed) return null;
      const frames = await this._receive(deadline);
      if (frames === null) return null;
      const { topic, event } = parseEvent(frames, this.endpoint);
      this._seq = advanceSeq(this._seq, event.seq);
      if (this._topic === null || this._topic.equals(Buffer.from(topic))) return event;
      // A queue whose name starts with ours: not ours.
    }
  }

  /** One message's frames, or null when the deadline passed or the subscriber closed. */
  async _receive(deadline) {
    if (this._inflight === null) {
      this._inflight = this._socket.receive().then(
        (frames) => ({ frames }),
        (error) => ({ error }));
    }
    const inflight = this._inflight;
    let got;
    if (deadline === Infinity) {
      got = await inflight;
    } else {
      let timer;
      const expired = new Promise((resolve) => {
        timer = setTimeout(() => resolve(null), Math.max(0, deadline - Date.now()));
      });
      try {
        got = await Promise.race([inflight, expired]);
      } finally {
        clearTimeout(timer);
      }
      if (got === null) return null; // the receive stays in progress for the next call
    }
    this._inflight = null;
    if (got.error) {
      if (this._closed) return null;
      throw new FenceqError('transport', `fenceq: cannot receive from ${this.endpoint}: ${got.error.message}`);
    }
    return got.frames;
  }

  /**
   * `for await (const event of subscriber)`: each event as next() gives it,
   * without a timeout. The loop ends when close() is called; leaving it
   * (break, return, a throw) closes the subscriber, as for a Node stream.
   * @returns {AsyncGenerator<object, void, undefined>}
   */
  async* [Symbol.asyncIterator]() {
    try {
      while (!this._closed) {
        const event = await this.next();
        if (event === null) return;
        yield event;
      }
    } finally {
      this.close();
    }
  }

  /**
   * Closes the socket. Idempotent. A next() that waits resolves null; later
   * calls reject with misuse. An open subscriber keeps the Node process
   * alive: close it when done.
   */
  close() {
    if (this._closed) return;
    this._closed = true;
    this._socket.close();
  }
}

/**
 * `new Subscriber(endpoint, options)`: the events of `options.queue` (every
 * queue without one) from a daemon's --events endpoint.
 * @returns {Subscriber}
 */
function subscribe(endpoint, options) {
  return new Subscriber(endpoint, options);
}

module.exports = { Subscriber, subscribe, advanceSeq, parseEvent };
