'use strict';

// The msgpack mapping for protocol v1, kept in one place.
//
// @msgpack/msgpack writes an integer-valued JS number as a msgpack int and any
// other number as float64. That is what the protocol wants: `fence` must be an
// int, and `ttl`/`now` accept int or float. A fractional fence is therefore sent
// as a float and refused by the daemon with bad_request, never rounded here.
//
// Keys whose value is `undefined` are left out of the map, so an optional field
// (`now`) is simply absent when the caller did not give it.

const { Encoder, Decoder } = require('@msgpack/msgpack');

const encoder = new Encoder({ ignoreUndefined: true });
// Fences, rids and ints in general decode as JS numbers: fences stay far below
// 2^53, so bigint would only make every caller convert.
const decoder = new Decoder();

/**
 * Encodes one request map. Returns a fresh Buffer the caller may hand to
 * ZeroMQ (which can keep a reference to it after send resolves).
 * @param {object} request
 * @returns {Buffer}
 */
function encode(request) {
  const bytes = encoder.encode(request); // a copy, not the encoder's buffer
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Decodes one payload frame. Throws on bytes that are not exactly one msgpack
 * value.
 * @param {Uint8Array} bytes
 * @returns {unknown}
 */
function decode(bytes) {
  return decoder.decode(bytes);
}

module.exports = { encode, decode };
