package fenceq

// The worker helper, as clients/python/fenceq/worker.py's QueueWorker: take
// the next job of a queue, run a handler while the lease is renewed in the
// background, store the outcome under the fence.
//
// The helper never decides whether a write is stale: every renew and the
// final complete, fail or snooze carry the fence, and the daemon refuses
// them once another worker holds a newer lease (C3.4, C3.5). A refused
// renewal (the job was cancelled, or its lease expired and another worker
// took it) cancels the handler's context: the job is no longer this
// worker's, and nothing the handler returns is stored.
//
// Steps (C3.22): a handler's job.Step(ctx, name, fn) runs fn once per job,
// across attempts: its value is saved with StepSave under the job's lease,
// and a later attempt (whose claim hands the saved steps back) gets the
// saved value without running fn. A save the daemon refuses (the lease is
// no longer this worker's) answers ErrLeaseLost and marks the job lost:
// nothing further of the attempt should run, and nothing is stored.
//
// Suspend and signal (C3.23): a handler's job.Suspend(ctx, timeout,
// onTimeout) ends the attempt with the job waiting for a signal: the lease
// is gone, so the worker stops renewing it and stores nothing afterwards
// (no complete, fail or release; Outcome.Status "suspended"). The claim
// after the job's wake carries the signal's value in job.Signal.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Handler runs one job and answers its result (stored with complete) or an
// error: one made by SnoozeFor snoozes the job, any other fails it (the
// daemon retries it after a backoff, or it is dead once its attempts are
// used up). ctx is cancelled when the job's lease is lost (job.Lost() is
// then true; nothing the handler returns is stored) and when the context
// given to Run ends. A panic is recovered and fails the job.
type Handler func(ctx context.Context, job *Job) (string, error)

// Job is a job the worker claimed and runs.
type Job struct {
	ID       string
	Queue    string
	Owner    string
	Fence    int64 // hand it to any system the job writes to (C2.4)
	Attempts int64 // claims so far, this one included
	Payload  Payload
	After    []string          // the jobs it waited for (Client.Results reads theirs)
	Headers  map[string]string // as enqueued, such as a W3C traceparent
	// Steps: the job's saved steps (C3.22), each step's name to its value:
	// those its claim handed out, and those Step saved since; nil while
	// there are none (and, for Work's job, claimed by id, until its first
	// Step read them). Step adds to it: read it in the handler, not while
	// a Step runs in another goroutine.
	Steps map[string]Payload
	// Signal: the value of the signal that woke the job since its last
	// suspend (C3.23), with its type (IsNil: a signal without a value);
	// nil when none did (never suspended, or woken by its timeout: then
	// the claim's error, in Job's record, is "suspend timed out"). Work's
	// job, claimed by id (a claim answers the fence alone), has it once its
	// first Step read the record; before, read Client.Job's Signal.
	Signal *Payload
	TTL    time.Duration

	lost       atomic.Bool
	suspending atomic.Bool // a Suspend is on its way: a refused renewal is no loss then
	suspended  atomic.Bool // Suspend ended the lease: nothing is stored for this attempt
	mu         sync.Mutex
	cancel     context.CancelFunc // the handler's, while it runs

	c          *Client              // Step's, nil for a Job not made by a Worker or Work
	stepsKnown bool                 // Steps holds what the daemon has (a claim by queue handed them out)
	running    map[string]*stepCall // the steps whose fn runs now, by name
}

// stepCall is one Step's run, which a second Step of its name waits for.
type stepCall struct {
	done  chan struct{}
	value Payload
	err   error
}

// Lost reports whether a renewal was refused: the job may be another
// worker's now, and its result will not be stored.
func (j *Job) Lost() bool { return j.lost.Load() }

// Suspended reports whether Suspend ended this attempt: the job waits for
// its signal, and the worker stores nothing for it.
func (j *Job) Suspended() bool { return j.suspended.Load() }

