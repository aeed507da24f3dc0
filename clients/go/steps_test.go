package fenceq

// Steps (C3.22): Client.StepSave, the Steps that claims and Job carry, and
// the worker's Job.Step. A step is saved under the current lease, once per
// job (never overwritten); every later claim of the job hands it back, so a
// retried job skips the steps its earlier attempts finished; a stale lease
// saves nothing.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// samePayload reports whether two payloads are the same kind and bytes.
func samePayload(a, b Payload) bool {
	return a.IsNil() == b.IsNil() && a.IsText() == b.IsText() && bytes.Equal(a.Bytes(), b.Bytes())
}

func sameSteps(t *testing.T, where string, got, want map[string]Payload) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: steps %v, want %v", where, got, want)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || !samePayload(g, w) {
			t.Fatalf("%s: step %q is %#v, want %#v", where, name, g, w)
		}
	}
}

func TestStepSaveOnceAndTheStepsOfClaims(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(nil)
	save := func(now float64, owner string, fence int64, step string, v Payload) bool {
		t.Helper()
		return need(c.StepSave(at(now), "o", owner, fence, step, v))(t)
	}
	need(c.Enqueue(at(1), JobSpec{ID: "o", Queue: "orders"}))(t)
	cj := need(c.ClaimNext(at(2), "orders", "A", 30*time.Second, 0))(t)
	if cj == nil || cj.Fence != 1 || cj.Steps != nil {
		t.Fatalf("first claim: %+v", cj)
	}
	if rec := need(c.Job(at(2), "o"))(t); rec.Steps != nil {
		t.Fatalf("a job without steps: %+v", rec.Steps)
	}
	want := map[string]Payload{"bin": Bytes([]byte{0, 1, 255}), "charge": Text("ch_1"), "nil": {}, "empty": Text("")}
	for _, name := range []string{"bin", "charge", "nil", "empty"} {
		if !save(3, "A", 1, name, want[name]) {
			t.Fatalf("save %s: false", name)
		}
	}
	// Never overwritten, not even by the lease that saved it.
	if save(3, "A", 1, "charge", Text("ch_2")) || save(3, "A", 1, "nil", Text("x")) {
		t.Fatal("a saved step was overwritten")
	}
	sameSteps(t, "job", need(c.Job(at(3), "o"))(t).Steps, want)
	if !need(c.Release(at(4), "o", "A", 1))(t) {
		t.Fatal("release")
	}

	// Every later claim carries the steps: ClaimNext, ClaimNextMany, the
	// Next of CompleteAndClaimNext and of CompleteManyNext.
	cj = need(c.ClaimNext(at(5), "orders", "B", 30*time.Second, 0))(t)
	if cj == nil || cj.Fence != 2 || cj.Attempts != 2 {
		t.Fatalf("B's claim: %+v", cj)
	}
	sameSteps(t, "ClaimNext", cj.Steps, want)
	if save(5, "A", 1, "late", Text("x")) { // stale
		t.Fatal("a stale lease saved a step")
	}
	need(c.Release(at(5), "o", "B", 2))(t)
	many := need(c.ClaimNextMany(at(6), "orders", "B", 30*time.Second, 3, 0))(t)
	if len(many) != 1 {
		t.Fatalf("ClaimNextMany: %+v", many)
	}
	sameSteps(t, "ClaimNextMany", many[0].Steps, want)
	need(c.Release(at(6), "o", "B", many[0].Fence))(t)
	need(c.Enqueue(at(7), JobSpec{ID: "first", Queue: "other"}))(t)
	f := need(c.ClaimNext(at(7), "other", "B", 30*time.Second, 0))(t)
	cn := need(c.CompleteAndClaimNext(at(8), "first", "B", f.Fence, str("ok"), "orders", 30*time.Second))(t)
	if !cn.Completed || cn.Next == nil {
		t.Fatalf("CompleteAndClaimNext: %+v", cn)
	}
	sameSteps(t, "CompleteAndClaimNext", cn.Next.Steps, want)
	need(c.Release(at(8), "o", "B", cn.Next.Fence))(t)
	need(c.Enqueue(at(9), JobSpec{ID: "second", Queue: "other"}))(t)
	s := need(c.ClaimNext(at(9), "other", "B", 30*time.Second, 0))(t)
	cm := need(c.CompleteManyNext(at(10), []LeaseItem{{ID: "second", Owner: "B", Fence: s.Fence, Result: str("ok")}},
		NextClaim{Queue: "orders", TTL: 10 * time.Second, Max: 2}))(t)
	if len(cm.Next) != 1 {
		t.Fatalf("CompleteManyNext: %+v", cm)
	}
	sameSteps(t, "CompleteManyNext", cm.Next[0].Steps, want)
	fence := cm.Next[0].Fence

	// Expired, released, or a job that is not there: nothing saved.
	if save(21, "B", fence, "expired", Text("x")) {
		t.Fatal("an expired lease saved a step")
	}
	fence = need(c.ClaimNext(at(22), "orders", "C", 30*time.Second, 0))(t).Fence
	if !save(22, "C", fence, "c", Text("by C")) {
		t.Fatal("C's save")
	}
	need(c.Release(at(22), "o", "C", fence))(t)
	if save(22, "C", fence, "released", Text("x")) {
		t.Fatal("a released lease saved a step")
	}
	if need(c.StepSave(at(22), "missing", "C", 1, "x", Text("x")))(t) {
		t.Fatal("a missing job saved a step")
	}
	want["c"] = Text("by C")
	sameSteps(t, "job at the end", need(c.Job(at(23), "o"))(t).Steps, want)
}

