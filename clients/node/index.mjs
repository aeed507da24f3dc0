// ESM entry: the implementation is CommonJS (index.js); this only re-exports it
// so `import { Client } from 'fenceq'` and `require('fenceq')` share one module.
import fenceq from './index.js';

export const {
  Client, FenceqError, Snooze, DEFAULT_ENDPOINT, SERVICE_ENDPOINT, resolveEndpoint, curveKeys,
  Subscriber, subscribe,
  fencedUpsert, fencedUpdate, fencedStatement, quoteIdentifier, RowMissing,
} = fenceq;
export default fenceq;
