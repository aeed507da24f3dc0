// Package fenceq is the Go client of fenceqd, the lease-and-fencing-token
// job queue (protocol/PROTOCOL.md in the fenceq repository).
//
// A worker that claims a job gets a lease and a fence, a number that grows
// with every claim of the job; every later write carries its owner and
// fence, and the daemon applies it only while that lease is the job's
// current one. A stalled worker's late write is refused: the call answers
// false (a refusal is a value, never an error).
//
//	c, err := fenceq.NewClient("", nil) // FENCEQ_ENDPOINT, the service's socket, or ipc://var/fenceqd.sock
//	ok, err := c.Enqueue(ctx, fenceq.JobSpec{ID: "invoice-42", Queue: "invoices"})
//	job, err := c.ClaimNext(ctx, "invoices", "worker-a", 30*time.Second, 10*time.Second)
//	done, err := c.Complete(ctx, job.ID, "worker-a", job.Fence, fenceq.Ptr("paid"))
//
// Every op of the protocol has a method (README.md has the table); a Worker
// runs a Handler on each job of a queue under a renewed lease (prefetching
// if asked); Subscribe reads the daemon's stream of committed changes.
// Errors are *Error values with the protocol's codes: test them with
// errors.Is and the Err* sentinels. A Client is safe for many goroutines.
//
// libzmq is reached through cgo (zmq.go, the package's only C); msgpack is
// github.com/vmihailenco/msgpack/v5.
package fenceq

// Version is this client's version.
const Version = "0.1.0"