// Check answers ErrLeaseLost once the lease is lost; call it before
// expensive or irreversible steps.
func (j *Job) Check() error {
	if j.Lost() {
		return &Error{Code: CodeLeaseLost, Message: fmt.Sprintf("the lease on %s (fence %d) was lost", j.ID, j.Fence)}
	}
	return nil
}

// markLost sets Lost and cancels the handler's context.
func (j *Job) markLost() {
	j.lost.Store(true)
	j.mu.Lock()
	if j.cancel != nil {
		j.cancel()
	}
	j.mu.Unlock()
}

func newJob(c *Client, cj ClaimedJob, queue, owner string, ttl time.Duration) *Job {
	var steps map[string]Payload
	if cj.Steps != nil { // a copy: Step adds to it
		steps = make(map[string]Payload, len(cj.Steps))
		for name, v := range cj.Steps {
			steps[name] = v
		}
	}
	return &Job{ID: cj.ID, Queue: queue, Owner: owner, Fence: cj.Fence, Attempts: cj.Attempts,
		Payload: cj.Payload, After: cj.After, Headers: cj.Headers, Steps: steps, Signal: cj.Signal, TTL: ttl,
		c: c, stepsKnown: true}
}

// Suspend ends this attempt with the job waiting for a signal (C3.23;
// Client.Suspend under the job's id, owner and fence): it answers the
// signal token, to hand to whoever will answer (a webhook's sender, an
// approver), who wakes the job with Client.Signal(token, value). The
// lease is gone then: the worker stops renewing it, and stores nothing
// for this attempt whatever the handler returns (no complete, fail or
// release: Outcome.Status "suspended"; Work answers completed false). The
// handler's context stays live, so that it can hand the token on; then it
// should return. The next claim of the job (after the signal, or after
// timeout with OnTimeoutRetry: "" is the same) runs the handler again,
// with job.Signal set by a signal (nil after a timeout, whose claim's
// record shows the error "suspend timed out") and the saved Steps: a
// handler that suspends once a step is done reads job.Signal on the claim
// after (see the README's "Suspend and signal").
//
// When the daemon refuses the suspend (the lease is no longer this
// worker's: it ran out and another worker may hold the job, or the job
// was cancelled), Suspend answers the error Step answers then, of code
// lease_lost (errors.Is(err, ErrLeaseLost)), and marks the job lost:
// nothing further of the attempt should run, and nothing is stored. A
// Suspend of a job already lost, or already suspended, answers that
// error, sending nothing. A timeout out of range (1 s to MaxSuspend) or an
// onTimeout other than "", OnTimeoutRetry and OnTimeoutFail is the
// daemon's invalid_argument, with the lease kept. Another error (a
// timeout: suspended or not, unknown) is answered as it is; the worker
// then stores what the handler returns as ever, which the daemon refuses
// if the job did suspend.
func (j *Job) Suspend(ctx context.Context, timeout time.Duration, onTimeout string) (string, error) {
	switch {
	case j.c == nil:
		return "", &Error{Code: CodeMisuse, Op: "suspend", NotSent: true,
			Message: "Job.Suspend: a Job made by a Worker or by Client.Work has the client to suspend with"}
	case j.Lost():
		return "", j.suspendLost()
	case j.Suspended():
		return "", &Error{Code: CodeLeaseLost, Op: "suspend", NotSent: true, Message: fmt.Sprintf(
			"%s (fence %d) is suspended already: this attempt's lease ended with its first Suspend", j.ID, j.Fence)}
	}
	j.suspending.Store(true)
	defer j.suspending.Store(false)
	token, ok, err := j.c.Suspend(ctx, j.ID, j.Owner, j.Fence, timeout, onTimeout)
	if err != nil {
		return "", err
	}
	if !ok {
		j.markLost()
		return "", j.suspendLost()
	}
	j.suspended.Store(true)
	return token, nil
}

func (j *Job) suspendLost() error {
	return &Error{Code: CodeLeaseLost, Op: "suspend",
		Message: fmt.Sprintf("the lease on %s (fence %d) was lost; the job was not suspended", j.ID, j.Fence)}
}

