package fenceq

// The shared connection: every call that does not long-poll goes out on one
// DEALER socket of the Client, and one receiver goroutine hands each reply
// to its call by rid (as the Node client's one socket does). Long-polls
// (ClaimNext with a wait, AwaitJob, EnqueueAndWait) keep a pooled socket of
// their own (client.go), whose close gives a parked claim back when the
// call gives up; so does a call sent while the shared socket has no
// connection or no room (ZMQ_IMMEDIATE, or its queue full: EAGAIN), which
// the pooled path waits out.
//
// Why (issue 35; bench/README.md, "The Go client"): with a socket of its
// own per call, each call paid a libzmq look that found nothing (to arm
// ZMQ_FD) besides the look after its wake-up, libzmq's I/O thread served 8
// sockets, and every reply woke its goroutine from the poller alone.
// complete_next from 8 goroutines against fenceqd --sync full on 2 cores
// cost the Go process 87 us of CPU a job (median of 6 runs, 81-92), 24.9
// syscalls and 3.1 context switches a job, against 50 us, 21.8 and 2.1 for
// the C++ client in the same runs; on one shared socket (and one frame a
// request, zmq.go) 49 us (46-54), 11.4 syscalls and 2.0 context switches,
// and 8,458 jobs/s instead of 6,436 (the C++ client: 9,449).
//
// The socket is used by one goroutine at a time (mu): a call sends its
// request and then drains the replies already there (delivering them), and
// the receiver drains whenever ZMQ_FD signals. Every drain ends with a recv
// that finds nothing, which is what arms ZMQ_FD again (zsock.waitIn); a
// reply that comes after it signals, and the receiver, waiting in the
// poller with waitIn, sees it.

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"
)

// shared is a Client's shared connection.
type shared struct {
	mu     sync.Mutex // the socket, s and closed
	s      *zsock     // nil until the first call, and once closed
	closed bool

	pmu     sync.Mutex
	pending map[uint64]*sharedCall // calls sent and not answered, by rid
}

// sharedCall is a call waiting for its reply on the shared connection.
type sharedCall struct {
	op    string
	reply chan sharedReply // buffered: a delivery never waits
}

type sharedReply struct {
	m   map[string]interface{}
	err error
}

// callShared makes a call on the shared connection. sent is false when it
// did not go out there (no connection yet, or the socket's queue full) and
// nothing else went wrong: the pooled path then sends it.
func (c *Client) callShared(ctx context.Context, op string, rid uint64, payload []byte,
	deadline time.Time) (m map[string]interface{}, sent bool, err error) {
	if err := c.interrupted(ctx, op, false); err != nil {
		return nil, true, err
	}
	call := &sharedCall{op: op, reply: make(chan sharedReply, 1)}
	c.sh.pmu.Lock()
	c.sh.pending[rid] = call // before sending: the reply may come at once
	c.sh.pmu.Unlock()
	sent, err = c.sendShared(op, payload)
	if !sent {
		c.sh.forget(rid)
		return nil, err != nil, err
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case r := <-call.reply:
		return r.m, true, r.err
	case <-timer.C:
		c.sh.forget(rid) // a reply that comes later is dropped
		return nil, true, c.timeoutError(ctx, op, true)
	case <-c.done:
		c.sh.forget(rid)
		return nil, true, c.interrupted(ctx, op, true)
	case <-ctx.Done():
		c.sh.forget(rid)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, true, c.timeoutError(ctx, op, true)
		}
		return nil, true, c.interrupted(ctx, op, true)
	}
}

