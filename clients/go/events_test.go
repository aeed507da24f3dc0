package fenceq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// eventsDaemon is a server-clock fenceqd with --events on an ipc socket
// next to its own; it answers the daemon and its events endpoint.
func eventsDaemon(t *testing.T) (*testDaemon, string) {
	t.Helper()
	dir := shortDir(t)
	events := "ipc://" + dir + "/events.sock"
	return startDaemon(t, "server", "--events", events), events
}

var probes int

// subscribed is a Subscriber for queue made ready: a SUB socket receives
// only once its subscription reached the daemon (the slow joiner), so probe
// jobs (delayed far into the future: never claimed) are enqueued on the
// queue until one's event arrives, within 5 s.
func subscribed(t *testing.T, c *Client, endpoint, queue string) *Subscriber {
	t.Helper()
	sub := need(Subscribe(endpoint, queue, nil))(t)
	t.Cleanup(func() { sub.Close() })
	probeQueue := queue
	if probeQueue == "" {
		probeQueue = "probe"
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		probes++
		id := fmt.Sprintf("probe-%d", probes)
		need(c.Enqueue(bg, JobSpec{ID: id, Queue: probeQueue, Delay: 1e6 * time.Second}))(t)
		for {
			ev, ok, err := sub.RecvTimeout(100 * time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if ev.ID == id {
				return sub
			}
		}
	}
	t.Fatal("the subscriber did not become ready within 5 s")
	return nil
}

func nextEvent(t *testing.T, sub *Subscriber) Event {
	t.Helper()
	ev, ok, err := sub.RecvTimeout(5 * time.Second)
	if err != nil || !ok {
		t.Fatalf("no event within 5 s (%v)", err)
	}
	return ev
}

func TestEventsOfAJobsLife(t *testing.T) {
	d, events := eventsDaemon(t)
	c := d.client(nil)
	sub := subscribed(t, c, events, "mail")
	need(c.Enqueue(bg, JobSpec{ID: "mail-9", Queue: "mail", Group: "acme"}))(t)
	job := need(c.ClaimNext(bg, "mail", "w1", 30*time.Second, 0))(t)
	need(c.Complete(bg, job.ID, "w1", job.Fence, str("sent")))(t)
	e1, e2, e3 := nextEvent(t, sub), nextEvent(t, sub), nextEvent(t, sub)
	if e1.Event != "enqueued" || e1.ID != "mail-9" || e1.Queue != "mail" || e1.Fence != 0 || e1.Group != "acme" || e1.Owner != "" {
		t.Fatalf("enqueued: %+v", e1)
	}
	if e2.Event != "claimed" || e2.Owner != "w1" || e2.Fence != 1 || e2.Seq != e1.Seq+1 {
		t.Fatalf("claimed: %+v", e2)
	}
	if e3.Event != "completed" || e3.Fence != 1 || e3.Seq != e2.Seq+1 || e3.T <= 0 {
		t.Fatalf("completed: %+v", e3)
	}
	if sub.LastSeq() != e3.Seq {
		t.Fatalf("last seq %d", sub.LastSeq())
	}
}

func TestEventsOfOneQueueExactly(t *testing.T) {
	d, events := eventsDaemon(t)
	c := d.client(nil)
	sub := subscribed(t, c, events, "emails")
	missed := sub.Missed()
	need(c.Enqueue(bg, JobSpec{ID: "eu", Queue: "emails-eu"}))(t) // a prefix match: skipped
	need(c.Enqueue(bg, JobSpec{ID: "other", Queue: "other"}))(t)  // not received: a gap
	need(c.Enqueue(bg, JobSpec{ID: "mine", Queue: "emails"}))(t)
	ev := nextEvent(t, sub)
	if ev.ID != "mine" || ev.Queue != "emails" {
		t.Fatalf("event: %+v", ev)
	}
	if sub.Missed() != missed+1 {
		t.Fatalf("missed %d, was %d", sub.Missed(), missed)
	}
}

func TestSubscriberCloseEndsRecv(t *testing.T) {
	_, events := eventsDaemon(t)
	sub := need(Subscribe(events, "", nil))(t)
	errs := make(chan error, 1)
	go func() { _, err := sub.Recv(bg); errs <- err }()
	time.Sleep(100 * time.Millisecond)
	sub.Close()
	select {
	case err := <-errs:
		if !errors.Is(err, ErrMisuse) {
			t.Fatalf("Recv: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv did not end on Close")
	}
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if _, err := sub.Recv(ctx); !errors.Is(err, ErrMisuse) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := Subscribe("", "q", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no endpoint: %v", err)
	}
}

func TestParseEventRefusesWhatIsNoEvent(t *testing.T) {
	body := func(m map[string]interface{}) []byte {
		b, err := msgpack.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := map[string]interface{}{"seq": 3, "t": 1.5, "event": "claimed", "id": "j", "queue": "q", "fence": 2, "owner": "w"}
	ev, err := parseEvent([][]byte{[]byte("q"), body(good)})
	if err != nil || ev.Seq != 3 || ev.Owner != "w" || ev.Fence != 2 {
		t.Fatalf("good: %+v %v", ev, err)
	}
	bad := []struct {
		name   string
		frames [][]byte
	}{
		{"one frame", [][]byte{body(good)}},
		{"not msgpack", [][]byte{[]byte("q"), {0xc1}}},
		{"not a map", [][]byte{[]byte("q"), {0x01}}},
		{"topic is not the queue", [][]byte{[]byte("r"), body(good)}},
	}
	for _, key := range []string{"seq", "t", "event", "id", "queue", "fence"} {
		m := map[string]interface{}{}
		for k, v := range good {
			if k != key {
				m[k] = v
			}
		}
		bad = append(bad, struct {
			name   string
			frames [][]byte
		}{"without " + key, [][]byte{[]byte("q"), body(m)}})
	}
	seq0 := map[string]interface{}{}
	for k, v := range good {
		seq0[k] = v
	}
	seq0["seq"] = 0
	bad = append(bad, struct {
		name   string
		frames [][]byte
	}{"seq 0", [][]byte{[]byte("q"), body(seq0)}})
	for _, b := range bad {
		if _, err := parseEvent(b.frames); !errors.Is(err, ErrBadReply) {
			t.Errorf("%s: %v", b.name, err)
		}
	}
}
