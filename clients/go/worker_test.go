package fenceq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// outcomes collects a worker's outcomes (OnOutcome runs on Run's goroutine;
// the tests read them from theirs).
type outcomes struct {
	mu  sync.Mutex
	all []Outcome
}

func (o *outcomes) add(x Outcome) { o.mu.Lock(); o.all = append(o.all, x); o.mu.Unlock() }

func (o *outcomes) list() []Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Outcome(nil), o.all...)
}

func quiet(string, ...interface{}) {}

func newTestWorker(t *testing.T, c *Client, o WorkerOptions, out *outcomes) *Worker {
	t.Helper()
	if out != nil {
		o.OnOutcome = out.add
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	return need(NewWorker(c, o))(t)
}

// runAsync runs w in the background; the returned func waits (bounded) for
// Run's answer.
func runAsync(t *testing.T, ctx context.Context, w *Worker, h Handler) func() (int, error) {
	type answer struct {
		n   int
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		n, err := w.Run(ctx, h)
		ch <- answer{n, err}
	}()
	return func() (int, error) {
		select {
		case a := <-ch:
			return a.n, a.err
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return")
			return 0, nil
		}
	}
}

// waitUntil polls cond every 10 ms for up to limit.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v", what, limit)
}

// The contract's story (C3.3-C3.5) with the client clock: A stalls, its
// lease ends, B claims and completes; A's late complete is refused.
func TestContractStaleWriteIsRefused(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "invoice-42"}))(t)
	fa, ok, err := c.Claim(at(100), "invoice-42", "worker-a", 30*time.Second)
	if err != nil || !ok || fa != 1 {
		t.Fatalf("A's claim: %v %v %v", fa, ok, err)
	}
	if _, ok, _ := c.Claim(at(129.5), "invoice-42", "worker-b", 30*time.Second); ok {
		t.Fatal("B claimed while A's lease ran")
	}
	fb, ok, err := c.Claim(at(130), "invoice-42", "worker-b", 30*time.Second)
	if err != nil || !ok || fb != 2 {
		t.Fatalf("B's claim once A's lease ended: %v %v %v", fb, ok, err)
	}
	if ok := need(c.Complete(at(140), "invoice-42", "worker-b", fb, str("paid by B")))(t); !ok {
		t.Fatal("B's complete refused")
	}
	if ok := need(c.Complete(at(141), "invoice-42", "worker-a", fa, str("paid by A")))(t); ok {
		t.Fatal("A's stale complete was applied")
	}
	for _, write := range []func() (bool, error){
		func() (bool, error) { return c.Renew(at(142), "invoice-42", "worker-a", fa, time.Second) },
		func() (bool, error) { return c.Release(at(142), "invoice-42", "worker-a", fa) },
		func() (bool, error) { return c.Fail(at(142), "invoice-42", "worker-a", fa, "late") },
	} {
		if ok := need(write())(t); ok {
			t.Fatal("a stale write of A was applied")
		}
	}
	st := need(c.State(bg, "invoice-42"))(t)
	if !st.Done || *st.Result != "paid by B" || st.Fence != 2 {
		t.Fatalf("state: %+v", st)
	}
	stats := need(c.Stats(at(143)))(t)
	if stats.Writes["complete"].Refused != 1 || stats.Writes["complete"].Applied != 1 {
		t.Fatalf("writes: %+v", stats.Writes)
	}
}