// sendShared sends payload on the shared socket (making it, and starting
// its receiver, on first use), then delivers the replies already there.
func (c *Client) sendShared(op string, payload []byte) (bool, error) {
	sh := &c.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return false, &Error{Code: CodeMisuse, Op: op, Message: "the Client is closed", NotSent: true}
	}
	if sh.s == nil {
		s, ferr := c.newSocket()
		if ferr != nil {
			return false, nil // the pooled path makes its own and says what failed
		}
		if err := s.pollable(); err != nil {
			s.close()
			return false, nil
		}
		sh.s = s
		go c.receiveShared(s, s.f, s.rc)
	}
	if err := sh.s.sendRequest(payload); err != nil {
		if isAgain(err) {
			return false, nil
		}
		return false, c.transportError(op, err)
	}
	if err := c.drainShared(); err != nil {
		// Sent: the call's reply may still come; the receiver reports the socket.
		c.sh.failAll(c.transportError(op, err))
	}
	return true, nil
}

// drainShared receives every message there and hands each to its call; it
// ends with a recv that finds nothing (sh.mu held).
func (c *Client) drainShared() error {
	for {
		body, ok, err := c.sh.s.recvNow()
		if err != nil || !ok {
			return err
		}
		c.deliverShared(body)
	}
}

// deliverShared hands a reply to the call of its rid. A reply that is no
// msgpack map with an int rid cannot be told apart: every call waiting
// fails with bad_reply (a fenceqd never sends one). A reply no call waits
// for (it gave up) is dropped.
func (c *Client) deliverShared(body []byte) {
	m, err := decodeReply("", body)
	var rid int64
	if err == nil {
		var ok bool
		if rid, ok = asInt(m["rid"]); !ok {
			err = badReply("", "reply without an int rid: %v", m)
		}
	}
	if err != nil {
		c.sh.failAll(err)
		return
	}
	c.answered.Store(true)
	c.sh.pmu.Lock()
	call := c.sh.pending[uint64(rid)]
	delete(c.sh.pending, uint64(rid))
	c.sh.pmu.Unlock()
	if call != nil {
		call.reply <- sharedReply{m: m}
	}
}

// receiveShared drains the shared socket whenever its ZMQ_FD signals, until
// the Client closes it. f and rc are its ZMQ_FD's duplicate, kept here as
// Close clears the socket's own.
func (c *Client) receiveShared(s *zsock, f *os.File, rc syscall.RawConn) {
	sh := &c.sh
	var failed error
	try := func() bool { // in the poller's wait: true ends it
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.s != s {
			return true // closed
		}
		if failed = c.drainShared(); failed != nil {
			return true
		}
		return false
	}
	for {
		// A slice while calls wait, in case a signal was missed; else longer.
		wait := pollSlice
		if !sh.waiting() {
			wait = time.Second
		}
		if _, err := waitFd(f, rc, wait, try); err != nil || failed != nil {
			if failed != nil {
				sh.failAll(&Error{Code: CodeTransport, Message: "the shared socket failed: " + failed.Error(), cause: failed})
			}
			return // the file was closed (Close), or the socket failed
		}
		sh.mu.Lock()
		gone := sh.s != s
		sh.mu.Unlock()
		if gone {
			return
		}
	}
}

func (sh *shared) forget(rid uint64) {
	sh.pmu.Lock()
	delete(sh.pending, rid)
	sh.pmu.Unlock()
}

func (sh *shared) waiting() bool {
	sh.pmu.Lock()
	defer sh.pmu.Unlock()
	return len(sh.pending) > 0
}

// failAll ends every call waiting with err (its op named).
func (sh *shared) failAll(err error) {
	sh.pmu.Lock()
	calls := sh.pending
	sh.pending = map[uint64]*sharedCall{}
	sh.pmu.Unlock()
	for _, call := range calls {
		e := err
		var fe *Error
		if errors.As(err, &fe) {
			cp := *fe
			cp.Op = call.op
			e = &cp
		}
		call.reply <- sharedReply{err: e}
	}
}

// close closes the shared socket (Close): its receiver ends; the calls
// waiting see the Client's done. The socket is taken out under mu, so no
// drain can use it any more, and closed after: closing its ZMQ_FD
// duplicate waits for the receiver's wait to end, whose next look takes mu.
func (sh *shared) close() {
	sh.mu.Lock()
	sh.closed = true
	s := sh.s
	sh.s = nil
	sh.mu.Unlock()
	if s != nil {
		s.close()
	}
}
