package fenceq

// Suspend and signal (C3.23) and deadlines (C3.24): Client.Suspend and
// Client.Signal, the Signal that claims and Job carry, JobRecord.Suspended,
// the worker's Job.Suspend (a successful one ends the attempt: nothing is
// stored for it, its lease is not renewed), and JobSpec.Deadline. Every wait
// for the daemon's reap (a timed-out wait, a passed deadline: at its next
// batch on SQLite) is a bounded poll.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var tokenShape = regexp.MustCompile(`^[0-9a-f]{32}$`)

func sameSignal(t *testing.T, where string, got *Payload, want Payload) {
	t.Helper()
	if got == nil || !samePayload(*got, want) {
		t.Fatalf("%s: signal %#v, want %#v", where, got, want)
	}
}

// claimPolled claims from queue with a client clock, moving now forward
// by step each try (the daemon reaps a timed-out wait or a passed deadline
// at its next batch): the job, or nil after tries claims.
func claimPolled(t *testing.T, c *Client, queue, owner string, now, step float64, tries int) (*ClaimedJob, float64) {
	t.Helper()
	for i := 0; i < tries; i++ {
		cj := need(c.ClaimNext(at(now), queue, owner, 30*time.Second, 0))(t)
		if cj != nil {
			return cj, now
		}
		now += step
		time.Sleep(5 * time.Millisecond)
	}
	return nil, now
}