// leaseEnding reports whether a refused renewal may be this worker's own
// Suspend (on its way, or done): the lease ended, and is not lost.
func (j *Job) leaseEnding() bool { return j.suspending.Load() || j.suspended.Load() }

// Step runs one step of the job at most once per job, across attempts
// (C3.22). When name is in the job's Steps (saved by an earlier attempt,
// or by this one), it answers the saved value and does not call fn. Else
// it calls fn and saves its value (Bytes, Text, or the zero Payload for
// nil) with StepSave under the job's id, owner and fence: saved, the value
// is added to Steps and answered. An error of fn is answered as it is and
// saves nothing (the next attempt runs that step again); so is one of
// StepSave (a timeout: saved or not, the next attempt's claim says).
//
// When the daemon refuses the save (the lease is no longer this worker's:
// it ran out and another worker may hold the job now, or the job was
// cancelled), Step answers an *Error of code lease_lost (errors.Is(err,
// ErrLeaseLost)) and marks the job lost (Lost, and its handler's context
// cancelled): nothing further of the attempt should run, and nothing the
// handler returns is stored. A Step of a job already lost (or suspended:
// Suspend ended the attempt's lease) answers that error without calling
// fn. A stalled worker may still have run fn (its side effect happened,
// its value is not kept): the fence keeps it from recording a step that
// the attempt after it then skips, or from changing a value that attempt
// already read.
//
// ctx is the handler's (its `now` with a client clock daemon). Work's job
// (claimed by id: a claim answers the fence alone) reads its steps (and
// Signal) with Client.Job at its first Step. Two Steps of one name at once
// share one run of fn. An empty name is an invalid_argument error, as is a value
// over 256 KiB (nothing sent); a name over 256 bytes, or past a job's 64
// steps or 256 KiB of values, is the daemon's invalid_argument.
func (j *Job) Step(ctx context.Context, name string, fn func(ctx context.Context) (Payload, error)) (Payload, error) {
	switch {
	case name == "":
		return Payload{}, invalid("step_save", "Job.Step: the step's name must not be empty; nothing was sent")
	case fn == nil:
		return Payload{}, invalid("step_save", "Job.Step: fn must not be nil; nothing was sent")
	case j.c == nil:
		return Payload{}, &Error{Code: CodeMisuse, Op: "step_save", NotSent: true,
			Message: "Job.Step: a Job made by a Worker or by Client.Work has the client to save steps with"}
	case j.Lost():
		return Payload{}, j.stepLost(name)
	case j.Suspended():
		return Payload{}, &Error{Code: CodeLeaseLost, Op: "step_save", NotSent: true, Message: fmt.Sprintf(
			"%s (fence %d) is suspended: this attempt's lease ended with Suspend; step %q was not saved", j.ID, j.Fence, name)}
	}
	if err := j.loadSteps(ctx); err != nil {
		return Payload{}, err
	}
	j.mu.Lock()
	if v, ok := j.Steps[name]; ok {
		j.mu.Unlock()
		return v, nil
	}
	if call, ok := j.running[name]; ok {
		j.mu.Unlock()
		select {
		case <-call.done:
			return call.value, call.err
		case <-ctx.Done():
			return Payload{}, ctx.Err()
		}
	}
	call := &stepCall{done: make(chan struct{})}
	if j.running == nil {
		j.running = map[string]*stepCall{}
	}
	j.running[name] = call
	j.mu.Unlock()
	defer func() {
		j.mu.Lock()
		delete(j.running, name)
		j.mu.Unlock()
		close(call.done)
	}()
	call.value, call.err = j.runStep(ctx, name, fn)
	return call.value, call.err
}

