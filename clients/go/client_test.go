package fenceq

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPingAndTheBasicOps(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(nil)
	p := need(c.Ping(bg))(t)
	if p.Protocol != 1 || p.Clock != "client" || p.Version == "" {
		t.Fatalf("ping: %+v", p)
	}
	if _, has := p.Fields["ops"]; has {
		t.Fatal("a plain ping answered ops")
	}
	ops := need(c.Describe(bg))(t)
	if len(ops) < 33 || !contains(ops["enqueue"], "after") || !contains(ops["enqueue_many"], "jobs[].after") ||
		!contains(ops["enqueue_many"], "jobs[].deadline") || !contains(ops["suspend"], "on_timeout") ||
		!contains(ops["signal"], "value") || contains(ops["enqueue"], "timeout") {
		t.Fatalf("describe: %v", ops)
	}
	if ok := need(c.Enqueue(bg, JobSpec{ID: "j"}))(t); !ok {
		t.Fatal("enqueue: false")
	}
	if ok := need(c.Enqueue(bg, JobSpec{ID: "j"}))(t); ok {
		t.Fatal("a second enqueue of j: true")
	}
	fence, ok, err := c.Claim(at(100), "j", "w", 30*time.Second)
	if err != nil || !ok || fence != 1 {
		t.Fatalf("claim: %v %v %v", fence, ok, err)
	}
	if ok := need(c.RenewProgress(at(110), "j", "w", 1, 30*time.Second, "1/2"))(t); !ok {
		t.Fatal("renew refused")
	}
	st := need(c.State(bg, "j"))(t)
	if st == nil || st.Owner == nil || *st.Owner != "w" || st.Until != 140 || st.Progress == nil || *st.Progress != "1/2" {
		t.Fatalf("state: %+v", st)
	}
	if ok := need(c.Complete(at(120), "j", "w", 1, str("ok")))(t); !ok {
		t.Fatal("complete refused")
	}
	st = need(c.State(bg, "j"))(t)
	if !st.Done || st.Result == nil || *st.Result != "ok" {
		t.Fatalf("state after complete: %+v", st)
	}
	if none := need(c.State(bg, "missing"))(t); none != nil {
		t.Fatalf("state of a missing job: %+v", none)
	}
}

func TestErrorsCarryTheDaemonsCode(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	need(c.Enqueue(bg, JobSpec{ID: "e"}))(t)
	_, _, err := c.Claim(bg, "e", "w", 0)
	if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrBadRequest) {
		t.Fatalf("ttl 0: %v", err)
	}
	var fe *Error
	if !errors.As(err, &fe) || fe.Op != "claim" || fe.Message == "" || fe.NotSent {
		t.Fatalf("ttl 0: %#v", err)
	}
	// A server-clock daemon refuses a client's now.
	if _, _, err := c.Claim(at(5), "e", "w", time.Second); Code(err) != CodeInvalidArgument {
		t.Fatalf("now on a server clock: %v", err)
	}
	if _, err := c.Request(bg, "no_such_op"); !errors.Is(err, ErrUnknownOp) {
		t.Fatalf("unknown op: %v", err)
	}
	big := JobSpec{ID: "big", Payload: Bytes(make([]byte, MaxPayloadBytes+1))}
	if _, err := c.Enqueue(bg, big); !errors.Is(err, ErrInvalidArgument) || !err.(*Error).NotSent {
		t.Fatalf("a payload over the limit: %v", err)
	}
}

func TestUnreachableFailsAtOnceForAMissingSocketFile(t *testing.T) {
	dir := shortDir(t)
	c, err := NewClient("ipc://"+dir+"/nobody.sock", &Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.Ping(bg)
	if !errors.Is(err, ErrUnreachable) || !err.(*Error).NotSent {
		t.Fatalf("ping: %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("unreachable took %v", time.Since(start))
	}
	if !strings.Contains(err.Error(), dir+"/nobody.sock") {
		t.Fatalf("the message does not name the path: %v", err)
	}
	// A file that is not a socket.
	plain := dir + "/plain"
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c2 := need(NewClient("ipc://"+plain, nil))(t)
	defer c2.Close()
	if _, err := c2.Ping(bg); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("a plain file: %v", err)
	}
}

func TestTimeoutWhenNoDaemonAnswersIsNotSent(t *testing.T) {
	// A tcp endpoint nobody serves: no connection comes up, nothing is sent.
	c := need(NewClient("tcp://127.0.0.1:9", &Options{Timeout: 200 * time.Millisecond}))(t)
	defer c.Close()
	_, err := c.Ping(bg)
	var fe *Error
	if !errors.As(err, &fe) || fe.Code != CodeTimeout || !fe.NotSent {
		t.Fatalf("ping: %#v", err)
	}
}

func TestContextCancelAndDeadline(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	ctx, cancel := context.WithCancel(bg)
	go func() { time.Sleep(150 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := c.ClaimNext(ctx, "empty", "w", time.Second, 10*time.Second)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("cancelled long-poll: %v after %v", err, time.Since(start))
	}
	ctx, cancel = context.WithTimeout(bg, 150*time.Millisecond)
	defer cancel()
	_, err = c.ClaimNext(ctx, "empty", "w", time.Second, 10*time.Second)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}
	// The daemon gave the parked claims back: an enqueue is claimable at once.
	need(c.Enqueue(bg, JobSpec{ID: "after", Queue: "empty"}))(t)
	job := need(c.ClaimNext(bg, "empty", "w2", time.Second, 0))(t)
	if job == nil || job.ID != "after" {
		t.Fatalf("claim after the cancelled long-polls: %+v", job)
	}
}

func TestCloseFailsCallsInFlightAndLater(t *testing.T) {
	d := startDaemon(t, "server")
	c := need(NewClient(d.endpoint, nil))(t)
	errs := make(chan error, 1)
	go func() {
		_, err := c.ClaimNext(bg, "q", "w", time.Second, 20*time.Second)
		errs <- err
	}()
	time.Sleep(200 * time.Millisecond)
	c.Close()
	select {
	case err := <-errs:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("in flight: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight did not end on Close")
	}
	if _, err := c.Ping(bg); !errors.Is(err, ErrMisuse) {
		t.Fatalf("after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestManyGoroutinesShareOneClient(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := "g" + string(rune('a'+w)) + "-" + string(rune('a'+i))
				if _, err := c.Enqueue(bg, JobSpec{ID: id, Queue: "many"}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	// A long-poll of its own meanwhile does not hold the others up.
	go func() { _, _ = c.ClaimNext(bg, "idle", "w", time.Second, 2*time.Second) }()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := need(c.Stats(bg))(t)
	if st.Queues["many"].Ready != workers*each {
		t.Fatalf("ready: %+v", st.Queues["many"])
	}
}

func TestEndpointOrder(t *testing.T) {
	t.Setenv("FENCEQ_ENDPOINT", "ipc:///tmp/from-env.sock")
	if r := ResolveEndpoint("ipc:///tmp/given.sock"); r.Source != SourceGiven || r.Endpoint != "ipc:///tmp/given.sock" {
		t.Fatalf("given: %+v", r)
	}
	if r := ResolveEndpoint(""); r.Source != SourceEnvironment || r.Endpoint != "ipc:///tmp/from-env.sock" {
		t.Fatalf("environment: %+v", r)
	}
	t.Setenv("FENCEQ_ENDPOINT", "")
	r := ResolveEndpoint("")
	if r.Source != SourceService && r.Source != SourceDevelopment {
		t.Fatalf("default: %+v", r)
	}
	if _, err := NewClient("nonsense://x", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a bad endpoint: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