func TestStepSaveBadInputAndBounds(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(nil)
	need(c.Enqueue(at(1), JobSpec{ID: "b", Queue: "q"}))(t)
	fence := need(c.ClaimNext(at(1), "q", "A", 30*time.Second, 0))(t).Fence
	for _, step := range []string{"", strings.Repeat("s", 257), "\xff"} {
		if _, err := c.StepSave(at(2), "b", "A", fence, step, Text("v")); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("step %q: %v", step, err)
		}
	}
	if ok := need(c.StepSave(at(2), "b", "A", fence, strings.Repeat("s", 256), Text("v")))(t); !ok {
		t.Fatal("a 256-byte name")
	}
	_, err := c.StepSave(at(2), "b", "A", fence, "huge", Bytes(make([]byte, MaxPayloadBytes+1)))
	var fe *Error
	if !errors.As(err, &fe) || fe.Code != CodeInvalidArgument || !fe.NotSent {
		t.Fatalf("a value over 256 KiB: %v", err)
	}
	// The per-job bounds: 256 KiB of values, 64 steps.
	if ok := need(c.StepSave(at(2), "b", "A", fence, "big", Bytes(make([]byte, 200*1024))))(t); !ok {
		t.Fatal("200 KiB")
	}
	if _, err := c.StepSave(at(2), "b", "A", fence, "more", Bytes(make([]byte, 60*1024))); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("past 256 KiB in all: %v", err)
	}
	for i := 2; i < 64; i++ {
		if ok := need(c.StepSave(at(2), "b", "A", fence, fmt.Sprintf("s%d", i), Payload{}))(t); !ok {
			t.Fatalf("step %d", i)
		}
	}
	if _, err := c.StepSave(at(2), "b", "A", fence, "s64", Payload{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a 65th step: %v", err)
	}
	rec := need(c.Job(at(3), "b"))(t)
	if len(rec.Steps) != 64 || rec.Steps["big"].Len() != 200*1024 {
		t.Fatalf("%d steps", len(rec.Steps))
	}
	if _, ok := rec.Steps["more"]; ok {
		t.Fatal("a refused step was saved")
	}
}