// runStep calls fn and saves its value; a refused save marks the job lost.
func (j *Job) runStep(ctx context.Context, name string, fn func(ctx context.Context) (Payload, error)) (Payload, error) {
	v, err := fn(ctx)
	if err != nil {
		return Payload{}, err
	}
	if j.Lost() {
		return Payload{}, j.stepLost(name)
	}
	ok, err := j.c.StepSave(ctx, j.ID, j.Owner, j.Fence, name, v)
	if err != nil {
		return Payload{}, err
	}
	if !ok {
		j.markLost()
		return Payload{}, j.stepLost(name)
	}
	j.mu.Lock()
	if j.Steps == nil {
		j.Steps = map[string]Payload{}
	}
	j.Steps[name] = v
	j.mu.Unlock()
	return v, nil
}

// loadSteps reads the steps of a job claimed by id (Work) with Client.Job,
// once: its record must show this lease.
func (j *Job) loadSteps(ctx context.Context) error {
	j.mu.Lock()
	known := j.stepsKnown
	j.mu.Unlock()
	if known {
		return nil
	}
	rec, err := j.c.Job(ctx, j.ID)
	if err != nil {
		return err
	}
	if rec == nil || rec.Fence != j.Fence || rec.Owner == nil || *rec.Owner != j.Owner {
		j.markLost()
		return &Error{Code: CodeLeaseLost, Op: "step_save",
			Message: fmt.Sprintf("the lease on %s (fence %d) was lost; its steps were not read", j.ID, j.Fence)}
	}
	j.mu.Lock()
	if !j.stepsKnown {
		if j.Signal == nil {
			j.Signal = rec.Signal
		}
		for name, v := range rec.Steps {
			if _, ok := j.Steps[name]; !ok {
				if j.Steps == nil {
					j.Steps = map[string]Payload{}
				}
				j.Steps[name] = v
			}
		}
		j.stepsKnown = true
	}
	j.mu.Unlock()
	return nil
}

func (j *Job) stepLost(name string) error {
	return &Error{Code: CodeLeaseLost, Op: "step_save",
		Message: fmt.Sprintf("the lease on %s (fence %d) was lost; step %q was not saved", j.ID, j.Fence, name)}
}

// MaxSnooze is the longest delay of a snooze: the daemon's bound.
const MaxSnooze = 1e9 * time.Second

// Snooze is the error a handler returns to put its job off ("not now,
// later": someone else's rate limit, a resource not there yet): the job is
// snoozed (C3.14): its attempt given back, no error recorded, claimable
// again after Delay. Make one with SnoozeFor.
type Snooze struct {
	Delay  time.Duration
	Reason string
}

func (s *Snooze) Error() string {
	if s.Reason != "" {
		return fmt.Sprintf("snoozed for %v: %s", s.Delay, s.Reason)
	}
	return fmt.Sprintf("snoozed for %v", s.Delay)
}

// SnoozeFor is the error that snoozes a handler's job for delay (0..1e9 s;
// out of range it is an invalid_argument error, which fails the job).
// reason only goes to the log.
func SnoozeFor(delay time.Duration, reason string) error {
	if delay < 0 || delay > MaxSnooze {
		return invalid("snooze", "SnoozeFor: delay must be in [0, 1e9] seconds, got %v", delay)
	}
	return &Snooze{Delay: delay, Reason: reason}
}

// The statuses of an Outcome.
const (
	StatusCompleted = "completed" // the handler returned and complete was accepted
	StatusFailed    = "failed"    // the handler erred and fail was accepted
	StatusSnoozed   = "snoozed"   // the handler returned a Snooze and snooze was accepted
	StatusLost      = "lost"      // the lease was gone first: nothing was stored
	StatusReleased  = "released"  // Run's context ended while it ran: released, its attempt used
	StatusSuspended = "suspended" // the handler's job.Suspend ended the lease: nothing stored
)

// Outcome is what the worker did with one job.
type Outcome struct {
	Job    *Job
	Status string
	Result string // the handler's result
	Err    error  // the handler's error (a *Snooze when snoozed), or ErrLeaseLost when lost
}