// The story (C3.22, C3.23): a handler charges (a step), then suspends
// until the payment provider's webhook signals; the claim after the signal
// carries it and the saved step; the email fails once and the retry skips
// the charge, which ran once in all. The signal's token wakes the job
// once: a second signal (a webhook delivered twice) is false. A stalled
// holder of the job's first, expired lease wakes up late: it cannot save
// charge (its StepSave is refused, as in TestStepOfAStalledAttemptIsRefused
// with workers) nor suspend the job, and nothing of it shows.
func TestSignalStorySuspendThenResume(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "order-9", Queue: "orders", Payload: Text("order-9")}))(t)
	stalled := need(c.ClaimNext(bg, "orders", "stalled", 300*time.Millisecond, 0))(t)
	if stalled == nil || stalled.Fence != 1 {
		t.Fatalf("the stalled claim: %+v", stalled)
	}
	time.Sleep(400 * time.Millisecond) // its lease runs out: a GC pause, a swapped-out process

	tokens := make(chan string, 1)
	var out outcomes
	w := newTestWorker(t, c, WorkerOptions{Queue: "orders", Owner: "worker-b", Wait: 100 * time.Millisecond,
		RetryIn: Ptr(time.Duration(0)), MaxJobs: 3, IdleExit: 10 * time.Second, Logf: quiet}, &out)
	var mu sync.Mutex
	charges, emails, runs := 0, 0, 0
	var signals []*Payload
	var steps []map[string]Payload
	done := runAsync(t, bg, w, func(ctx context.Context, job *Job) (string, error) {
		mu.Lock()
		runs++
		signals = append(signals, job.Signal)
		steps = append(steps, job.Steps)
		mu.Unlock()
		charge, err := job.Step(ctx, "charge", func(ctx context.Context) (Payload, error) {
			mu.Lock()
			charges++
			mu.Unlock()
			return Text("ch_" + job.Payload.String()), nil
		})
		if err != nil {
			return "", err
		}
		if job.Signal == nil { // not paid yet: wait for the webhook, holding no worker
			token, err := job.Suspend(ctx, time.Hour, "")
			if err != nil {
				return "", err
			}
			tokens <- token
			return "", nil // nothing is stored: the lease ended with Suspend
		}
		if _, err := job.Step(ctx, "email", func(ctx context.Context) (Payload, error) {
			mu.Lock()
			emails++
			first := emails == 1
			mu.Unlock()
			if first {
				return Payload{}, errors.New("smtp down")
			}
			return Payload{}, nil
		}); err != nil {
			return "", err
		}
		return fmt.Sprintf("done %s, %s", charge.String(), job.Signal.String()), nil
	})

	var token string
	select {
	case token = <-tokens:
	case <-time.After(10 * time.Second):
		t.Fatal("no token within 10 s")
	}
	if !tokenShape.MatchString(token) {
		t.Fatalf("token %q", token)
	}
	if rec := need(c.Job(bg, "order-9"))(t); rec.State != "suspended" || rec.Suspended == nil ||
		rec.Suspended.OnTimeout != OnTimeoutRetry || rec.Owner != nil || rec.Signal != nil {
		t.Fatalf("suspended: %+v %+v", rec, rec.Suspended)
	}
	if !need(c.Signal(bg, token, Text("paid")))(t) {
		t.Fatal("the signal was refused")
	}
	if need(c.Signal(bg, token, Text("paid again")))(t) {
		t.Fatal("a second signal of the token woke the job again")
	}
	if n, err := done(); err != nil || n != 3 {
		t.Fatalf("Run: %d %v", n, err)
	}

	all := out.list()
	if len(all) != 3 || all[0].Status != StatusSuspended || all[1].Status != StatusFailed ||
		all[2].Status != StatusCompleted || all[2].Result != "done ch_order-9, paid" {
		t.Fatalf("outcomes: %+v", all)
	}
	if runs != 3 || charges != 1 || emails != 2 {
		t.Fatalf("runs %d, charge ran %d times, email %d", runs, charges, emails)
	}
	if signals[0] != nil {
		t.Fatalf("the first claim's signal: %v", signals[0])
	}
	for i := 1; i < 3; i++ { // every claim after the wake carries the signal and the step
		sameSignal(t, fmt.Sprintf("claim %d", i+1), signals[i], Text("paid"))
		if _, ok := steps[i]["charge"]; !ok {
			t.Fatalf("claim %d: steps %v", i+1, steps[i])
		}
	}
	rec := need(c.Job(bg, "order-9"))(t)
	if rec.State != "done" || *rec.Error != "smtp down" || rec.Suspended != nil {
		t.Fatalf("record: %+v", rec)
	}
	sameSignal(t, "the record", rec.Signal, Text("paid"))
	sameSteps(t, "the record", rec.Steps, map[string]Payload{"charge": Text("ch_order-9"), "email": {}})

	// The stalled holder of fence 1 wakes up: refused, nothing changed.
	if need(c.StepSave(bg, "order-9", "stalled", 1, "charge", Text("ch_stalled")))(t) {
		t.Fatal("a stalled lease saved a step")
	}
	if tok, ok, err := c.Suspend(bg, "order-9", "stalled", 1, time.Hour, OnTimeoutFail); err != nil || ok || tok != "" {
		t.Fatalf("a stalled lease's suspend: %q %v %v", tok, ok, err)
	}
	after := need(c.Job(bg, "order-9"))(t)
	if after.State != "done" || after.Fence != rec.Fence || after.Suspended != nil {
		t.Fatalf("after the stalled writes: %+v", after)
	}
	sameSteps(t, "after the stalled writes", after.Steps, map[string]Payload{"charge": Text("ch_order-9"), "email": {}})
	if st := need(c.Stats(bg))(t).Queues["orders"]; st.Suspended != 0 || st.Done != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// Signal's value comes back with its type in every claim path (ClaimNext,
