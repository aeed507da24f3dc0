package fenceq

// Events: a subscriber to the stream of committed job changes that
// `fenceqd --events ENDPOINT` publishes on a ZeroMQ XPUB socket
// (protocol/PROTOCOL.md, "Events"). Each message has two frames: the topic,
// the job's queue name, then a msgpack map {seq, t, event, id, queue,
// fence, owner?, group?}.
//
// A SUB subscription matches topics by prefix (emails also gets
// emails-eu): Recv returns only the events whose topic equals the queue's
// name and skips the others. seq numbers every event the daemon publishes,
// whatever its queue: a gap counts the events in between in Missed; a seq
// not past the last one is a restarted daemon and counts nothing.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// EventKinds are the `event` values protocol v1 publishes; a newer daemon
// may add others, which Recv passes through.
var EventKinds = []string{"enqueued", "claimed", "completed", "failed", "dead", "retried",
	"cancelled", "snoozed", "unblocked", "suspended", "signalled", "expired", "step_saved"}

// Event is one committed change of a job.
type Event struct {
	Seq   int64   // 1, 2, 3... for every event the daemon publishes (all queues); 1 again after a restart
	T     float64 // the daemon's wall clock (Unix seconds) when it published the event
	Event string  // what happened (EventKinds)
	ID    string
	Queue string
	Fence int64  // the job's fence after the change
	Owner string // "claimed" only: the lease's owner; "" otherwise
	Group string // the job's group; "" when it has none
}

// Subscriber is a SUB socket on fenceqd's --events endpoint. Safe for
// several goroutines: Recv calls take turns (one socket, behind a lock);
// Close may come from any goroutine and ends a Recv in progress.
type Subscriber struct {
	endpoint string
	queue    string

	mu      sync.Mutex // the socket, lastSeq and missed
	s       *zsock
	lastSeq int64
	missed  int64
	done    chan struct{}
	once    sync.Once
}

// SubscribeOptions configure Subscribe.
type SubscribeOptions struct {
	// Curve is for a tcp:// events endpoint, as for a Client.
	Curve *CurveKeys
}

// Subscribe connects a Subscriber to the daemon's events endpoint (not its
// --listen endpoint; there is no default), for the events of queue ("":
// every queue). Connecting and subscribing are asynchronous: events
// published before the subscription reached the daemon are not received,
// and there is no replay (read the state with Job, List or Stats).
func Subscribe(endpoint, queue string, opts *SubscribeOptions) (*Subscriber, error) {
	if endpoint == "" {
		return nil, invalid("", "endpoint must not be empty: pass fenceqd's --events endpoint")
	}
	var curve *CurveKeys
	if opts != nil && opts.Curve != nil {
		keys := *opts.Curve
		if why := keys.check(); why != "" {
			return nil, invalid("", "curve: %s", why)
		}
		if !hasPrefix(endpoint, "tcp://") {
			return nil, invalid("", "CURVE keys are for tcp:// endpoints; fenceqd serves %q without CURVE", endpoint)
		}
		curve = &keys
	}
	s, err := newZsock(zmqSUB)
	if err != nil {
		return nil, &Error{Code: CodeTransport, Message: err.Error(), cause: err}
	}
	if err = s.setInt(zmqLINGER, 0); err == nil {
		err = applyCurve(s, curve)
	}
	if err == nil {
		err = s.setBytes(zmqSUBSCRIBE, []byte(queue)) // the prefix filter; Recv compares exactly
	}
	if err == nil {
		if err = s.connect(endpoint); err != nil {
			err = invalid("", "cannot connect to events endpoint %q: %v", endpoint, err)
		}
	}
	if err != nil {
		s.close()
		var fe *Error
		if errors.As(err, &fe) {
			return nil, fe
		}
		return nil, &Error{Code: CodeTransport, Message: err.Error(), cause: err}
	}
	return &Subscriber{endpoint: endpoint, queue: queue, s: s, done: make(chan struct{})}, nil
}

// Close closes the socket; a Recv in progress returns ErrMisuse. Idempotent.
func (sub *Subscriber) Close() error {
	sub.once.Do(func() { close(sub.done) })
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.s != nil {
		sub.s.close()
		sub.s = nil
	}
	return nil
}

// LastSeq is the seq of the last event received (0 before the first).
func (sub *Subscriber) LastSeq() int64 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.lastSeq
}

// Missed counts the events skipped by gaps in seq: events the daemon
// dropped because this subscriber fell too far behind (10,000 messages)
// and, with a queue, the events of the other queues.
func (sub *Subscriber) Missed() int64 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.missed
}

