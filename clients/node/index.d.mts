// ESM view of the declarations in index.d.ts (one source of truth).
import * as fenceq from './index.js';

export * from './index.js';
export default fenceq;
