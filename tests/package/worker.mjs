// A consumer's ES module worker for the package checks: story.cjs with the
// package's "import" export (index.mjs).
// Usage: node worker.mjs ENDPOINT JOB
import { Client } from 'fenceq';
import { story } from './story.cjs';

console.log('module:', import.meta.resolve('fenceq'));
await story(Client, process.argv[2], process.argv[3]);