// ClaimNextMany, CompleteAndClaimNext's and CompleteManyNext's Next) and
// in Job; a signal without a value is a nil Payload, not "no signal".
func TestSignalValueInEveryClaim(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(nil)
	values := map[string]Payload{"bin": Bytes([]byte{0, 1, 255}), "text": Text("ok"), "none": {}}
	ids := []string{"bin", "text", "none"}
	for _, id := range ids {
		need(c.Enqueue(at(1), JobSpec{ID: id, Queue: "q"}))(t)
		cj := need(c.ClaimNext(at(2), "q", "A", 30*time.Second, 0))(t)
		if cj.Signal != nil {
			t.Fatalf("%s: a signal before any: %v", cj.ID, cj.Signal)
		}
		token, ok := need3(c.Suspend(at(2), cj.ID, "A", cj.Fence, time.Minute, ""))(t)
		if !ok || !tokenShape.MatchString(token) {
			t.Fatalf("%s: suspend %q %v", cj.ID, token, ok)
		}
		rec := need(c.Job(at(2), cj.ID))(t)
		if rec.State != "suspended" || rec.Suspended == nil || rec.Suspended.Timeout != 62 || rec.Suspended.OnTimeout != "retry" {
			t.Fatalf("%s: %+v %+v", cj.ID, rec, rec.Suspended)
		}
		if !need(c.Signal(at(3), token, values[cj.ID]))(t) {
			t.Fatalf("%s: signal refused", cj.ID)
		}
	}
	rows := need(c.List(at(3), &ListOptions{Queue: "q", State: "suspended"}))(t)
	if len(rows) != 0 {
		t.Fatalf("still suspended: %+v", rows)
	}
	sameSignal(t, "job none", need(c.Job(at(3), "none"))(t).Signal, Payload{})

	check := func(where string, js []ClaimedJob) {
		t.Helper()
		for _, j := range js {
			sameSignal(t, where+" "+j.ID, j.Signal, values[j.ID])
		}
	}
	// ClaimNext takes bin (the first enqueued), ClaimNextMany the others.
	first := need(c.ClaimNext(at(4), "q", "B", 30*time.Second, 0))(t)
	check("ClaimNext", []ClaimedJob{*first})
	many := need(c.ClaimNextMany(at(4), "q", "B", 30*time.Second, 5, 0))(t)
	if len(many) != 2 {
		t.Fatalf("ClaimNextMany: %+v", many)
	}
	check("ClaimNextMany", many)
	for _, j := range append(many, *first) {
		need(c.Release(at(5), j.ID, "B", j.Fence))(t)
	}
	need(c.Enqueue(at(6), JobSpec{ID: "x", Queue: "other"}))(t)
	x := need(c.ClaimNext(at(6), "other", "B", 30*time.Second, 0))(t)
	cn := need(c.CompleteAndClaimNext(at(6), "x", "B", x.Fence, nil, "q", 30*time.Second))(t)
	if !cn.Completed || cn.Next == nil {
		t.Fatalf("CompleteAndClaimNext: %+v", cn)
	}
	check("CompleteAndClaimNext", []ClaimedJob{*cn.Next})
	need(c.Enqueue(at(7), JobSpec{ID: "y", Queue: "other"}))(t)
	y := need(c.ClaimNext(at(7), "other", "B", 30*time.Second, 0))(t)
	cm := need(c.CompleteManyNext(at(7), []LeaseItem{{ID: "y", Owner: "B", Fence: y.Fence}},
		NextClaim{Queue: "q", TTL: 30 * time.Second, Max: 5}))(t)
	if len(cm.Next) != 2 {
		t.Fatalf("CompleteManyNext: %+v", cm)
	}
	check("CompleteManyNext", cm.Next)

	// A new suspend forgets the signal that woke the job before.
	j := cm.Next[0]
	token, ok := need3(c.Suspend(at(8), j.ID, "B", j.Fence, 10*time.Second, ""))(t)
	if !ok {
		t.Fatal("the second suspend")
	}
	if rec := need(c.Job(at(8), j.ID))(t); rec.Signal != nil {
		t.Fatalf("a suspended job keeps its old signal: %v", rec.Signal)
	}
	if !need(c.Signal(at(9), token, Text("second")))(t) {
		t.Fatal("the second wait's signal")
	}
	again := need(c.ClaimNext(at(9), "q", "C", 30*time.Second, 0))(t)
	if again == nil || again.ID != j.ID {
		t.Fatalf("the claim after the second signal: %+v", again)
	}
	sameSignal(t, "the second wake", again.Signal, Text("second"))
}

// need3 is need for a (value, ok, error) answer.
func need3[T any](v T, ok bool, err error) func(testing.TB) (T, bool) {
	return func(t testing.TB) (T, bool) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v, ok
	}
}

