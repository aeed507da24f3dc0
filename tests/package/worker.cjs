// A consumer's CommonJS worker for the package checks (see worker.py): copied
// into a project that installed the npm tarball, it plays story.cjs with the
// package's "require" export (index.js).
// Usage: node worker.cjs ENDPOINT JOB
'use strict';
const { Client } = require('fenceq');
const { story } = require('./story.cjs');

console.log('module:', require.resolve('fenceq'));
story(Client, process.argv[2], process.argv[3]).catch((err) => {
  console.error(err);
  process.exit(1);
});