// The same story with workers on the server clock: worker A stalls (it
// does not renew) past its lease; worker B takes the job over and
// completes it; A's result is refused: its outcome is lost, with the
// lease_lost code.
func TestStalledWorkerIsRefused(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "report", Queue: "q"}))(t)
	var outA outcomes
	a := newTestWorker(t, c, WorkerOptions{Queue: "q", Owner: "worker-a", TTL: 500 * time.Millisecond,
		RenewEvery: time.Hour, Wait: 100 * time.Millisecond, MaxJobs: 1}, &outA)
	stalled, resume := make(chan struct{}), make(chan struct{})
	doneA := runAsync(t, bg, a, func(ctx context.Context, job *Job) (string, error) {
		close(stalled)
		<-resume // a stall: a GC pause, a swapped-out process
		return "by A", nil
	})
	<-stalled
	var outB outcomes
	b := newTestWorker(t, c, WorkerOptions{Queue: "q", Owner: "worker-b", TTL: 10 * time.Second,
		Wait: 2 * time.Second, MaxJobs: 1}, &outB)
	n, err := b.Run(bg, func(ctx context.Context, job *Job) (string, error) {
		if job.Fence != 2 || job.Attempts != 2 {
			return "", fmt.Errorf("fence %d, attempts %d", job.Fence, job.Attempts)
		}
		return "by B", nil
	})
	if err != nil || n != 1 || outB.list()[0].Status != StatusCompleted {
		t.Fatalf("B: %d %v %+v", n, err, outB.list())
	}
	close(resume)
	if n, err := doneA(); err != nil || n != 1 {
		t.Fatalf("A: %d %v", n, err)
	}
	o := outA.list()[0]
	if o.Status != StatusLost || !errors.Is(o.Err, ErrLeaseLost) || o.Job.Fence != 1 {
		t.Fatalf("A's outcome: %+v", o)
	}
	st := need(c.State(bg, "report"))(t)
	if !st.Done || *st.Result != "by B" {
		t.Fatalf("state: %+v", st)
	}
	if refused := need(c.Stats(bg))(t).Writes["complete"].Refused; refused != 1 {
		t.Fatalf("refused completes: %d", refused)
	}
}

func TestRefusedRenewalCancelsTheHandler(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "long", Queue: "q"}))(t)
	var out outcomes
	w := newTestWorker(t, c, WorkerOptions{Queue: "q", TTL: 3 * time.Second, RenewEvery: 100 * time.Millisecond,
		Wait: 100 * time.Millisecond, MaxJobs: 1}, &out)
	started := make(chan *Job, 1)
	done := runAsync(t, bg, w, func(ctx context.Context, job *Job) (string, error) {
		started <- job
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(10 * time.Second):
			return "not cancelled", nil
		}
	})
	job := <-started
	if ok := need(c.Cancel(bg, "long"))(t); !ok {
		t.Fatal("cancel: false")
	}
	if _, err := done(); err != nil {
		t.Fatal(err)
	}
	o := out.list()[0]
	if o.Status != StatusLost || !job.Lost() || !errors.Is(job.Check(), ErrLeaseLost) {
		t.Fatalf("outcome: %+v", o)
	}
	if rec := need(c.Job(bg, "long"))(t); rec.State != "cancelled" || rec.Result != nil {
		t.Fatalf("job: %+v", rec)
	}
}

func TestHandlerGetsPayloadAndHeaders(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	need(c.Enqueue(bg, JobSpec{ID: "h", Queue: "q", Payload: Bytes([]byte{0, 1, 2}),
		Headers: map[string]string{"traceparent": tp}}))(t)
	need(c.Enqueue(bg, JobSpec{ID: "plain", Queue: "q", Payload: Text("hi")}))(t)
	w := newTestWorker(t, c, WorkerOptions{Queue: "q", Wait: 100 * time.Millisecond, MaxJobs: 2}, nil)
	seen := map[string]*Job{}
	if _, err := w.Run(bg, func(ctx context.Context, job *Job) (string, error) {
		seen[job.ID] = job
		return "ok", nil
	}); err != nil {
		t.Fatal(err)
	}
	h := seen["h"]
	if h == nil || h.Headers["traceparent"] != tp || h.Payload.IsText() || string(h.Payload.Bytes()) != "\x00\x01\x02" {
		t.Fatalf("h: %+v", h)
	}
	if p := seen["plain"]; p == nil || p.Headers != nil || !p.Payload.IsText() || p.Payload.String() != "hi" {
		t.Fatalf("plain: %+v", p)
	}
}