// A wait that times out: with on_timeout retry the job is ready again,
// with the error "suspend timed out" and no signal; its token wakes
// nothing any more. With on_timeout fail it is dead.
func TestSuspendTimesOut(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(nil)
	need(c.Enqueue(at(1), JobSpec{ID: "r", Queue: "q"}))(t)
	cj := need(c.ClaimNext(at(2), "q", "A", 30*time.Second, 0))(t)
	token, ok := need3(c.Suspend(at(3), "r", "A", cj.Fence, time.Second, OnTimeoutRetry))(t)
	if !ok {
		t.Fatal("suspend refused")
	}
	if rec := need(c.Job(at(3), "r"))(t); rec.State != "suspended" || rec.Suspended.Timeout != 4 || rec.Attempts != 0 {
		t.Fatalf("suspended: %+v %+v", rec, rec.Suspended)
	}
	if need(c.Signal(at(4.5), token, Text("late")))(t) {
		t.Fatal("a signal after the timeout woke the job")
	}
	again, now := claimPolled(t, c, "q", "B", 5, 1, 50)
	if again == nil || again.ID != "r" || again.Signal != nil || again.Attempts != 1 || again.Fence != cj.Fence+1 {
		t.Fatalf("the claim after the timeout (now %v): %+v", now, again)
	}
	rec := need(c.Job(at(now), "r"))(t)
	if rec.Error == nil || *rec.Error != "suspend timed out" || rec.Signal != nil || rec.Suspended != nil {
		t.Fatalf("the record after the timeout: %+v", rec)
	}
	if need(c.Signal(at(now), token, Payload{}))(t) {
		t.Fatal("a timed-out token woke the job")
	}

	// on_timeout fail: dead, with the error.
	token, ok = need3(c.Suspend(at(now), "r", "B", again.Fence, time.Second, OnTimeoutFail))(t)
	if !ok {
		t.Fatal("the second suspend")
	}
	if rec := need(c.Job(at(now), "r"))(t); rec.Suspended == nil || rec.Suspended.OnTimeout != OnTimeoutFail {
		t.Fatalf("suspended to fail: %+v", rec.Suspended)
	}
	var dead *JobRecord
	for i := 0; i < 50 && dead == nil; i++ {
		now++
		if cj := need(c.ClaimNext(at(now), "q", "B", 30*time.Second, 0))(t); cj != nil {
			t.Fatalf("a job whose wait failed was claimed: %+v", cj)
		}
		if rec := need(c.Job(at(now), "r"))(t); rec.State == "dead" {
			dead = rec
		}
		time.Sleep(5 * time.Millisecond)
	}
	if dead == nil || dead.Error == nil || *dead.Error != "suspend timed out" {
		t.Fatalf("not dead after 50 polls: %+v", dead)
	}
	if need(c.Signal(at(now), token, Text("late")))(t) {
		t.Fatal("a signal woke a dead job")
	}
	if st := need(c.Stats(at(now)))(t).Queues["q"]; st.Dead != 1 || st.Suspended != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

// A lease that is not current cannot suspend the job: Client.Suspend
// answers ok false, and the worker's Job.Suspend lease_lost (the job is
// lost, nothing is stored); nothing changes.
func TestSuspendOfAStaleLeaseIsRefused(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(nil)
	need(c.Enqueue(at(1), JobSpec{ID: "s", Queue: "q"}))(t)
	cj := need(c.ClaimNext(at(2), "q", "A", 10*time.Second, 0))(t)
	for _, lease := range []struct {
		owner string
		fence int64
	}{{"A", cj.Fence + 1}, {"B", cj.Fence}} {
		tok, ok, err := c.Suspend(at(3), "s", lease.owner, lease.fence, time.Minute, "")
		if err != nil || ok || tok != "" {
			t.Fatalf("%+v: %q %v %v", lease, tok, ok, err)
		}
	}
	// Expired (now past its 10 s), then taken by B: A's suspend is refused.
	if _, ok := need3(c.Suspend(at(13), "s", "A", cj.Fence, time.Minute, ""))(t); ok {
		t.Fatal("an expired lease suspended the job")
	}
	b := need(c.ClaimNext(at(14), "q", "B", 30*time.Second, 0))(t)
	if b == nil || b.Fence != cj.Fence+1 {
		t.Fatalf("B's claim: %+v", b)
	}
	if _, ok := need3(c.Suspend(at(14), "s", "A", cj.Fence, time.Minute, ""))(t); ok {
		t.Fatal("A suspended B's job")
	}
	// A worker's Job whose lease is gone (A's, stalled).
	stale := newJob(c, *cj, "q", "A", 10*time.Second)
	if tok, err := stale.Suspend(at(15), time.Minute, ""); !errors.Is(err, ErrLeaseLost) || tok != "" || !stale.Lost() ||
		!strings.Contains(err.Error(), "not suspended") {
		t.Fatalf("a stale Job.Suspend: %q %v lost %v", tok, err, stale.Lost())
	}
	if _, err := stale.Suspend(at(15), time.Minute, ""); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a lost job's second Suspend: %v", err)
	}
	rec := need(c.Job(at(15), "s"))(t)
	if rec.State != "leased" || *rec.Owner != "B" || rec.Fence != b.Fence || rec.Suspended != nil {
		t.Fatalf("the record: %+v", rec)
	}
	if !need(c.Complete(at(16), "s", "B", b.Fence, str("by B")))(t) {
		t.Fatal("B's lease was changed")
	}

	// Through a worker: its lease was cancelled under it, so its handler's
	// Suspend is refused and the outcome is lost (no fail is sent).
	need(c.Enqueue(at(20), JobSpec{ID: "w", Queue: "w"}))(t)
	var out outcomes
	w := newTestWorker(t, c, WorkerOptions{Queue: "w", RenewEvery: time.Hour, Wait: 10 * time.Millisecond, MaxJobs: 1, Logf: quiet}, &out)
	var suspendErr error
	if _, err := w.Run(at(21), func(ctx context.Context, job *Job) (string, error) {
		need(c.Cancel(at(21), job.ID))(t)
		_, suspendErr = job.Suspend(ctx, time.Minute, "")
		return "", suspendErr
	}); err != nil {
		t.Fatal(err)
	}
	if o := out.list(); len(o) != 1 || o[0].Status != StatusLost || !errors.Is(suspendErr, ErrLeaseLost) {
		t.Fatalf("outcomes %+v, suspend %v", o, suspendErr)
	}
	if rec := need(c.Job(at(22), "w"))(t); rec.State != "cancelled" || rec.Suspended != nil {
		t.Fatalf("the cancelled job: %+v", rec)
	}
	if fails := need(c.Stats(at(22)))(t).Writes["fail"]; fails.Applied+fails.Refused != 0 {
		t.Fatalf("a fail was sent: %+v", fails)
	}
}