// WorkerOptions configure a Worker. Zero values are the defaults.
type WorkerOptions struct {
	Queue string // "": "default"
	Owner string // "": host:pid:random
	// TTL is the lease (default 30 s); it is renewed every RenewEvery
	// (default TTL/3) while the job runs.
	TTL        time.Duration
	RenewEvery time.Duration
	// Wait is the longest long-poll (default 1 s): how soon Stop is
	// noticed by an idle Run.
	Wait time.Duration
	// RetryIn, when set, is when a failed job is claimable again (nil: the
	// daemon's backoff, min(2^(attempts-1), 3600) s).
	RetryIn *time.Duration
	// Prefetch (1..1000, default 1) is how many jobs the worker holds at
	// once: more than 1 claims them with one ClaimNextMany, renews them all
	// with one RenewMany and completes them in batches (CompleteManyNext),
	// for many short jobs. 1 completes each job with CompleteAndClaimNext,
	// one round trip a job.
	Prefetch int
	// MaxJobs: Run returns after this many jobs (0: no limit). IdleExit:
	// Run returns once the queue gave no job for that long (0: never).
	MaxJobs  int
	IdleExit time.Duration
	// OnOutcome, when set, is called with each job's outcome (keep it
	// short: the next job may already be leased).
	OnOutcome func(Outcome)
	// Logf reports lost leases, failures and snoozes (default log.Printf).
	Logf func(format string, args ...interface{})
}

// Worker runs the jobs of one queue with a Handler (Run) until Stop, its
// context's end, MaxJobs or IdleExit. One Run at a time; Stop from anywhere.
type Worker struct {
	c        *Client
	o        WorkerOptions
	stopping atomic.Bool
	running  atomic.Bool
}

// DefaultOwner is host:pid:random: unique per worker, readable in a job's row.
func DefaultOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}

