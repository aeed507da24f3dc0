'use strict';

// fenceq: the Node.js client for fenceqd, a lease-and-fencing-token job queue.
// The contract it keeps is the project's docs/contract.md (clauses C1-C4); the wire
// format is protocol v1.

const {
  Client, DEFAULT_ENDPOINT, SERVICE_ENDPOINT, resolveEndpoint, curveKeys,
} = require('./lib/client');
const { FenceqError } = require('./lib/errors');
const { Snooze } = require('./lib/worker');
const { Subscriber, subscribe } = require('./lib/events');
const {
  fencedUpsert, fencedUpdate, fencedStatement, quoteIdentifier, RowMissing,
} = require('./lib/fenced');

module.exports = {
  Client, FenceqError, Snooze, DEFAULT_ENDPOINT, SERVICE_ENDPOINT, resolveEndpoint, curveKeys,
  Subscriber, subscribe,
  fencedUpsert, fencedUpdate, fencedStatement, quoteIdentifier, RowMissing,
};