// A worker's Job.Suspend ends the attempt: its lease is no longer renewed
// (a refused renewal is no loss), its handler's context stays live to hand
// the token on, and nothing is stored afterwards (no complete, release or
// fail), with one job at a time and with prefetching. The next Run gets
// each job with its signal. Client.Work too.
func TestJobSuspendEndsTheAttempt(t *testing.T) {
	for _, prefetch := range []int{1, 3} {
		t.Run(fmt.Sprintf("prefetch %d", prefetch), func(t *testing.T) {
			d := startDaemon(t, "server")
			c := d.client(nil)
			need(c.EnqueueMany(bg, []JobSpec{{ID: "a", Queue: "q"}, {ID: "b", Queue: "q"}}))(t)
			var out outcomes
			w := newTestWorker(t, c, WorkerOptions{Queue: "q", TTL: 2 * time.Second, RenewEvery: 20 * time.Millisecond,
				Wait: 50 * time.Millisecond, Prefetch: prefetch, MaxJobs: 2, IdleExit: 5 * time.Second}, &out)
			var mu sync.Mutex
			tokens := map[string]string{}
			problems := []string{}
			if _, err := w.Run(bg, func(ctx context.Context, job *Job) (string, error) {
				token, err := job.Suspend(ctx, time.Hour, OnTimeoutFail)
				if err != nil {
					return "", err
				}
				time.Sleep(150 * time.Millisecond) // renewals come due meanwhile
				mu.Lock()
				defer mu.Unlock()
				tokens[job.ID] = token
				if ctx.Err() != nil || job.Lost() || !job.Suspended() {
					problems = append(problems, fmt.Sprintf("%s: ctx %v, lost %v", job.ID, ctx.Err(), job.Lost()))
				}
				if _, err := job.Suspend(ctx, time.Hour, ""); !errors.Is(err, ErrLeaseLost) {
					problems = append(problems, fmt.Sprintf("%s: a second Suspend: %v", job.ID, err))
				}
				if _, err := job.Step(ctx, "late", func(context.Context) (Payload, error) { return Payload{}, nil }); !errors.Is(err, ErrLeaseLost) {
					problems = append(problems, fmt.Sprintf("%s: a Step after Suspend: %v", job.ID, err))
				}
				return "not stored", errors.New("nor this")
			}); err != nil {
				t.Fatal(err)
			}
			if len(problems) > 0 {
				t.Fatal(problems)
			}
			for _, o := range out.list() {
				if o.Status != StatusSuspended || o.Result != "not stored" {
					t.Fatalf("outcome %+v", o)
				}
			}
			if len(out.list()) != 2 || len(tokens) != 2 {
				t.Fatalf("outcomes %+v, tokens %v", out.list(), tokens)
			}
			st := need(c.Stats(bg))(t)
			if q := st.Queues["q"]; q.Suspended != 2 || q.Leased != 0 {
				t.Fatalf("stats: %+v", q)
			}
			for _, op := range []string{"complete", "release", "fail"} {
				if n := st.Writes[op]; n.Applied+n.Refused != 0 {
					t.Fatalf("%s was sent: %+v", op, n)
				}
			}
			if rows := need(c.List(bg, &ListOptions{State: "suspended"}))(t); len(rows) != 2 {
				t.Fatalf("list: %+v", rows)
			}

			need(c.Signal(bg, tokens["a"], Bytes([]byte("A"))))(t)
			need(c.Signal(bg, tokens["b"], Payload{}))(t)
			got := map[string]*Payload{}
			w2 := newTestWorker(t, c, WorkerOptions{Queue: "q", Wait: 50 * time.Millisecond, Prefetch: prefetch,
				MaxJobs: 2, IdleExit: 5 * time.Second}, nil)
			if n, err := w2.Run(bg, func(ctx context.Context, job *Job) (string, error) {
				mu.Lock()
				got[job.ID] = job.Signal
				mu.Unlock()
				return "ok", nil
			}); err != nil || n != 2 {
				t.Fatalf("the second Run: %d %v", n, err)
			}
			sameSignal(t, "a", got["a"], Bytes([]byte("A")))
			sameSignal(t, "b", got["b"], Payload{})
		})
	}

	t.Run("Work", func(t *testing.T) {
		d := startDaemon(t, "server")
		c := d.client(nil)
		need(c.Enqueue(bg, JobSpec{ID: "w"}))(t)
		var token string
		claimed, completed, err := c.Work(bg, "w", "me", 5*time.Second, func(ctx context.Context, job *Job) (string, error) {
			if job.Signal != nil {
				return "", errors.New("a signal before any")
			}
			var err error
			token, err = job.Suspend(ctx, time.Hour, "")
			return "not stored", err
		})
		if !claimed || completed || err != nil || token == "" {
			t.Fatalf("Work: %v %v %v %q", claimed, completed, err, token)
		}
		if rec := need(c.Job(bg, "w"))(t); rec.State != "suspended" {
			t.Fatalf("the record: %+v", rec)
		}
		need(c.Signal(bg, token, Text("go")))(t)
		claimed, completed, err = c.Work(bg, "w", "me", 5*time.Second, func(ctx context.Context, job *Job) (string, error) {
			if _, err := job.Step(ctx, "read", func(context.Context) (Payload, error) { return Payload{}, nil }); err != nil {
				return "", err
			}
			if job.Signal == nil { // read with the steps, at the first Step
				return "", errors.New("no signal")
			}
			return job.Signal.String(), nil
		})
		if !claimed || !completed || err != nil {
			t.Fatalf("the second Work: %v %v %v", claimed, completed, err)
		}
		if st := need(c.State(bg, "w"))(t); *st.Result != "go" {
			t.Fatalf("state: %+v", st)
		}
	})
}