func TestSnoozeAndFailFromTheHandler(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "later", Queue: "q"}))(t)
	need(c.Enqueue(bg, JobSpec{ID: "broken", Queue: "q"}))(t)
	var out outcomes
	w := newTestWorker(t, c, WorkerOptions{Queue: "q", Wait: 100 * time.Millisecond, MaxJobs: 2, Logf: quiet}, &out)
	if _, err := w.Run(bg, func(ctx context.Context, job *Job) (string, error) {
		if job.ID == "later" {
			return "", SnoozeFor(time.Hour, "rate limited")
		}
		return "", errors.New("bad input")
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]Outcome{}
	for _, o := range out.list() {
		got[o.Job.ID] = o
	}
	var sn *Snooze
	if o := got["later"]; o.Status != StatusSnoozed || !errors.As(o.Err, &sn) || sn.Delay != time.Hour {
		t.Fatalf("later: %+v", o)
	}
	if rec := need(c.Job(bg, "later"))(t); rec.State != "delayed" || rec.Attempts != 0 || rec.Error != nil {
		t.Fatalf("later's record: %+v", rec)
	}
	if o := got["broken"]; o.Status != StatusFailed {
		t.Fatalf("broken: %+v", o)
	}
	if rec := need(c.Job(bg, "broken"))(t); rec.Error == nil || *rec.Error != "bad input" || rec.Attempts != 1 {
		t.Fatalf("broken's record: %+v", rec)
	}
	if err := SnoozeFor(-time.Second, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a negative snooze: %v", err)
	}
}

func TestGracefulStopFinishesTheJobAndReleasesTheRest(t *testing.T) {
	for _, prefetch := range []int{1, 4} {
		t.Run(fmt.Sprintf("prefetch %d", prefetch), func(t *testing.T) {
			d := startDaemon(t, "server")
			c := d.client(nil)
			for i := 0; i < 6; i++ {
				need(c.Enqueue(bg, JobSpec{ID: fmt.Sprintf("s%d", i), Queue: "q"}))(t)
			}
			var out outcomes
			w := newTestWorker(t, c, WorkerOptions{Queue: "q", Prefetch: prefetch, Wait: 100 * time.Millisecond}, &out)
			running := make(chan struct{}, 10)
			release := make(chan struct{})
			done := runAsync(t, bg, w, func(ctx context.Context, job *Job) (string, error) {
				running <- struct{}{}
				<-release
				return "done " + job.ID, nil
			})
			<-running
			w.Stop()
			close(release)
			if n, err := done(); err != nil || n != 1 {
				t.Fatalf("Run: %d %v", n, err)
			}
			if o := out.list(); len(o) != 1 || o[0].Status != StatusCompleted {
				t.Fatalf("outcomes: %+v", o)
			}
			st := need(c.Stats(bg))(t).Queues["q"]
			if st.Done != 1 || st.Leased != 0 || st.Ready != 5 {
				t.Fatalf("after the stop: %+v", st)
			}
		})
	}
}

