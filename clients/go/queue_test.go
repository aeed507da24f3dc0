package fenceq

// The ops beyond the vectors' steps: batches end to end, fan-in, the bulk
// helpers' paging, enqueue-and-wait, retention, Request, and replies
// fenceqd never sends (from a stand-in ROUTER).

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestBatchesEndToEnd(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	var jobs []JobSpec
	for i := 0; i < 10; i++ {
		jobs = append(jobs, JobSpec{ID: fmt.Sprintf("b%d", i), Queue: "b", Priority: i % 3})
	}
	created := need(c.EnqueueMany(bg, jobs))(t)
	if len(created) != 10 || !created[0] {
		t.Fatalf("enqueue_many: %v", created)
	}
	got := need(c.ClaimNextMany(bg, "b", "w", time.Minute, 4, 0))(t)
	if len(got) != 4 || got[0].Fence != 1 {
		t.Fatalf("claim_next max 4: %+v", got)
	}
	items := make([]LeaseItem, len(got))
	for i, j := range got {
		items[i] = LeaseItem{ID: j.ID, Owner: "w", Fence: j.Fence, Progress: str("half")}
	}
	if renewed := need(c.RenewMany(bg, items, time.Minute))(t); fmt.Sprint(renewed) != "[true true true true]" {
		t.Fatalf("renew_many: %v", renewed)
	}
	items[3].Fence++ // a stale item fails alone
	for i := range items {
		items[i].Result = str("r")
	}
	reply := need(c.CompleteManyNext(bg, items, NextClaim{Queue: "b", TTL: time.Minute, Max: 10}))(t)
	if fmt.Sprint(reply.Completed) != "[true true true false]" || len(reply.Next) != 6 {
		t.Fatalf("complete_many next: %+v", reply)
	}
	rest := make([]LeaseItem, len(reply.Next))
	for i, j := range reply.Next {
		rest[i] = LeaseItem{ID: j.ID, Owner: "w", Fence: j.Fence}
	}
	if done := need(c.CompleteMany(bg, rest))(t); len(done) != 6 || !done[5] {
		t.Fatalf("complete_many: %v", done)
	}
	keyed := need(c.EnqueueManyUnique(bg, []JobSpec{{ID: "k1", Key: "same"}, {ID: "k2", Key: "same"}, {ID: "n"}}))(t)
	if keyed[0] != (Enqueued{"k1", true}) || keyed[1] != (Enqueued{"k1", false}) || keyed[2] != (Enqueued{"n", true}) {
		t.Fatalf("enqueue_many with keys: %+v", keyed)
	}
}

func TestFanInAndResults(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	made := need(c.EnqueueFanIn(bg, []JobSpec{{ID: "p1", Queue: "f"}, {ID: "p2", Queue: "f"}}, JobSpec{ID: "book", Queue: "f"}))(t)
	if fmt.Sprint(made) != "[true true true]" {
		t.Fatalf("fan-in: %v", made)
	}
	if rec := need(c.Job(bg, "book"))(t); rec.State != "blocked" || fmt.Sprint(rec.After) != "[p1 p2]" {
		t.Fatalf("book: %+v", rec)
	}
	for i := 0; i < 2; i++ {
		j := need(c.ClaimNext(bg, "f", "w", time.Minute, 0))(t)
		need(c.Complete(bg, j.ID, "w", j.Fence, str("part "+j.ID)))(t)
	}
	book := need(c.ClaimNext(bg, "f", "w", time.Minute, 0))(t)
	if book == nil || book.ID != "book" || fmt.Sprint(book.After) != "[p1 p2]" {
		t.Fatalf("book claimed: %+v", book)
	}
	res := need(c.Results(bg, append(book.After, "nope")))(t)
	if *res["p1"].Result != "part p1" || res["p2"].State != "done" || res["nope"] != nil {
		t.Fatalf("results: %+v", res)
	}
}