// A job not claimed by its deadline is never claimed: dead with "deadline
// passed", counted in its queue's totals (C3.24). Deadline goes on
// Enqueue, on each EnqueueMany entry and on EnqueueAndWait.
func TestDeadline(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(nil)
	need(c.Enqueue(at(60), JobSpec{ID: "d", Queue: "offers", Delay: 50 * time.Second, Deadline: time.Unix(100, 0)}))(t)
	if cj, _ := claimPolled(t, c, "offers", "A", 110, 1, 3); cj != nil {
		t.Fatalf("claimed after its deadline: %+v", cj)
	}
	var rec *JobRecord
	for i := 0; i < 50; i++ { // the reap writes the error down at a later batch
		rec = need(c.Job(at(113), "d"))(t)
		if rec.State == "dead" && rec.Error != nil {
			break
		}
		need(c.ClaimNext(at(113), "offers", "A", 30*time.Second, 0))(t)
		time.Sleep(5 * time.Millisecond)
	}
	if rec.State != "dead" || rec.Error == nil || *rec.Error != "deadline passed" || rec.Attempts != 0 {
		t.Fatalf("the record: %+v", rec)
	}
	if totals := need(c.Stats(at(113)))(t).Queues["offers"].Totals; totals.DeadlinePassed != 1 {
		t.Fatalf("totals: %+v", totals)
	}

	// Claimed before it: the deadline does not matter then.
	ok := need(c.EnqueueMany(at(120), []JobSpec{{ID: "f", Queue: "offers", Deadline: time.Unix(200, 500_000_000)},
		{ID: "g", Queue: "late", Deadline: time.Unix(130, 0)}}))(t)
	if len(ok) != 2 || !ok[0] || !ok[1] {
		t.Fatalf("EnqueueMany: %v", ok)
	}
	if f := need(c.ClaimNext(at(121), "offers", "A", 30*time.Second, 0))(t); f == nil || f.ID != "f" {
		t.Fatalf("f: %+v", f)
	}
	if g, _ := claimPolled(t, c, "late", "A", 131, 1, 3); g != nil {
		t.Fatalf("an entry's deadline: %+v", g)
	}

	// EnqueueAndWait sends it too (a float of Unix seconds, after headers).
	var sent fields
	hook := context.WithValue(at(140), sendHookKey{}, sendHook(func(f fields) error { sent = f; return errDryRun }))
	if _, err := c.EnqueueAndWait(hook, JobSpec{ID: "h", Headers: map[string]string{"k": "v"},
		Deadline: time.Unix(150, 250_000_000)}, time.Second); !errors.Is(err, errDryRun) {
		t.Fatal(err)
	}
	if v, _ := sent.get("deadline"); v != timestamp(150.25) || sent[len(sent)-3].key != "deadline" {
		t.Fatalf("enqueue_and_wait sends %v", sent)
	}
}

