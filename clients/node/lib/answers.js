'use strict';

// What a protocol v1 result must look like for each op, read from the answer
// shapes protocol/ops/ops.json declares (its "answers" section, copied into
// lib/ops_gen.js by protocol/ops/generate.py): anything else is a bad_reply
// instead of a value the caller would misread. The section's "about" says how
// a shape reads; this is its interpreter.
//
// A map's `record` (the keys of a record this client hands to its caller as
// the daemon sent it: a job's row, a queue's counts) is checked only when
// asked (`strict`, for the tests that hold a real daemon's answers to the
// declaration): the client itself checks what it reads or builds on.

const { ANSWER_OF, ANSWERS, SHAPES } = require('./ops_gen');

function isPlainMap(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value) &&
    !(value instanceof Uint8Array);
}

const IS_TYPE = {
  str: (v) => typeof v === 'string',
  int: (v) => Number.isInteger(v),
  number: (v) => typeof v === 'number',
  bool: (v) => typeof v === 'boolean',
  nil: (v) => v === null,
  bin: (v) => v instanceof Uint8Array,
  map: isPlainMap,
  array: (v) => Array.isArray(v),
};

function named(name) {
  const shape = Object.hasOwn(ANSWERS, name) ? ANSWERS[name] : SHAPES[name];
  if (shape === undefined) throw new Error(`fenceq: ops_gen.js names no shape '${name}'`);
  return shape;
}

/** The value at a dotted path of a request (`next.max`), undefined when not there. */
function at(request, path) {
  let value = request;
  for (const part of path.split('.')) {
    if (!isPlainMap(value) || !Object.hasOwn(value, part)) return undefined;
    value = value[part];
  }
  return value;
}

/** Whether `value`'s keys, optional keys and values are as `part` (a map shape, or its record) says. */
function mapMatches(part, value, request, strict) {
  for (const [key, shape] of Object.entries(part.keys ?? {})) {
    if (!Object.hasOwn(value, key) || !matches(shape, value[key], request, strict)) return false;
  }
  for (const [key, shape] of Object.entries(part.optional ?? {})) {
    if (Object.hasOwn(value, key) && !matches(shape, value[key], request, strict)) return false;
  }
  if (part.values !== undefined) {
    for (const v of Object.values(value)) {
      if (!matches(part.values, v, request, strict)) return false;
    }
  }
  return true;
}

/**
 * Whether `value` has `shape` (a name, or a shape object as ops.json's
 * "answers" declares), for the request `request` (its wire fields).
 * @param {boolean} [strict] also check each map's `record`
 */
function matches(shape, value, request, strict = false) {
  if (typeof shape === 'string') return matches(named(shape), value, request, strict);
  if (shape.when !== undefined) {
    const given = shape.when.given.some((name) => at(request, name) !== undefined);
    return matches(given ? shape.then : shape.else, value, request, strict);
  }
  if (shape.one_of !== undefined) return shape.one_of.some((s) => matches(s, value, request, strict));
  const type = shape.type.split('|').find((t) => IS_TYPE[t](value));
  if (type === undefined) return false;
  if (type === 'int' && shape.min !== undefined && value < shape.min) return false;
  if (type === 'map') {
    for (const name of shape.include ?? []) {
      if (!matches(name, value, request, strict)) return false;
    }
    if (!mapMatches(shape, value, request, strict)) return false;
    if (strict && shape.record !== undefined && !mapMatches(shape.record, value, request, strict)) return false;
  }
  if (type === 'array') {
    if (shape.max_length !== undefined) {
      const max = at(request, shape.max_length);
      if (Number.isInteger(max) && value.length > max) return false;
    }
    let entries;
    if (shape.entries !== undefined) {
      entries = at(request, shape.entries);
      if (!Array.isArray(entries) || value.length !== entries.length) return false;
    }
    if (shape.items !== undefined) {
      for (let i = 0; i < value.length; i++) {
        if (!matches(shape.items, value[i], entries ? entries[i] : request, strict)) return false;
      }
    }
  }
  return true;
}

/**
 * Whether `result` is what `op` answers to a request of these wire fields.
 * @param {string} op
 * @param {unknown} result
 * @param {object} request the request's fields (`jobs`, `max`, `next`, ...)
 * @param {boolean} [strict] also check the records this client hands on unread
 */
function answerMatches(op, result, request, strict = false) {
  const name = ANSWER_OF[op];
  if (name === undefined) throw new Error(`fenceq: ops_gen.js has no op '${op}'`);
  return matches(name, result, request ?? {}, strict);
}

module.exports = { answerMatches, matches, isPlainMap };
