package fenceq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// ProtocolVersion is the protocol version this client speaks.
const ProtocolVersion = 1

// DefaultTimeout bounds a call when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// pollSlice is the longest a call waits at a time before it looks again at
// its context and its Client: how soon it notices a cancel or Close.
const pollSlice = 50 * time.Millisecond

// Options configure a Client. The zero value is the defaults.
type Options struct {
	// Timeout bounds each call: waiting for a connection, sending, and
	// waiting for the reply; a long-poll (ClaimNext's wait, AwaitJob's)
	// gets its wait on top. 0: DefaultTimeout. A context deadline that
	// comes first bounds the call too.
	Timeout time.Duration
	// Curve is for a tcp:// endpoint, which fenceqd serves only with
	// ZeroMQ CURVE (LoadCurveKeys). A handshake the daemon refuses (a key
	// not on its list, a wrong server key, no keys at all on tcp) is never
	// completed: every call then times out with NotSent true.
	Curve *CurveKeys
	// Clock is for a daemon in client clock mode (--clock client: tests,
	// simulations) only: the `now` sent with every op that takes one,
	// unless the call's context carries its own (WithNow). Against the
	// default server clock leave it nil: the daemon refuses any `now`.
	Clock func() float64
	// MaxIdle is how many connections the Client keeps open between calls
	// (0: 8). Calls that overlap each use a connection of their own.
	MaxIdle int
}

// Client is a connection to one fenceqd, safe for use by many goroutines.
//
// A libzmq socket must not be used by two threads at once, and a call must
// not wait behind another one's reply (a ClaimNext long-polling for 20 s
// would hold up every Complete). So:
//
//   - A call that does not long-poll goes out on the Client's shared DEALER
//     socket, used by one goroutine at a time only for as long as a send or
//     a receive takes; one goroutine of the Client receives the replies and
//     hands each to its call by rid (mux.go). The replies of calls made at
//     the same time come back in one wake-up, which is what makes this the
//     fast path (issue 35: about half the syscalls and CPU a call).
//   - A long-poll (ClaimNext or ClaimNextMany with a wait, AwaitJob,
//     EnqueueAndWait, Request with a "wait") takes a DEALER socket of its
//     own from the Client's pool (making one when none is idle), uses it
//     alone from send to reply, and puts it back; so does a call sent while
//     the shared socket has no connection yet or no room.
//
// The daemon applies a connection's requests in order, and different
// connections' in the order they arrive. Every request carries a fresh rid
// and only the reply echoing it is accepted. A call that gives up after
// sending (a timeout, a cancelled context, Close) stops waiting: a late
// reply on the shared socket is dropped, and a pooled socket is closed
// rather than put back, so the daemon sees the connection go (a parked
// claim_next of it is given back, unclaimed). Close ends the receiving
// goroutine.
type Client struct {
	endpoint string
	source   string
	timeout  time.Duration
	curve    *CurveKeys
	clock    func() float64
	maxIdle  int

	rid      atomic.Uint64
	answered atomic.Bool // a reply came: a missing ipc file is now a restart

	sh shared // the shared connection of the calls that do not long-poll (mux.go)

	mu     sync.Mutex
	idle   []*zsock
	closed bool
	done   chan struct{}
}

// NewClient makes a Client for endpoint ("": ResolveEndpoint's order). A
// bad endpoint, timeout or CURVE key is an invalid_argument error; nothing
// is sent yet (connecting is asynchronous).
func NewClient(endpoint string, opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	chosen := ResolveEndpoint(endpoint)
	c := &Client{endpoint: chosen.Endpoint, source: chosen.Source, timeout: o.Timeout,
		clock: o.Clock, maxIdle: o.MaxIdle, done: make(chan struct{}),
		sh: shared{pending: map[uint64]*sharedCall{}}}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.timeout < 0 {
		return nil, invalid("", "timeout must be > 0, got %v", o.Timeout)
	}
	if c.maxIdle <= 0 {
		c.maxIdle = 8
	}
	if o.Curve != nil {
		keys := *o.Curve
		if why := keys.check(); why != "" {
			return nil, invalid("", "curve: %s", why)
		}
		if !hasPrefix(c.endpoint, "tcp://") {
			return nil, invalid("", "CURVE keys are for tcp:// endpoints; fenceqd serves %q without CURVE", c.endpoint)
		}
		c.curve = &keys
	}
	// One socket now: an endpoint libzmq cannot parse fails here, not later.
	s, ferr := c.newSocket()
	if ferr != nil {
		return nil, ferr
	}
	c.idle = append(c.idle, s)
	return c, nil
}