// Bad input is a coded error, and changes nothing: a timeout out of 1 s
// to 30 days, an on_timeout other than retry and fail, an empty or
// over-long token, a deadline out of (0, 1e11); a value over 256 KiB is
// the client's own, not sent.
func TestSignalsBadInput(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(nil)
	need(c.Enqueue(at(1), JobSpec{ID: "b", Queue: "q"}))(t)
	cj := need(c.ClaimNext(at(1), "q", "A", 30*time.Second, 0))(t)
	for _, tc := range []struct {
		timeout time.Duration
		on      string
	}{{0, ""}, {500 * time.Millisecond, ""}, {MaxSuspend + time.Second, ""}, {-time.Second, ""}, {time.Minute, "x"}, {time.Minute, "Retry"}} {
		tok, ok, err := c.Suspend(at(2), "b", "A", cj.Fence, tc.timeout, tc.on)
		if !errors.Is(err, ErrInvalidArgument) || ok || tok != "" {
			t.Fatalf("suspend %v %q: %q %v %v", tc.timeout, tc.on, tok, ok, err)
		}
	}
	if !need(c.Check(at(2), "b", "A", cj.Fence))(t) {
		t.Fatal("a refused suspend ended the lease")
	}
	for _, token := range []string{"", strings.Repeat("t", 257)} {
		if _, err := c.Signal(at(2), token, Text("v")); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("token of %d bytes: %v", len(token), err)
		}
	}
	_, err := c.Signal(at(2), "t", Bytes(make([]byte, MaxPayloadBytes+1)))
	var fe *Error
	if !errors.As(err, &fe) || fe.Code != CodeInvalidArgument || !fe.NotSent {
		t.Fatalf("a value over 256 KiB: %v", err)
	}
	for _, deadline := range []time.Time{time.Unix(0, 0), time.Unix(-5, 0), time.Unix(1e11+1, 0)} {
		if _, err := c.Enqueue(at(3), JobSpec{ID: "e", Deadline: deadline}); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("deadline %v: %v", deadline.Unix(), err)
		}
		if _, err := c.EnqueueMany(at(3), []JobSpec{{ID: "e1"}, {ID: "e2", Deadline: deadline}}); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("an entry's deadline %v: %v", deadline.Unix(), err)
		}
	}
	for _, id := range []string{"e", "e1", "e2"} {
		if rec := need(c.Job(at(3), id))(t); rec != nil {
			t.Fatalf("%s was enqueued", id)
		}
	}

	// Job.Suspend's guard: a Job no Worker made.
	if _, err := (&Job{ID: "b", Owner: "A", Fence: cj.Fence}).Suspend(at(4), time.Minute, ""); !errors.Is(err, ErrMisuse) {
		t.Fatalf("a Job made by hand: %v", err)
	}
	// A bad timeout through Job.Suspend: the daemon's error, the lease kept.
	job := newJob(c, *cj, "q", "A", 30*time.Second)
	if _, err := job.Suspend(at(4), 0, ""); !errors.Is(err, ErrInvalidArgument) || job.Lost() || job.Suspended() {
		t.Fatalf("Job.Suspend with timeout 0: %v", err)
	}
	if rec := need(c.Job(at(4), "b"))(t); rec.State != "leased" || rec.Fence != cj.Fence {
		t.Fatalf("the record: %+v", rec)
	}
}

