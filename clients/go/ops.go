package fenceq

// The ops of protocol v1 and the work queue: one method each. A refusal is a
// value (false, a nil job); an error is an *Error (or, for a call whose
// context was cancelled, the context's error wrapped). Every field a method
// leaves out is the daemon's default.

import (
	"context"
	"time"
)

// Limits the daemon enforces that the client checks itself, because past
// them the daemon would drop the connection (a frame over --max-message)
// rather than answer.
const (
	MaxPayloadBytes = 256 * 1024 // a job's payload
	MaxErrorBytes   = 64 * 1024  // Fail's error text (the daemon refuses more)
	MaxBatch        = 1000       // jobs or items of one batch op, ClaimNextMany's max
)

// Ptr returns a pointer to v: for the optional fields that are pointers
// (JobSpec.MaxAttempts, QueueSettings, a nil-able result).
func Ptr[T any](v T) *T { return &v }

// JobSpec is a job to enqueue (Enqueue, EnqueueMany, EnqueueAndWait). Only
// ID is required; every other field is sent only when set (its zero value,
// or nil, is the daemon's default).
type JobSpec struct {
	ID string
	// Queue: the queue's name, 1..256 bytes ("": the daemon's "default").
	Queue string
	// Payload: Bytes (msgpack bin) or Text (str), at most 256 KiB; claims
	// give it back with the same type.
	Payload Payload
	// Priority: higher is claimed first; equal priorities in enqueue order.
	Priority int
	// Delay before the job can be claimed (whole seconds go as an int).
	Delay time.Duration
	// MaxAttempts: claims allowed before the job is dead; nil: the daemon's
	// 25; Ptr(0): no limit.
	MaxAttempts *int
	// Key: the job's unique key within its queue: no job is created while
	// one of the same queue and key is unfinished (EnqueueUnique answers
	// which job holds it). UniqueFor and OnConflict only go with a Key.
	Key        string
	UniqueFor  time.Duration
	OnConflict string // "skip" (the daemon's default) or "replace"
	// Group: the job's group (a customer, a tenant): claims take the groups
	// of a priority in turn.
	Group string
	// After: the jobs this one waits for (1..1000 ids); it is "blocked"
	// until every one is done. AfterFailure: "cancel" (the default) or "run".
	After        []string
	AfterFailure string
	// MaxRuntime caps each attempt, counted from its claim.
	MaxRuntime time.Duration
	// Headers: kept with the job and handed to every claim of it (a W3C
	// traceparent), at most 4096 bytes in all; sent with their keys sorted.
	Headers map[string]string
	// Deadline (C3.24): a job not claimed by then is never claimed: it is
	// dead with the error "deadline passed" (counted in its queue's
	// Totals.DeadlinePassed), whatever held it back (a delay, its parents,
	// a paused queue, a suspension). Sent as Unix seconds (a float); with a
	// client-clock daemon, time.Unix(clockSeconds, 0). The zero Time is no
	// deadline; the daemon takes (0, 1e11) seconds (time.Unix(0, 0), or
	// earlier, is its invalid_argument).
	Deadline time.Time
}

// fields are the spec's wire fields in the protocol's order.
func (j JobSpec) fields(op, where string) (fields, error) {
	f := fields{{"id", j.ID}}
	if j.Queue != "" {
		f.add("queue", j.Queue)
	}
	if !j.Payload.IsNil() {
		if j.Payload.Len() > MaxPayloadBytes {
			return nil, invalid(op, "%sfield 'payload' is longer than %d bytes (%d bytes); nothing was sent",
				where, MaxPayloadBytes, j.Payload.Len())
		}
		f.add("payload", j.Payload)
	}
	if j.Priority != 0 {
		f.add("priority", j.Priority)
	}
	if j.Delay != 0 {
		f.add("delay", secs(j.Delay))
	}
	if j.MaxAttempts != nil {
		f.add("max_attempts", *j.MaxAttempts)
	}
	if j.Key != "" {
		f.add("key", j.Key)
	}
	if j.UniqueFor != 0 {
		f.add("unique_for", secs(j.UniqueFor))
	}
	if j.OnConflict != "" {
		f.add("on_conflict", j.OnConflict)
	}
	if j.Group != "" {
		f.add("group", j.Group)
	}
	if j.After != nil {
		f.add("after", j.After)
	}
	if j.AfterFailure != "" {
		f.add("after_failure", j.AfterFailure)
	}
	if j.MaxRuntime != 0 {
		f.add("max_runtime", secs(j.MaxRuntime))
	}
	if j.Headers != nil {
		f.add("headers", j.Headers)
	}
	if !j.Deadline.IsZero() {
		f.add("deadline", unixSeconds(j.Deadline))
	}
	return f, nil
}

