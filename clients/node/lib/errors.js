'use strict';

// Every failure the client reports is a FenceqError with a stable `code`.
//
// Codes that come from the daemon (protocol v1, "Error codes"):
//   bad_request, unknown_op, invalid_argument, unsupported_version,
//   unavailable, internal, outcome_unknown (the commit may or may not have
//   happened: a PostgreSQL connection cut during it, or a failed SQLite fsync;
//   read the state or repeat the request)
// Codes the client adds for failures the daemon never saw or never answered,
// the same in every fenceq client (protocol/PROTOCOL.md, "Client errors"):
//   timeout      no reply within timeoutMs; the request may or may not have
//                been applied (a claim that timed out may still own a lease
//                until it expires)
//   unreachable  before the first reply, the ipc:// socket file is missing,
//                not a socket or not this user's; nothing was sent
//   transport    the ZeroMQ socket failed (send or receive error)
//   bad_reply    the daemon answered something that is not a protocol v1 reply
//   misuse       a call on a closed client; nothing was sent
//   closed       close() was called while the call waited for its reply; the
//                request may or may not have been applied
//   lease_lost   the abort reason of a worker's signal, and what job.step
//                and job.suspend throw when the daemon refuses their save
//                or suspend (C3.22, C3.23), or once the job was suspended
// The client also refuses a bad argument itself, before sending anything,
// with the daemon's invalid_argument.
//
// A refusal (lost claim, stale complete) is never an error: it is null/false.
class FenceqError extends Error {
  /**
   * @param {string} code    stable, machine-readable
   * @param {string} message human-readable; daemon messages name the field
   */
  constructor(code, message) {
    super(message);
    this.name = 'FenceqError';
    this.code = code;
  }
}

module.exports = { FenceqError };