// The events of a suspend, its signal and a passed deadline (EventKinds):
// suspended, signalled, expired.
func TestSignalEvents(t *testing.T) {
	d, events := eventsDaemon(t)
	c := d.client(nil)
	sub := subscribed(t, c, events, "ev")
	need(c.Enqueue(bg, JobSpec{ID: "s", Queue: "ev"}))(t)
	cj := need(c.ClaimNext(bg, "ev", "w1", 30*time.Second, 0))(t)
	token, ok := need3(c.Suspend(bg, "s", "w1", cj.Fence, time.Hour, ""))(t)
	if !ok || !need(c.Signal(bg, token, Text("go")))(t) {
		t.Fatal("suspend or signal refused")
	}
	var kinds []string
	for i := 0; i < 4; i++ {
		ev := nextEvent(t, sub)
		if ev.ID != "s" || (i > 0 && ev.Fence != cj.Fence) { // the fence after each change
			t.Fatalf("event %+v", ev)
		}
		kinds = append(kinds, ev.Event)
	}
	if fmt.Sprint(kinds) != "[enqueued claimed suspended signalled]" {
		t.Fatalf("events %v", kinds)
	}

	need(c.Enqueue(bg, JobSpec{ID: "x", Queue: "ev", Delay: time.Hour, Deadline: time.Now().Add(200 * time.Millisecond)}))(t)
	if ev := nextEvent(t, sub); ev.Event != "enqueued" || ev.ID != "x" {
		t.Fatalf("event %+v", ev)
	}
	time.Sleep(300 * time.Millisecond)
	for i := 0; i < 50; i++ { // the reap comes with a later batch: a write elsewhere makes one
		need(c.Enqueue(bg, JobSpec{ID: fmt.Sprintf("poke-%d", i), Queue: "poke"}))(t)
		ev, got, err := sub.RecvTimeout(100 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if got {
			if ev.Event != "expired" || ev.ID != "x" {
				t.Fatalf("event %+v", ev)
			}
			if rec := need(c.Job(bg, "x"))(t); rec.State != "dead" || *rec.Error != "deadline passed" {
				t.Fatalf("the record: %+v", rec)
			}
			return
		}
	}
	t.Fatal("no expired event after 50 batches")
}