// Ping answers the daemon's identity: protocol, version and clock mode.
func (c *Client) Ping(ctx context.Context) (*PingInfo, error) {
	v, err := c.call(ctx, "ping", nil, 0)
	if err != nil {
		return nil, err
	}
	return parsePing(v)
}

// Describe asks the daemon which ops and fields it takes (ping with
// describe: true, issue 57): each op's name mapped to its fields, a batch
// entry's written "jobs[].id", complete_many's next "next.queue". A daemon
// refuses any other field with invalid_argument, so a program that needs a
// field newer than some of its daemons can check for it first.
func (c *Client) Describe(ctx context.Context) (map[string][]string, error) {
	v, err := c.call(ctx, "ping", fields{{"describe", true}}, 0)
	if err != nil {
		return nil, err
	}
	p, err := parsePing(v)
	if err != nil {
		return nil, err
	}
	ops, ok := asMap(p.Fields["ops"])
	if !ok {
		return nil, badReply("ping", "expected ops (a map of op names to field lists), got %v", p.Fields["ops"])
	}
	out := make(map[string][]string, len(ops))
	for name := range ops {
		r := &reader{op: "ping", m: ops}
		out[name] = r.strs(name)
		if err := r.done(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Enqueue creates job.ID and answers true; false, and no change at all,
// when the id exists or its unique Key is held (C3.1). A bad value is an
// invalid_argument error, a wrong type bad_request; nothing changes then.
func (c *Client) Enqueue(ctx context.Context, job JobSpec) (bool, error) {
	e, err := c.enqueue(ctx, job)
	return e.Created, err
}

// EnqueueUnique enqueues a job with a unique Key (required) and answers
// which job holds the key: the one created, or the one already there.
func (c *Client) EnqueueUnique(ctx context.Context, job JobSpec) (Enqueued, error) {
	if job.Key == "" {
		return Enqueued{}, invalid("enqueue", "EnqueueUnique needs a Key (Enqueue enqueues without one); nothing was sent")
	}
	return c.enqueue(ctx, job)
}

func (c *Client) enqueue(ctx context.Context, job JobSpec) (Enqueued, error) {
	f, err := job.fields("enqueue", "")
	if err != nil {
		return Enqueued{}, err
	}
	v, err := c.call(ctx, "enqueue", f, 0)
	if err != nil {
		return Enqueued{}, err
	}
	return parseEnqueued("enqueue", v, job.Key != "", job.ID)
}

// State answers the committed row of job id (C3.2), or nil when there is
// no such job.
func (c *Client) State(ctx context.Context, id string) (*LeaseState, error) {
	v, err := c.call(ctx, "state", fields{{"id", id}}, 0)
	if err != nil {
		return nil, err
	}
	return parseState(v)
}

// Claim takes the lease on job id for ttl and answers its new fence; ok is
// false when the job is missing, done, or leased (C3.3).
func (c *Client) Claim(ctx context.Context, id, owner string, ttl time.Duration) (fence int64, ok bool, err error) {
	v, err := c.call(ctx, "claim", fields{{"id", id}, {"owner", owner}, {"ttl", secs(ttl)}}, 0)
	if err != nil || v == nil {
		return 0, false, err
	}
	fence, isInt := asInt(v)
	if !isInt {
		return 0, false, badReply("claim", "expected an int or nil, got %v", v)
	}
	return fence, true, nil
}

func leaseFields(id, owner string, fence int64) fields {
	return fields{{"id", id}, {"owner", owner}, {"fence", fence}}
}

// Renew extends the lease to now + ttl and answers true only while it is
// current (owner and fence match, not done, not expired: C3.4). An expired
// lease is never revived.
func (c *Client) Renew(ctx context.Context, id, owner string, fence int64, ttl time.Duration) (bool, error) {
	f := leaseFields(id, owner, fence)
	f.add("ttl", secs(ttl))
	v, err := c.call(ctx, "renew", f, 0)
	return expectBool("renew", v, err)
}

// RenewProgress is Renew that also stores progress (at most 4 KiB) with the
// lease, shown by State, Job and List; a refused renew stores nothing.
func (c *Client) RenewProgress(ctx context.Context, id, owner string, fence int64, ttl time.Duration, progress string) (bool, error) {
	f := leaseFields(id, owner, fence)
	f.add("ttl", secs(ttl))
	f.add("progress", progress)
	v, err := c.call(ctx, "renew", f, 0)
	return expectBool("renew", v, err)
}

// Complete stores result (nil: none), marks the job done and answers true
// only while the lease is current (C3.5). false: the lease is gone (a
// stalled worker's late write), and the stored result is kept.
func (c *Client) Complete(ctx context.Context, id, owner string, fence int64, result *string) (bool, error) {
	f := leaseFields(id, owner, fence)
	f.add("result", result)
	v, err := c.call(ctx, "complete", f, 0)
	return expectBool("complete", v, err)
}

// Release gives the lease back (fence kept) and answers true when owner
// and fence match a job not done (C3.6).
func (c *Client) Release(ctx context.Context, id, owner string, fence int64) (bool, error) {
	v, err := c.call(ctx, "release", leaseFields(id, owner, fence), 0)
	return expectBool("release", v, err)
}

// ClaimNext claims the most urgent claimable job of queue for owner, as
// Claim would, and answers it; nil when there is none. wait > 0 (at most
// an hour): the daemon holds the request until a job comes or wait ends;
// the call's timeout gets wait on top.
func (c *Client) ClaimNext(ctx context.Context, queue, owner string, ttl, wait time.Duration) (*ClaimedJob, error) {
	f := fields{{"queue", queue}, {"owner", owner}, {"ttl", secs(ttl)}}
	if wait != 0 {
		f.add("wait", secs(wait))
	}
	v, err := c.call(ctx, "claim_next", f, waitExtension(wait))
	if err != nil || v == nil {
		return nil, err
	}
	return parseClaimedJob("claim_next", v)
}

// ClaimNextMany claims up to max (1..1000) jobs of queue in one round trip,
// most urgent first, each as ClaimNext would (its own fence, lease and
// attempt). With wait it answers once at least one job is there; an empty
// slice when none came.
func (c *Client) ClaimNextMany(ctx context.Context, queue, owner string, ttl time.Duration, max int, wait time.Duration) ([]ClaimedJob, error) {
	f := fields{{"queue", queue}, {"owner", owner}, {"ttl", secs(ttl)}, {"max", max}}
	if wait != 0 {
		f.add("wait", secs(wait))
	}
	v, err := c.call(ctx, "claim_next", f, waitExtension(wait))
	if err != nil {
		return nil, err
	}
	return parseClaimedJobs("claim_next", v, max)
}

// CompleteAndClaimNext is Complete and then ClaimNext (no wait) in one round
// trip, the complete_next op. Next is claimed whatever Completed says.
func (c *Client) CompleteAndClaimNext(ctx context.Context, id, owner string, fence int64, result *string,
	queue string, ttl time.Duration) (CompletedNext, error) {
	f := leaseFields(id, owner, fence)
	f.add("result", result)
	f.add("queue", queue)
	f.add("ttl", secs(ttl))
	v, err := c.call(ctx, "complete_next", f, 0)
	if err != nil {
		return CompletedNext{}, err
	}
	r, err := newReader("complete_next", v, "{completed, next}")
	if err != nil {
		return CompletedNext{}, err
	}
	r.need("completed", "next")
	out := CompletedNext{Completed: r.boolean("completed")}
	if err := r.done(); err != nil {
		return CompletedNext{}, err
	}
	if next := r.m["next"]; next != nil {
		if out.Next, err = parseClaimedJob("complete_next", next); err != nil {
			return CompletedNext{}, err
		}
	}
	return out, nil
}

// Fail reports that the job failed: true when the lease was current; the
// error text is kept, the lease ends, and the job is claimable again after
// the daemon's backoff, or dead when its attempts are used up.
func (c *Client) Fail(ctx context.Context, id, owner string, fence int64, errText string) (bool, error) {
	return c.fail(ctx, id, owner, fence, errText, nil)
}

// FailRetryIn is Fail with the job claimable again after retryIn (0: at once).
func (c *Client) FailRetryIn(ctx context.Context, id, owner string, fence int64, errText string, retryIn time.Duration) (bool, error) {
	return c.fail(ctx, id, owner, fence, errText, &retryIn)
}

func (c *Client) fail(ctx context.Context, id, owner string, fence int64, errText string, retryIn *time.Duration) (bool, error) {
	f := leaseFields(id, owner, fence)
	f.add("error", errText)
	if retryIn != nil {
		f.add("retry_in", secs(*retryIn))
	}
	v, err := c.call(ctx, "fail", f, 0)
	return expectBool("fail", v, err)
}

// Snooze puts a job off ("not now, later", C3.14): true when the lease was
// current; the lease ends, its attempt is given back, no error is kept, and
// the job is claimable again after delay (0..1e9 s).
func (c *Client) Snooze(ctx context.Context, id, owner string, fence int64, delay time.Duration) (bool, error) {
	f := leaseFields(id, owner, fence)
	f.add("delay", secs(delay))
	v, err := c.call(ctx, "snooze", f, 0)
	return expectBool("snooze", v, err)
}

// StepSave saves a step of a job under its current lease (C3.22): the
// result of one part of the work (a charge's id, a file's name), so that a
// later attempt skips that part. true when the lease was current (as for
// Complete) and the job had no step of that name: every later claim of the
// job (ClaimNext, ClaimNextMany, the Next of CompleteAndClaimNext and
// CompleteManyNext) carries it in Steps, and so does Job. false otherwise,
// nothing changed: a stale, expired or released lease saves nothing, and a
// step once saved is never overwritten, not even by the lease that saved
// it. step is 1..256 bytes of UTF-8; value is Bytes, Text or the zero
// Payload (nil). A job holds at most 64 steps and 256 KiB of values in
// all: past either the daemon answers invalid_argument. Job.Step is built
// on it.
func (c *Client) StepSave(ctx context.Context, id, owner string, fence int64, step string, value Payload) (bool, error) {
	if value.Len() > MaxPayloadBytes {
		return false, invalid("step_save", "field 'value' is longer than %d bytes (%d bytes); nothing was sent",
			MaxPayloadBytes, value.Len())
	}
	f := leaseFields(id, owner, fence)
	f.add("step", step)
	f.add("value", value)
	v, err := c.call(ctx, "step_save", f, 0)
	return expectBool("step_save", v, err)
}

// The on_timeout values of Suspend: what becomes of a suspended job whose
// wait ends with no signal.
const (
	OnTimeoutRetry = "retry" // ready again, with the error "suspend timed out" (the default)
	OnTimeoutFail  = "fail"  // dead, with that error
)

// MaxSuspend is the longest wait of a suspend: the daemon's bound (30 days).
const MaxSuspend = 30 * 24 * time.Hour

// Suspend ends the job's current lease and parks the job until a signal
// (C3.23): for a job that must wait for the world (a payment webhook, a
// human's approval) without holding a worker. When the lease was current
// (as for Complete), the attempt is given back (as Snooze gives it), the
// fence is kept, the job is "suspended" (no claim takes it; List and Stats
// count it so, Job shows JobRecord.Suspended), and Suspend answers its
// signal token (ok true): 32 hex digits, the only token that wakes this
// wait; hand it to whoever will answer (Signal). ok false (and token ""),
// with nothing changed, for a lease that is not current (stale, expired,
// released). timeout is 1 s to 30 days (MaxSuspend; whole seconds go as
// an int); when it passes with no signal, the job is ready again with the
// error "suspend timed out" and no Signal (onTimeout OnTimeoutRetry, or "":
// both leave the field out, the daemon's default) or dead with that error
// (OnTimeoutFail). A timeout out of range, or another onTimeout, is the
// daemon's invalid_argument. Job.Suspend is built on it.
func (c *Client) Suspend(ctx context.Context, id, owner string, fence int64, timeout time.Duration,
	onTimeout string) (token string, ok bool, err error) {
	f := leaseFields(id, owner, fence)
	f.add("timeout", secs(timeout))
	if onTimeout != "" && onTimeout != OnTimeoutRetry {
		f.add("on_timeout", onTimeout)
	}
	v, err := c.call(ctx, "suspend", f, 0)
	if err != nil {
		return "", false, err
	}
	switch x := v.(type) {
	case string:
		return x, true, nil
	case bool:
		if !x {
			return "", false, nil
		}
	}
	return "", false, badReply("suspend", "expected a token (a str) or false, got %v", v)
}

// Signal wakes the suspended job whose Suspend answered token (C3.23),
// once: true when the job was suspended on that token and its wait had not
// timed out; the job is ready at once, and every claim of it from now on
// (until it suspends again) carries value as its Signal (ClaimedJob.Signal,
// JobRecord.Signal, the worker's Job.Signal). value is Bytes, Text, or the
// zero Payload: no value (the field is left out; the job's Signal is then
// the nil Payload, still a signal). false, with nothing changed, for a
// token used before (of racing signals exactly one is true: a webhook
// delivered twice wakes the job once), unknown, or whose wait timed out.
// token is 1..256 bytes (else the daemon's invalid_argument); a value over
// 256 KiB is the client's own invalid_argument, not sent.
func (c *Client) Signal(ctx context.Context, token string, value Payload) (bool, error) {
	if value.Len() > MaxPayloadBytes {
		return false, invalid("signal", "field 'value' is longer than %d bytes (%d bytes); nothing was sent",
			MaxPayloadBytes, value.Len())
	}
	f := fields{{"token", token}}
	if !value.IsNil() {
		f.add("value", value)
	}
	v, err := c.call(ctx, "signal", f, 0)
	return expectBool("signal", v, err)
}

// Check answers whether owner and fence are the job's current lease;
// changes nothing (what a system outside the store asks, C2.4).
func (c *Client) Check(ctx context.Context, id, owner string, fence int64) (bool, error) {
	v, err := c.call(ctx, "check", leaseFields(id, owner, fence), 0)
	return expectBool("check", v, err)
}

// Retry revives a dead or cancelled job: attempts start over, claimable at
// once, the fence continues (C1.2).
func (c *Client) Retry(ctx context.Context, id string) (bool, error) {
	v, err := c.call(ctx, "retry", fields{{"id", id}}, 0)
	return expectBool("retry", v, err)
}

// Cancel cancels a job that is neither done nor cancelled: its fence goes
// up, so its holder's later writes are refused and no result is stored.
func (c *Client) Cancel(ctx context.Context, id string) (bool, error) {
	v, err := c.call(ctx, "cancel", fields{{"id", id}}, 0)
	return expectBool("cancel", v, err)
}