// The story: a handler charges, then fails to send the email; the retry
// resumes: charge's function ran once across both attempts, email ran
// again, and the job completes.
func TestStepStoryRetryResumes(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "order-7", Queue: "orders", Payload: Text("order-7")}))(t)
	var out outcomes
	w := newTestWorker(t, c, WorkerOptions{Queue: "orders", Wait: 100 * time.Millisecond, RetryIn: Ptr(time.Duration(0)),
		MaxJobs: 2, Logf: quiet}, &out)
	charges, emails := 0, 0
	_, err := w.Run(bg, func(ctx context.Context, job *Job) (string, error) {
		charge, err := job.Step(ctx, "charge", func(ctx context.Context) (Payload, error) {
			charges++
			return Text("ch_" + job.Payload.String()), nil
		})
		if err != nil {
			return "", err
		}
		if _, err := job.Step(ctx, "email", func(ctx context.Context) (Payload, error) {
			emails++
			if job.Attempts == 1 {
				return Payload{}, errors.New("smtp down")
			}
			return Payload{}, nil
		}); err != nil {
			return "", err
		}
		return "done " + charge.String(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all := out.list()
	if len(all) != 2 || all[0].Status != StatusFailed || all[1].Status != StatusCompleted || all[1].Result != "done ch_order-7" {
		t.Fatalf("outcomes: %+v", all)
	}
	if charges != 1 || emails != 2 {
		t.Fatalf("charge ran %d times, email %d", charges, emails)
	}
	rec := need(c.Job(bg, "order-7"))(t)
	if rec.State != "done" || rec.Attempts != 2 || *rec.Error != "smtp down" {
		t.Fatalf("record: %+v", rec)
	}
	sameSteps(t, "the record", rec.Steps, map[string]Payload{"charge": Text("ch_order-7"), "email": {}})
}

// A stalled first attempt: worker A's lease runs out, worker B claims the
// job and saves charge; A's late Step fails with lease_lost, nothing after
// it runs, and B's value stays.
func TestStepOfAStalledAttemptIsRefused(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "order-8", Queue: "orders"}))(t)
	var outA outcomes
	a := newTestWorker(t, c, WorkerOptions{Queue: "orders", Owner: "worker-a", TTL: 500 * time.Millisecond,
		RenewEvery: time.Hour, Wait: 100 * time.Millisecond, MaxJobs: 1, Logf: quiet}, &outA)
	stalled, resume := make(chan struct{}), make(chan struct{})
	var aStep error
	var aCharged, aAfter, aCtxDone bool
	doneA := runAsync(t, bg, a, func(ctx context.Context, job *Job) (string, error) {
		close(stalled)
		<-resume // a stall: a GC pause, a swapped-out process
		_, aStep = job.Step(ctx, "charge", func(ctx context.Context) (Payload, error) {
			aCharged = true // A cannot know B saved it: its side effect runs, its save is refused
			return Text("ch_A"), nil
		})
		aCtxDone = ctx.Err() != nil
		if aStep != nil {
			return "", aStep
		}
		aAfter = true
		return "by A", nil
	})
	<-stalled
	var outB outcomes
	b := newTestWorker(t, c, WorkerOptions{Queue: "orders", Owner: "worker-b", TTL: 10 * time.Second,
		Wait: 2 * time.Second, MaxJobs: 1}, &outB)
	if _, err := b.Run(bg, func(ctx context.Context, job *Job) (string, error) {
		if job.Fence != 2 {
			return "", fmt.Errorf("fence %d", job.Fence)
		}
		v, err := job.Step(ctx, "charge", func(ctx context.Context) (Payload, error) { return Text("ch_B"), nil })
		return "by B: " + v.String(), err
	}); err != nil || outB.list()[0].Status != StatusCompleted {
		t.Fatalf("B: %v %+v", err, outB.list())
	}
	close(resume)
	if n, err := doneA(); err != nil || n != 1 {
		t.Fatalf("A: %d %v", n, err)
	}
	if !errors.Is(aStep, ErrLeaseLost) || !strings.Contains(aStep.Error(), `step "charge" was not saved`) {
		t.Fatalf("A's step: %v", aStep)
	}
	if !aCharged || aAfter || !aCtxDone {
		t.Fatalf("A charged %v, went on %v, its context done %v", aCharged, aAfter, aCtxDone)
	}
	if o := outA.list()[0]; o.Status != StatusLost || !errors.Is(o.Err, ErrLeaseLost) || !o.Job.Lost() {
		t.Fatalf("A's outcome: %+v", o)
	}
	rec := need(c.Job(bg, "order-8"))(t)
	if rec.State != "done" || *rec.Result != "by B: ch_B" || rec.Fence != 2 {
		t.Fatalf("record: %+v", rec)
	}
	sameSteps(t, "the record", rec.Steps, map[string]Payload{"charge": Text("ch_B")})
	if fails := need(c.Stats(bg))(t).Writes["fail"].Applied; fails != 0 {
		t.Fatalf("A's attempt was failed: %d", fails)
	}
}