func TestBulkHelpersPage(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	var jobs []JobSpec
	for i := 0; i < 25; i++ {
		jobs = append(jobs, JobSpec{ID: fmt.Sprintf("x%02d", i), Queue: "x"})
	}
	need(c.EnqueueMany(bg, jobs))(t)
	if n := need(c.CancelAll(bg, "x", BulkFilter{Limit: 10}, 100))(t); n != 25 {
		t.Fatalf("cancel_all: %d", n)
	}
	if n := need(c.RetryAll(bg, "x", BulkFilter{Prefix: "x1", Limit: 3}, 100))(t); n != 10 {
		t.Fatalf("retry_all x1*: %d", n)
	}
	if n := need(c.PurgeAll(bg, PurgeFilter{Queue: "x", BulkFilter: BulkFilter{State: "cancelled", Limit: 7}}, 100))(t); n != 15 {
		t.Fatalf("purge_all: %d", n)
	}
	if _, err := c.RetryAll(bg, "x", BulkFilter{}, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("max pages 0: %v", err)
	}
	if _, err := c.CancelMany(bg, "x", BulkFilter{State: "done"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("cancel_many done: %v", err)
	}
}

func TestEnqueueAndWaitAndRetention(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ { // bounded: a worker for the one job
			j, err := c.ClaimNext(bg, "w", "worker", time.Minute, 200*time.Millisecond)
			if err == nil && j != nil {
				_, _ = c.Complete(bg, j.ID, "worker", j.Fence, str("answer"))
				return
			}
		}
	}()
	rec := need(c.EnqueueAndWait(bg, JobSpec{ID: "ask", Queue: "w", Payload: Text("q")}, 5*time.Second))(t)
	wg.Wait()
	if rec == nil || rec.State != "done" || *rec.Result != "answer" || rec.Payload.String() != "q" {
		t.Fatalf("enqueue_and_wait: %+v", rec)
	}
	if again := need(c.AwaitJob(bg, "ask", 0))(t); again == nil || again.ID != "ask" {
		t.Fatalf("await: %+v", again)
	}
	if ok := need(c.QueueConfig(bg, "w", QueueSettings{KeepDone: Ptr(time.Hour), MaxLeased: Ptr(3)}))(t); !ok {
		t.Fatal("queue_config: false")
	}
	q := need(c.Stats(bg))(t).Queues["w"]
	if q.KeepDone == nil || *q.KeepDone != 3600 || q.MaxLeased == nil || *q.MaxLeased != 3 {
		t.Fatalf("stats: %+v", q)
	}
	need(c.QueueConfig(bg, "w", QueueSettings{KeepDone: Ptr(KeepForever), MaxLeased: Ptr(0)}))(t)
	if q := need(c.Stats(bg))(t).Queues["w"]; q.KeepDone != nil || q.MaxLeased != nil {
		t.Fatalf("retention removed: %+v", q)
	}
	if m := need(c.Metrics(bg))(t); len(m) == 0 {
		t.Fatal("metrics: empty")
	}
}

func TestRequestSendsAnyOp(t *testing.T) {
	d := startDaemon(t, "client")
	c := d.client(&Options{Clock: func() float64 { return 50 }})
	if v := need(c.Request(bg, "enqueue", Field{"id", "r"}, Field{"delay", 5 * time.Second}))(t); v != true {
		t.Fatalf("enqueue: %v", v)
	}
	rec := need(c.Job(bg, "r"))(t) // the Clock's now: 50
	if rec.NotBefore != 55 || rec.Created != 50 {
		t.Fatalf("job: %+v", rec)
	}
	v := need(c.Request(bg, "claim", Field{"id", "r"}, Field{"owner", "o"}, Field{"ttl", 10}, Field{"now", 60.0}))(t)
	if v != int64(1) {
		t.Fatalf("claim: %v", v)
	}
}

// fakeDaemon is a ROUTER standing in for fenceqd, for replies it never
// sends: reply answers each request with the bytes it returns.
func fakeDaemon(t *testing.T, reply func(request map[string]interface{}) []byte) string {
	t.Helper()
	return fakeRouter(t, func(s *zsock, envelope [][]byte, m map[string]interface{}) {
		_ = s.send(append(envelope, reply(m)), 0)
	})
}

// fakeRouter is the ROUTER under fakeDaemon: handle gets each request (the
// envelope to reply to, and the request decoded) on the router's goroutine,
// and sends what it wants on s, now or later.
func fakeRouter(t *testing.T, handle func(s *zsock, envelope [][]byte, m map[string]interface{})) string {
	t.Helper()
	endpoint := "ipc://" + shortDir(t) + "/fake.sock"
	s := need(newZsock(zmqROUTER))(t)
	if err := s.bind(endpoint); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer s.close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if r, _ := s.poll(zmqPOLLIN, 20*time.Millisecond); r == 0 {
				continue
			}
			frames, err := s.recv(0)
			if err != nil {
				return
			}
			v, _ := decodeMsgpack(frames[len(frames)-1])
			m, _ := v.(map[string]interface{})
			handle(s, frames[:len(frames)-1:len(frames)-1], m)
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return endpoint
}

func TestRepliesTheClientRefuses(t *testing.T) {
	answers := map[string]func(req map[string]interface{}) []byte{
		"not msgpack": func(map[string]interface{}) []byte { return []byte{0xc1} },
		"not a map":   func(map[string]interface{}) []byte { return []byte{0x01} },
		"no ok": func(req map[string]interface{}) []byte {
			return mustEncode(t, fields{{"rid", req["rid"]}})
		},
		"a str where a bool is due": func(req map[string]interface{}) []byte {
			return mustEncode(t, fields{{"ok", true}, {"result", "yes"}, {"rid", req["rid"]}})
		},
	}
	for name, answer := range answers {
		name, answer := name, answer
		t.Run(name, func(t *testing.T) {
			c := need(NewClient(fakeDaemon(t, answer), &Options{Timeout: 2 * time.Second}))(t)
			defer c.Close()
			if _, err := c.Retry(bg, "x"); !errors.Is(err, ErrBadReply) {
				t.Fatalf("%s: %v", name, err)
			}
		})
	}
	// A reply to another rid is skipped: the call times out.
	endpoint := fakeDaemon(t, func(req map[string]interface{}) []byte {
		return mustEncode(t, fields{{"ok", true}, {"result", true}, {"rid", int64(999999)}})
	})
	c := need(NewClient(endpoint, &Options{Timeout: 300 * time.Millisecond}))(t)
	defer c.Close()
	if _, err := c.Retry(bg, "x"); !errors.Is(err, ErrTimeout) || err.(*Error).NotSent {
		t.Fatalf("another rid: %v", err)
	}
}

func mustEncode(t *testing.T, f fields) []byte {
	b, err := encodeRequest(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