func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

// Endpoint is the endpoint the Client connects to.
func (c *Client) Endpoint() string { return c.endpoint }

// EndpointSource is the step of ResolveEndpoint's order that chose it.
func (c *Client) EndpointSource() string { return c.source }

// Close closes the Client's connections. Calls waiting for a reply fail
// with code closed (their requests may or may not have been applied);
// later calls fail with code misuse. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	close(c.done)
	for _, s := range c.idle {
		s.close()
	}
	c.idle = nil
	c.sh.close()
	return nil
}

func (c *Client) newSocket() (*zsock, *Error) {
	s, err := newZsock(zmqDEALER)
	if err != nil {
		return nil, &Error{Code: CodeTransport, Message: err.Error(), cause: err}
	}
	// Closing never blocks on unsent requests; a request is queued only on
	// a completed connection, so a timeout while no daemon is there means
	// the request was never sent (and cannot be applied by one that appears).
	if err = s.setInt(zmqLINGER, 0); err == nil {
		err = s.setInt(zmqIMMEDIATE, 1)
	}
	if err == nil {
		err = applyCurve(s, c.curve)
	}
	if err == nil {
		if err = s.connect(c.endpoint); err != nil {
			err = invalid("", "cannot connect to endpoint %q: %v", c.endpoint, err)
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
	return s, nil
}

// acquire takes an idle socket, or makes one.
func (c *Client) acquire(op string) (*zsock, *Error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &Error{Code: CodeMisuse, Op: op, Message: "the Client is closed", NotSent: true}
	}
	if n := len(c.idle); n > 0 {
		s := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	s, ferr := c.newSocket()
	if ferr != nil {
		ferr.Op = op
		return nil, ferr
	}
	return s, nil
}

// release puts a socket back (or closes it: not reusable, Client closed,
// enough idle). The pool's lock hands the socket from one goroutine (and
// OS thread) to the next with the memory barrier libzmq asks for.
func (c *Client) release(s *zsock, reuse bool) {
	c.mu.Lock()
	if reuse && !c.closed && len(c.idle) < c.maxIdle {
		c.idle = append(c.idle, s)
		s = nil
	}
	c.mu.Unlock()
	if s != nil {
		s.close()
	}
}

// nowKey is the context key of WithNow.
type nowKey struct{}

// WithNow returns a context whose calls send `now` = t: for a daemon in
// client clock mode (tests, simulations), where the ops that take a time
// must carry it. It overrides Options.Clock for those calls.
func WithNow(ctx context.Context, t float64) context.Context {
	return context.WithValue(ctx, nowKey{}, t)
}

// sendHookKey: tests see each request (its ordered fields, rid aside)
// before it is sent; an error from the hook stops the call unsent.
type sendHookKey struct{}

type sendHook func(request fields) error

// call sends one request and answers its result, or an *Error. extra is a
// long-poll's wait, added to the timeout.
func (c *Client) call(ctx context.Context, op string, f fields, extra time.Duration) (interface{}, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if _, has := f.get("now"); !has && nowOps[op] {
		if t, ok := ctx.Value(nowKey{}).(float64); ok {
			f.add("now", timestamp(t))
		} else if c.clock != nil {
			f.add("now", timestamp(c.clock()))
		}
	}
	request := append(fields{{"op", op}}, f...)
	if hook, ok := ctx.Value(sendHookKey{}).(sendHook); ok {
		if err := hook(request); err != nil {
			return nil, err
		}
	}
	rid := c.rid.Add(1)
	payload, err := encodeRequest(append(request, kv{"rid", int64(rid)}))
	if err != nil {
		return nil, invalid(op, "%v; nothing was sent", err)
	}
	if !c.answered.Load() {
		// Until the first reply, a missing or foreign ipc socket file fails
		// at once (a wrong endpoint, or no daemon); afterwards the daemon is
		// known to be there, and a missing file is a restart worth waiting for.
		if why := ipcProblem(c.endpoint); why != "" {
			how := "pass it to fenceq.NewClient or set FENCEQ_ENDPOINT"
			if c.source == SourceGiven {
				how = "pass it to fenceq.NewClient (FENCEQ_ENDPOINT is read only when none is given)"
			}
			return nil, &Error{Code: CodeUnreachable, Op: op, NotSent: true, Message: fmt.Sprintf(
				"nothing serves %s (%s): %s; to use another endpoint, %s; the request was not sent",
				c.endpoint, chosenBy[c.source], why, how)}
		}
	}
	deadline := time.Now().Add(c.timeout + extra)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if extra == 0 { // not a long-poll: on the shared connection
		reply, sent, err := c.callShared(ctx, op, rid, payload, deadline)
		if sent {
			if err != nil {
				return nil, err
			}
			return result(op, reply)
		}
	}
	s, ferr := c.acquire(op)
	if ferr != nil {
		return nil, ferr
	}
	reply, reuse, err := c.roundTrip(ctx, s, op, rid, payload, deadline)
	c.release(s, reuse)
	if err != nil {
		return nil, err
	}
	return result(op, reply)
}

// roundTrip sends payload on s and waits for the reply echoing rid. reuse
// says whether s may serve another call (no reply of this one can be left
// to come).
func (c *Client) roundTrip(ctx context.Context, s *zsock, op string, rid uint64, payload []byte,
	deadline time.Time) (map[string]interface{}, bool, error) {
	for {
		if err := c.interrupted(ctx, op, false); err != nil {
			return nil, false, err
		}
		err := s.sendRequest(payload)
		if err == nil {
			break
		}
		if !isAgain(err) {
			return nil, false, c.transportError(op, err)
		}
		// No connection yet (ZMQ_IMMEDIATE): POLLOUT says when there is one.
		left := slice(deadline)
		if _, err := s.poll(zmqPOLLOUT, left); err != nil {
			return nil, false, c.transportError(op, err)
		}
		if left <= 0 {
			return nil, true, c.timeoutError(ctx, op, false)
		}
	}
	for {
		if err := c.interrupted(ctx, op, true); err != nil {
			return nil, false, err
		}
		left := slice(deadline)
		var body []byte
		var rerr error
		got, err := s.waitIn(left, func() bool {
			var ok bool
			body, ok, rerr = s.recvNow()
			return ok || rerr != nil
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return nil, false, c.transportError(op, err)
		}
		if !got {
			if left <= 0 {
				return nil, false, c.timeoutError(ctx, op, true)
			}
			continue
		}
		m, err := decodeReply(op, body)
		if err != nil {
			return nil, false, err
		}
		if echoed, ok := asInt(m["rid"]); !ok || uint64(echoed) != rid {
			continue // not this request's
		}
		c.answered.Store(true)
		return m, true, nil
	}
}

// decodeReply decodes a reply's payload: a msgpack map, or bad_reply.
func decodeReply(op string, body []byte) (map[string]interface{}, error) {
	v, err := decodeMsgpack(body)
	if err != nil {
		return nil, badReply(op, "reply is not msgpack: %v", err)
	}
	m, ok := asMap(v)
	if !ok {
		return nil, badReply(op, "reply is not a map: %v", v)
	}
	return m, nil
}

// slice is how long the next wait in libzmq may last: the time left until
// deadline, at most pollSlice, 0 once it passed.
func slice(deadline time.Time) time.Duration {
	left := time.Until(deadline)
	if left > pollSlice {
		return pollSlice
	}
	if left < 0 {
		return 0
	}
	return left
}

// interrupted answers the error of a call whose Client was closed or whose
// context was cancelled (a context's deadline is the call's own: not here).
func (c *Client) interrupted(ctx context.Context, op string, sent bool) error {
	select {
	case <-c.done:
		if !sent {
			return &Error{Code: CodeMisuse, Op: op, Message: "the Client was closed; the request was not sent", NotSent: true}
		}
		return &Error{Code: CodeClosed, Op: op, Message: "the Client was closed while the call waited for its reply; the request may or may not have been applied"}
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil // the deadline is the call's: a timeout, when it comes
		}
		if !sent {
			return fmt.Errorf("fenceq: %s: the request was not sent: %w", op, ctx.Err())
		}
		return fmt.Errorf("fenceq: %s: the request may or may not have been applied: %w", op, ctx.Err())
	default:
		return nil
	}
}

func (c *Client) transportError(op string, err error) *Error {
	return &Error{Code: CodeTransport, Op: op, Message: fmt.Sprintf("the socket to %s failed: %v", c.endpoint, err), cause: err}
}

func (c *Client) timeoutError(ctx context.Context, op string, sent bool) *Error {
	e := &Error{Code: CodeTimeout, Op: op, NotSent: !sent}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		e.cause = context.DeadlineExceeded // the context's deadline was the call's
	}
	hint := ""
	if why := ipcProblem(c.endpoint); why != "" {
		hint = "; " + why
	}
	if sent {
		e.Message = fmt.Sprintf("no reply from %s in time; the request may or may not have been applied%s", c.endpoint, hint)
	} else {
		e.Message = fmt.Sprintf("no connection to %s in time; the request was not sent%s", c.endpoint, hint)
	}
	return e
}

// result is a reply's result, or its error as an *Error.
func result(op string, reply map[string]interface{}) (interface{}, error) {
	switch reply["ok"] {
	case true:
		r, ok := reply["result"]
		if !ok {
			return nil, badReply(op, "ok reply without result: %v", reply)
		}
		return r, nil
	case false:
		if e, ok := asMap(reply["error"]); ok {
			if code, ok := asString(e["code"]); ok {
				message, _ := asString(e["message"])
				return nil, &Error{Code: code, Op: op, Message: message}
			}
		}
	}
	return nil, badReply(op, "malformed reply: %v", reply)
}

// Field is one field of a request sent with Request.
type Field struct {
	Key   string
	Value interface{}
}

// Request sends an op with these fields, in this order, and answers its
// result as decoded msgpack (nil, bool, int64, float64, string, []byte,
// []interface{}, map[string]interface{}): for ops this client has no method
// for yet. A Value may be any of those types, int, a Payload, a []string, a
// map[string]string, a []Field (a nested map, in its order), a
// map[string]interface{} (a nested map, keys sorted) or a time.Duration
// (whole seconds as an int, else a float). `now` is added as for the typed
// methods (WithNow, Options.Clock) when the op takes one and the fields have
// none. A numeric "wait" field lengthens the timeout as a long-poll's does.
func (c *Client) Request(ctx context.Context, op string, fs ...Field) (interface{}, error) {
	f := make(fields, 0, len(fs))
	for _, e := range fs {
		f.add(e.Key, toWireValue(e.Value))
	}
	var extra time.Duration
	if w, ok := f.get("wait"); ok {
		switch x := w.(type) {
		case seconds:
			extra = waitExtension(time.Duration(x))
		case int:
			extra = waitExtension(time.Duration(x) * time.Second)
		case int64:
			extra = waitExtension(time.Duration(x) * time.Second)
		case float64:
			if x > 0 && x <= 3600 {
				extra = waitExtension(time.Duration(x * float64(time.Second)))
			}
		}
	}
	return c.call(ctx, op, f, extra)
}

// toWireValue turns Request's values into what encodeValue packs.
func toWireValue(v interface{}) interface{} {
	switch x := v.(type) {
	case time.Duration:
		return secs(x)
	case []Field:
		f := make(fields, 0, len(x))
		for _, e := range x {
			f.add(e.Key, toWireValue(e.Value))
		}
		return f
	case map[string]interface{}:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		f := make(fields, 0, len(x))
		for _, k := range keys {
			f.add(k, toWireValue(x[k]))
		}
		return f
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = toWireValue(e)
		}
		return out
	}
	return v
}

// MaxWait is the longest wait of a long-poll (ClaimNext, AwaitJob).
const MaxWait = 3600 * time.Second

// waitExtension is how much longer than the timeout a long-poll may take:
// its wait, when that is one the daemon accepts (anything else is refused
// at once and needs no extension).
func waitExtension(wait time.Duration) time.Duration {
	if wait <= 0 {
		return 0
	}
	if wait > MaxWait {
		return MaxWait
	}
	return wait
}