func TestRunContextEndCancelsAndReleases(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "x", Queue: "q"}))(t)
	w := newTestWorker(t, c, WorkerOptions{Queue: "q", Wait: 100 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(bg)
	started := make(chan struct{})
	done := runAsync(t, ctx, w, func(hctx context.Context, job *Job) (string, error) {
		close(started)
		<-hctx.Done()
		return "", hctx.Err()
	})
	<-started
	cancel()
	if _, err := done(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if rec := need(c.Job(bg, "x"))(t); rec.State != "ready" || rec.Attempts != 1 {
		t.Fatalf("released: %+v", rec)
	}
}

func TestPrefetchRunsEveryJobAndKeepsTheLeases(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	var jobs []JobSpec
	for i := 0; i < 12; i++ {
		jobs = append(jobs, JobSpec{ID: fmt.Sprintf("p%02d", i), Queue: "pf"})
	}
	need(c.EnqueueMany(bg, jobs))(t)
	var out outcomes
	// Leases of 800 ms, 6 held at once, 200 ms a job: the last of a batch
	// waits 1 s, past its first lease, so it lives only through renew_many
	// (every 150 ms: a round may come 650 ms late on a busy machine).
	w := newTestWorker(t, c, WorkerOptions{Queue: "pf", Prefetch: 6, TTL: 800 * time.Millisecond,
		RenewEvery: 150 * time.Millisecond, Wait: 100 * time.Millisecond, IdleExit: 500 * time.Millisecond}, &out)
	n, err := w.Run(bg, func(ctx context.Context, job *Job) (string, error) {
		time.Sleep(200 * time.Millisecond)
		return "r-" + job.ID, nil
	})
	if err != nil || n != 12 {
		t.Fatalf("Run: %d %v", n, err)
	}
	completed := 0
	for _, o := range out.list() {
		if o.Status == StatusCompleted {
			completed++
		}
	}
	st := need(c.Stats(bg))(t)
	if completed != 12 || st.Queues["pf"].Done != 12 || st.Queues["pf"].Totals.Expired != 0 {
		t.Fatalf("completed %d; %+v", completed, st.Queues["pf"])
	}
	if r := need(c.Results(bg, []string{"p07"}))(t)["p07"]; r == nil || *r.Result != "r-p07" {
		t.Fatalf("p07: %+v", r)
	}
	if renews := st.Writes["renew"].Applied; renews == 0 {
		t.Fatalf("no renewal: %+v", st.Writes)
	}
}

func TestPrefetchDropsACancelledHeldJob(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.EnqueueMany(bg, []JobSpec{{ID: "a", Queue: "q"}, {ID: "b", Queue: "q"}, {ID: "c", Queue: "q"}}))(t)
	var out outcomes
	w := newTestWorker(t, c, WorkerOptions{Queue: "q", Prefetch: 3, TTL: 5 * time.Second,
		RenewEvery: 100 * time.Millisecond, Wait: 100 * time.Millisecond, IdleExit: 300 * time.Millisecond, Logf: quiet}, &out)
	var ran []string
	_, err := w.Run(bg, func(ctx context.Context, job *Job) (string, error) {
		ran = append(ran, job.ID)
		if job.ID == "a" { // b waits its turn, leased to this worker: cancel it
			if ok, err := c.Cancel(bg, "b"); err != nil || !ok {
				return "", fmt.Errorf("cancel b: %v %v", ok, err)
			}
			time.Sleep(800 * time.Millisecond) // renewal rounds, every 100 ms
		}
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ran) != "[a c]" {
		t.Fatalf("ran %v", ran)
	}
	if rec := need(c.Job(bg, "b"))(t); rec.State != "cancelled" {
		t.Fatalf("b: %+v", rec)
	}
}

func TestWorkClaimsRunsAndCompletes(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "w1"}))(t)
	claimed, completed, err := c.Work(bg, "w1", "me", 5*time.Second, func(ctx context.Context, job *Job) (string, error) {
		return fmt.Sprintf("fence %d", job.Fence), nil
	})
	if !claimed || !completed || err != nil {
		t.Fatalf("work: %v %v %v", claimed, completed, err)
	}
	if st := need(c.State(bg, "w1"))(t); *st.Result != "fence 1" {
		t.Fatalf("state: %+v", st)
	}
	claimed, _, err = c.Work(bg, "w1", "me", 5*time.Second, func(ctx context.Context, job *Job) (string, error) {
		t.Fatal("ran a done job")
		return "", nil
	})
	if claimed || err != nil {
		t.Fatalf("a done job: %v %v", claimed, err)
	}
	need(c.Enqueue(bg, JobSpec{ID: "w2"}))(t)
	_, _, err = c.Work(bg, "w2", "me", 5*time.Second, func(ctx context.Context, job *Job) (string, error) {
		return "", errors.New("no")
	})
	if err == nil || err.Error() != "no" {
		t.Fatalf("a failing job: %v", err)
	}
	if st := need(c.State(bg, "w2"))(t); st.Owner != nil || st.Done {
		t.Fatalf("released: %+v", st)
	}
}

func TestWorkerOptionsAreChecked(t *testing.T) {
	c := need(NewClient("ipc:///tmp/none.sock", nil))(t)
	defer c.Close()
	for _, o := range []WorkerOptions{{TTL: -1}, {Prefetch: 1001}, {Wait: 2 * time.Hour}, {RetryIn: Ptr(-time.Second)}} {
		if _, err := NewWorker(c, o); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%+v: %v", o, err)
		}
	}
}