// NewWorker makes a Worker that uses c (and its pool: renewals go on their
// own connections). A bad option is an invalid_argument error.
func NewWorker(c *Client, o WorkerOptions) (*Worker, error) {
	if o.Queue == "" {
		o.Queue = "default"
	}
	if o.Owner == "" {
		o.Owner = DefaultOwner()
	}
	if o.TTL == 0 {
		o.TTL = 30 * time.Second
	}
	if o.RenewEvery == 0 {
		o.RenewEvery = o.TTL / 3
	}
	if o.Wait == 0 {
		o.Wait = time.Second
	}
	if o.Prefetch == 0 {
		o.Prefetch = 1
	}
	switch {
	case o.TTL < 0:
		return nil, invalid("", "TTL must be > 0, got %v", o.TTL)
	case o.RenewEvery <= 0:
		return nil, invalid("", "RenewEvery must be > 0, got %v", o.RenewEvery)
	case o.Wait < 0 || o.Wait > MaxWait:
		return nil, invalid("", "Wait must be in (0, 1h], got %v", o.Wait)
	case o.RetryIn != nil && *o.RetryIn < 0:
		return nil, invalid("", "RetryIn must be >= 0, got %v", *o.RetryIn)
	case o.Prefetch < 1 || o.Prefetch > MaxBatch:
		return nil, invalid("", "Prefetch must be in 1..%d, got %d", MaxBatch, o.Prefetch)
	case o.MaxJobs < 0 || o.IdleExit < 0:
		return nil, invalid("", "MaxJobs and IdleExit must be >= 0")
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	return &Worker{c: c, o: o}, nil
}

// Owner is the owner name the worker claims jobs as.
func (w *Worker) Owner() string { return w.o.Owner }

// Stop asks Run to return, gracefully: the job running finishes and is
// stored (claiming no next one), jobs claimed ahead and not started are
// released untouched (their attempts stay used), and an idle Run notices
// within Wait. Later Runs claim nothing. Safe from any goroutine.
func (w *Worker) Stop() { w.stopping.Store(true) }

// Run runs jobs one after another with h until Stop (answering nil), the
// end of ctx (answering ctx's error: the job running sees its context
// cancelled and is released, unless it already returned), MaxJobs or
// IdleExit; it answers how many jobs it handled (any outcome). An error
// talking to the daemon ends it too; a lease left behind then ends by
// itself after TTL. Nothing stays claimed when Run returns.
func (w *Worker) Run(ctx context.Context, h Handler) (int, error) {
	if !w.running.CompareAndSwap(false, true) {
		return 0, &Error{Code: CodeMisuse, Message: "Worker.Run is already running", NotSent: true}
	}
	defer w.running.Store(false)
	if w.o.Prefetch > 1 {
		return w.runPrefetch(ctx, h)
	}
	return w.runSingle(ctx, h)
}

func (w *Worker) report(o Outcome) {
	if w.o.OnOutcome != nil {
		w.o.OnOutcome(o)
	}
}

// waitFor is the next long-poll's wait, or false when IdleExit has passed.
func (w *Worker) waitFor(idleSince time.Time) (time.Duration, bool) {
	wait := w.o.Wait
	if w.o.IdleExit > 0 {
		left := w.o.IdleExit - time.Since(idleSince)
		if left <= 0 {
			return 0, false
		}
		if left < wait {
			wait = left
		}
	}
	if wait < time.Millisecond {
		wait = time.Millisecond
	}
	return wait, true
}

// windDown is the context of the calls that store or release a job after
// Run's context ended: a fresh one, bounded by the client's timeout.
func windDown(ctx context.Context) context.Context {
	if ctx.Err() == nil {
		return ctx
	}
	var c context.Context = context.Background()
	if t, ok := ctx.Value(nowKey{}).(float64); ok {
		c = WithNow(c, t)
	}
	return c
}

func (w *Worker) runSingle(ctx context.Context, h Handler) (handled int, err error) {
	var held *Job
	defer func() {
		if held != nil {
			w.release(ctx, held, "run returns")
		}
	}()
	idleSince := time.Now()
	for !w.stopping.Load() && (w.o.MaxJobs == 0 || handled < w.o.MaxJobs) {
		job := held
		held = nil
		if job == nil {
			wait, ok := w.waitFor(idleSince)
			if !ok {
				break
			}
			cj, err := w.c.ClaimNext(ctx, w.o.Queue, w.o.Owner, w.o.TTL, wait)
			if err != nil {
				return handled, err
			}
			if cj == nil {
				continue
			}
			job = newJob(w.c, *cj, w.o.Queue, w.o.Owner, w.o.TTL)
			if w.stopping.Load() {
				w.release(ctx, job, "stopping")
				break
			}
		}
		takeNext := w.o.MaxJobs == 0 || handled+1 < w.o.MaxJobs
		outcome, next, err := w.handle(ctx, job, h, takeNext)
		handled++
		held = next
		if outcome.Job != nil {
			w.report(outcome)
		}
		if err != nil {
			return handled, err
		}
		idleSince = time.Now()
	}
	return handled, nil
}

// handle runs one job under a renewed lease and stores its outcome. With
// takeNext the completion also claims the next job, which it answers.
func (w *Worker) handle(ctx context.Context, job *Job, h Handler, takeNext bool) (Outcome, *Job, error) {
	renewer := w.startRenewer(ctx, job)
	result, herr := runHandler(ctx, h, job)
	renewer() // stop renewing before storing, so no renewal races the write
	if out, done, err := w.storeFailure(ctx, job, result, herr); done {
		return out, nil, err
	}
	store := windDown(ctx)
	var ok bool
	var next *Job
	if takeNext && !w.stopping.Load() && ctx.Err() == nil {
		reply, err := w.c.CompleteAndClaimNext(ctx, job.ID, job.Owner, job.Fence, &result, w.o.Queue, w.o.TTL)
		if err != nil {
			return Outcome{}, nil, err
		}
		ok = reply.Completed
		if reply.Next != nil {
			next = newJob(w.c, *reply.Next, w.o.Queue, w.o.Owner, w.o.TTL)
			if w.stopping.Load() { // Stop came while the completion was on its way
				w.release(ctx, next, "stopping")
				next = nil
			}
		}
	} else {
		var err error
		if ok, err = w.c.Complete(store, job.ID, job.Owner, job.Fence, &result); err != nil {
			return Outcome{}, nil, err
		}
	}
	if !ok {
		w.o.Logf("fenceq: %s (fence %d): lease lost, the result was refused", job.ID, job.Fence)
		return Outcome{Job: job, Status: StatusLost, Result: result, Err: job.lostError()}, next, nil
	}
	return Outcome{Job: job, Status: StatusCompleted, Result: result}, next, nil
}

func (j *Job) lostError() error {
	return &Error{Code: CodeLeaseLost, Message: fmt.Sprintf("the lease on %s (fence %d) was lost; nothing was stored", j.ID, j.Fence)}
}

// storeFailure stores what is not a success: a lost lease (nothing), Run's
// end (a release), a Snooze (snooze), an error (fail). done is false for a
// success, which the caller completes.
func (w *Worker) storeFailure(ctx context.Context, job *Job, result string, herr error) (Outcome, bool, error) {
	if job.Lost() {
		w.o.Logf("fenceq: %s (fence %d): lease lost, nothing stored", job.ID, job.Fence)
		return Outcome{Job: job, Status: StatusLost, Result: result, Err: job.lostError()}, true, nil
	}
	if job.Suspended() { // its lease ended with Suspend: nothing to store
		return Outcome{Job: job, Status: StatusSuspended, Result: result, Err: herr}, true, nil
	}
	if ctx.Err() != nil && herr != nil {
		w.release(ctx, job, "the worker's context ended")
		return Outcome{Job: job, Status: StatusReleased, Err: herr}, true, ctx.Err()
	}
	if herr == nil {
		return Outcome{}, false, nil
	}
	store := windDown(ctx)
	var snooze *Snooze
	if errors.As(herr, &snooze) {
		ok, err := w.c.Snooze(store, job.ID, job.Owner, job.Fence, snooze.Delay)
		if err != nil {
			return Outcome{}, true, err
		}
		if !ok {
			w.o.Logf("fenceq: %s (fence %d): snooze refused, the lease was lost: nothing stored", job.ID, job.Fence)
			return Outcome{Job: job, Status: StatusLost, Err: herr}, true, nil
		}
		return Outcome{Job: job, Status: StatusSnoozed, Err: herr}, true, nil
	}
	text := errorText(herr)
	var ok bool
	var err error
	if w.o.RetryIn != nil {
		ok, err = w.c.FailRetryIn(store, job.ID, job.Owner, job.Fence, text, *w.o.RetryIn)
	} else {
		ok, err = w.c.Fail(store, job.ID, job.Owner, job.Fence, text)
	}
	if err != nil {
		return Outcome{}, true, err
	}
	if !ok {
		w.o.Logf("fenceq: %s (fence %d) failed after its lease was lost, nothing stored: %s", job.ID, job.Fence, text)
		return Outcome{Job: job, Status: StatusLost, Err: herr}, true, nil
	}
	w.o.Logf("fenceq: %s (fence %d, attempt %d) failed: %s", job.ID, job.Fence, job.Attempts, text)
	return Outcome{Job: job, Status: StatusFailed, Err: herr}, true, nil
}

// errorText is a failed job's error as stored: valid UTF-8, at most 64 KiB.
func errorText(err error) string {
	text := strings.ToValidUTF8(err.Error(), "?")
	if len(text) > MaxErrorBytes {
		text = strings.ToValidUTF8(text[:MaxErrorBytes], "")
	}
	return text
}

// runHandler runs h under a context that a lost lease cancels; a panic
// becomes an error.
func runHandler(ctx context.Context, h Handler, job *Job) (result string, err error) {
	hctx, cancel := context.WithCancel(ctx)
	job.mu.Lock()
	job.cancel = cancel
	job.mu.Unlock()
	if job.Lost() { // lost before it started
		cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
		job.mu.Lock()
		job.cancel = nil
		job.mu.Unlock()
		cancel()
	}()
	return h(hctx, job)
}

// release gives a job back untouched (best effort: a lease that cannot be
// released ends by itself after its TTL).
func (w *Worker) release(ctx context.Context, job *Job, why string) {
	if job.Lost() || job.Suspended() {
		return
	}
	if _, err := w.c.Release(windDown(ctx), job.ID, job.Owner, job.Fence); err != nil {
		w.o.Logf("fenceq: %s: could not release %s (fence %d), its lease ends by itself: %v", why, job.ID, job.Fence, err)
	}
}

// transient reports whether a renewal's error is worth trying again next
// round rather than giving up on renewing.
func transient(err error) bool {
	switch Code(err) {
	case CodeTimeout, CodeUnavailable, CodeInternal, CodeTransport:
		return true
	}
	return false
}

// renewTimeout: a renewal that takes longer than the interval is no longer
// useful.
func (w *Worker) renewTimeout() time.Duration {
	t := w.c.timeout
	if t > w.o.RenewEvery {
		t = w.o.RenewEvery
	}
	if t < 50*time.Millisecond {
		t = 50 * time.Millisecond
	}
	return t
}

// startRenewer renews job's lease every RenewEvery until the returned stop
// is called (which waits for the renewer to finish). A refused renewal
// marks the job lost and cancels its handler.
func (w *Worker) startRenewer(ctx context.Context, job *Job) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(w.o.RenewEvery)
		defer ticker.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if job.Suspended() {
				return // its lease ended with Suspend: nothing to renew
			}
			rctx, cancel := context.WithTimeout(ctx, w.renewTimeout())
			ok, err := w.c.Renew(rctx, job.ID, job.Owner, job.Fence, job.TTL)
			cancel()
			if err != nil {
				if transient(err) {
					continue
				}
				w.o.Logf("fenceq: %s (fence %d): renewing stopped: %v", job.ID, job.Fence, err)
				return
			}
			if !ok && job.leaseEnding() {
				return // the handler's Suspend ended the lease (or is ending it): not a loss
			}
			if !ok {
				// Cancelled, or taken over after it expired: not ours any more.
				w.o.Logf("fenceq: %s (fence %d): renewal refused (cancelled, or the lease is no longer ours): "+
					"the job is not this worker's any more", job.ID, job.Fence)
				job.markLost()
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// Work claims job id for owner, runs fn under a renewed lease and completes
// it with fn's result (the single-job worker: Python's Worker.run). claimed
// is false when the claim was refused (fn not called); completed false
// when the lease was lost before or at completion. An error from fn
// releases the lease and is answered as err; a *Snooze from fn snoozes the
// job instead (completed false, err the Snooze); fn's job.Suspend ends the
// lease with nothing stored (completed false, err fn's error, nil or not).
// fn's context is cancelled when a renewal is refused.
func (c *Client) Work(ctx context.Context, id, owner string, ttl time.Duration, fn Handler) (claimed, completed bool, err error) {
	fence, ok, err := c.Claim(ctx, id, owner, ttl)
	if err != nil || !ok {
		return false, false, err
	}
	every := ttl / 3
	if every <= 0 {
		every = time.Millisecond
	}
	w := &Worker{c: c, o: WorkerOptions{Owner: owner, TTL: ttl, RenewEvery: every, Logf: log.Printf}}
	job := &Job{ID: id, Owner: owner, Fence: fence, TTL: ttl, c: c} // its steps and signal: read at its first Step
	stop := w.startRenewer(ctx, job)
	result, ferr := runHandler(ctx, fn, job)
	stop()
	store := windDown(ctx)
	var snooze *Snooze
	switch {
	case job.Lost():
		return true, false, nil
	case job.Suspended(): // fn's job.Suspend ended the lease: nothing to store
		return true, false, ferr
	case errors.As(ferr, &snooze):
		if _, err := c.Snooze(store, id, owner, fence, snooze.Delay); err != nil {
			return true, false, err
		}
		return true, false, ferr
	case ferr != nil:
		_, _ = c.Release(store, id, owner, fence) // best effort: the lease expires by itself
		return true, false, ferr
	}
	completed, err = c.Complete(store, id, owner, fence, &result)
	return true, completed, err
}