// Recv answers the next event of the queue, waiting until one comes or ctx
// ends (then the context's error, wrapped). A message that is not a
// protocol v1 event is a bad_reply error (it is consumed: the next Recv
// goes on with the next message).
func (sub *Subscriber) Recv(ctx context.Context) (Event, error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for {
		if sub.s == nil {
			return Event{}, &Error{Code: CodeMisuse, Message: "the Subscriber is closed"}
		}
		select {
		case <-ctx.Done():
			return Event{}, fmt.Errorf("fenceq: events: %w", ctx.Err())
		case <-sub.done:
			return Event{}, &Error{Code: CodeMisuse, Message: "the Subscriber is closed"}
		default:
		}
		var frames [][]byte
		var err error
		got, werr := sub.s.waitIn(pollSlice, func() bool { // a slice at a time, to see ctx and Close
			frames, err = sub.s.recv(zmqDONTWAIT)
			return !isAgain(err)
		})
		if werr != nil {
			return Event{}, &Error{Code: CodeTransport, Message: fmt.Sprintf("events: the socket to %s failed: %v", sub.endpoint, werr), cause: werr}
		}
		if !got {
			continue
		}
		if err != nil {
			return Event{}, &Error{Code: CodeTransport, Message: fmt.Sprintf("events: the socket to %s failed: %v", sub.endpoint, err), cause: err}
		}
		ev, err := parseEvent(frames)
		if err != nil {
			return Event{}, err
		}
		if sub.lastSeq != 0 && ev.Seq > sub.lastSeq {
			sub.missed += ev.Seq - sub.lastSeq - 1
		}
		sub.lastSeq = ev.Seq // a seq not past the last: a restarted daemon
		if sub.queue == "" || string(frames[0]) == sub.queue {
			return ev, nil
		}
		// A prefix match (emails-eu for emails): skipped.
	}
}

// RecvTimeout is Recv that answers ok false when no event came within timeout.
func (sub *Subscriber) RecvTimeout(timeout time.Duration) (ev Event, ok bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ev, err = sub.Recv(ctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return Event{}, false, nil
	}
	return ev, err == nil, err
}

func badEvent(format string, args ...interface{}) error {
	return &Error{Code: CodeBadReply, Op: "event", Message: fmt.Sprintf(format, args...)}
}

// parseEvent reads one message's frames as an Event.
func parseEvent(frames [][]byte) (Event, error) {
	if len(frames) != 2 {
		return Event{}, badEvent("expected 2 frames (topic, msgpack map), got %d", len(frames))
	}
	v, err := decodeMsgpack(frames[1])
	if err != nil {
		return Event{}, badEvent("body is not msgpack: %v", err)
	}
	m, ok := asMap(v)
	if !ok {
		return Event{}, badEvent("body is not a map: %v", v)
	}
	for _, k := range []string{"seq", "t", "event", "id", "queue", "fence"} {
		if _, ok := m[k]; !ok {
			return Event{}, badEvent("missing %q in %v", k, m)
		}
	}
	var ev Event
	var okSeq, okT, okEvent, okID, okQueue, okFence bool
	ev.Seq, okSeq = asInt(m["seq"])
	ev.T, okT = asNumber(m["t"])
	ev.Event, okEvent = asString(m["event"])
	ev.ID, okID = asString(m["id"])
	ev.Queue, okQueue = asString(m["queue"])
	ev.Fence, okFence = asInt(m["fence"])
	switch {
	case !okSeq || ev.Seq < 1:
		return Event{}, badEvent("'seq' must be an int >= 1, got %v", m["seq"])
	case !okT || math.IsNaN(ev.T) || math.IsInf(ev.T, 0):
		return Event{}, badEvent("'t' must be a finite number, got %v", m["t"])
	case !okEvent || ev.Event == "":
		return Event{}, badEvent("'event' must be a non-empty str, got %v", m["event"])
	case !okID || !okQueue:
		return Event{}, badEvent("'id' and 'queue' must be str, got %v", m)
	case !okFence || ev.Fence < 0:
		return Event{}, badEvent("'fence' must be an int >= 0, got %v", m["fence"])
	}
	for _, k := range []string{"owner", "group"} {
		s, ok := asOptString(m[k])
		if !ok {
			return Event{}, badEvent("%q must be a str when present, got %v", k, m[k])
		}
		if s != nil && k == "owner" {
			ev.Owner = *s
		} else if s != nil {
			ev.Group = *s
		}
	}
	if ev.Queue != string(frames[0]) {
		return Event{}, badEvent("queue %q is not its topic frame %q", ev.Queue, frames[0])
	}
	return ev, nil
}