func TestStepInWorkReadsTheSavedSteps(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "w"}))(t)
	var calls []string
	fn := func(ctx context.Context, job *Job) (string, error) {
		var got []string
		for _, name := range []string{"one", "two"} {
			v, err := job.Step(ctx, name, func(ctx context.Context) (Payload, error) {
				calls = append(calls, fmt.Sprintf("%s@%d", name, job.Fence))
				return Text(fmt.Sprintf("%s@%d", name, job.Fence)), nil
			})
			if err != nil {
				return "", err
			}
			got = append(got, v.String())
		}
		if job.Fence == 1 {
			return "", errors.New("first attempt fails")
		}
		return strings.Join(got, " "), nil
	}
	if _, _, err := c.Work(bg, "w", "me", 5*time.Second, fn); err == nil || err.Error() != "first attempt fails" {
		t.Fatalf("first Work: %v", err)
	}
	var ops []string
	var mu sync.Mutex
	ctx := context.WithValue(bg, sendHookKey{}, sendHook(func(request fields) error {
		op, _ := request.get("op")
		mu.Lock()
		ops = append(ops, op.(string))
		mu.Unlock()
		return nil
	}))
	claimed, completed, err := c.Work(ctx, "w", "me", 5*time.Second, fn)
	if !claimed || !completed || err != nil {
		t.Fatalf("second Work: %v %v %v", claimed, completed, err)
	}
	if fmt.Sprint(calls) != "[one@1 two@1]" {
		t.Fatalf("calls: %v", calls)
	}
	if fmt.Sprint(ops) != "[claim job complete]" { // one read, no save
		t.Fatalf("requests: %v", ops)
	}
	if st := need(c.State(bg, "w"))(t); *st.Result != "one@1 two@1" {
		t.Fatalf("state: %+v", st)
	}
}

func TestStepInAPrefetchRoundAndItsGuards(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.EnqueueMany(bg, []JobSpec{{ID: "a", Queue: "q"}, {ID: "b", Queue: "q"}, {ID: "c", Queue: "q"}}))(t)
	var out outcomes
	w := newTestWorker(t, c, WorkerOptions{Queue: "q", Prefetch: 3, Wait: 100 * time.Millisecond,
		IdleExit: 300 * time.Millisecond, Logf: quiet}, &out)
	var runs atomic.Int32
	if _, err := w.Run(bg, func(ctx context.Context, job *Job) (string, error) {
		if job.ID == "b" {
			if ok, err := c.Cancel(bg, "b"); err != nil || !ok {
				return "", fmt.Errorf("cancel b: %v %v", ok, err)
			}
		}
		// Two Steps of one name at once share one run of fn.
		var wg sync.WaitGroup
		vals := make([]Payload, 2)
		errs := make([]error, 2)
		for i := range vals {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				vals[i], errs[i] = job.Step(ctx, "s", func(ctx context.Context) (Payload, error) {
					runs.Add(1)
					time.Sleep(20 * time.Millisecond)
					return Bytes([]byte(job.ID)), nil
				})
			}(i)
		}
		wg.Wait()
		if errs[0] != nil {
			return "", errs[0]
		}
		if errs[1] != nil || !samePayload(vals[0], vals[1]) {
			return "", fmt.Errorf("the second call: %v %v", vals[1], errs[1])
		}
		return string(vals[0].Bytes()), nil
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range out.list() {
		got[o.Job.ID] = o.Status
	}
	if got["a"] != StatusCompleted || got["b"] != StatusLost || got["c"] != StatusCompleted || runs.Load() != 3 {
		t.Fatalf("outcomes %v, %d runs", got, runs.Load())
	}
	sameSteps(t, "a", need(c.Job(bg, "a"))(t).Steps, map[string]Payload{"s": Bytes([]byte("a"))})
	if rec := need(c.Job(bg, "b"))(t); rec.State != "cancelled" || rec.Steps != nil {
		t.Fatalf("b: %+v", rec)
	}

	// Guards: an empty name, no fn, a Job no Worker made.
	job := &Job{ID: "a", Owner: "me", Fence: 1}
	if _, err := job.Step(bg, "x", func(context.Context) (Payload, error) { return Payload{}, nil }); !errors.Is(err, ErrMisuse) {
		t.Fatalf("a Job made by hand: %v", err)
	}
	job.c = c
	if _, err := job.Step(bg, "", func(context.Context) (Payload, error) { return Payload{}, nil }); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an empty name: %v", err)
	}
	if _, err := job.Step(bg, "x", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no fn: %v", err)
	}
	// A job whose lease is gone: its first Step reads the record and stops.
	ran := false
	if _, err := job.Step(bg, "x", func(context.Context) (Payload, error) { ran = true; return Payload{}, nil }); !errors.Is(err, ErrLeaseLost) || ran || !job.Lost() {
		t.Fatalf("a done job's step: %v, ran %v", err, ran)
	}
}
