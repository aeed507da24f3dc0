package fenceq

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The shared connection (mux.go): calls made at the same time go out on one
// connection, and each gets its own reply, whatever order the replies come
// in; a reply no call waits for is dropped.
func TestSharedConnectionHandsEachReplyToItsCall(t *testing.T) {
	const n = 8
	type held struct {
		envelope [][]byte
		id       string
		rid      interface{}
	}
	heldc := make(chan []held, 1)
	var echoes []held // the router's goroutine alone
	// A stand-in daemon: answers pings at once, holds n echoes.
	endpoint := fakeRouter(t, func(s *zsock, envelope [][]byte, m map[string]interface{}) {
		if m["op"] == "ping" {
			_ = s.send(append(envelope, mustEncode(t, fields{{"ok", true},
				{"result", fields{{"protocol", int64(1)}, {"version", "fake"}, {"clock", "server"}}},
				{"rid", m["rid"]}})), 0)
			return
		}
		id, _ := m["id"].(string)
		echoes = append(echoes, held{envelope, id, m["rid"]})
		if len(echoes) < n {
			return
		}
		// A reply to a rid nobody waits for, then every reply, last first.
		_ = s.send(append(echoes[0].envelope, mustEncode(t, fields{{"ok", true}, {"result", "stray"},
			{"rid", int64(1 << 40)}})), 0)
		for i := n - 1; i >= 0; i-- {
			e := echoes[i]
			_ = s.send(append(e.envelope, mustEncode(t, fields{{"ok", true}, {"result", e.id},
				{"rid", e.rid}})), 0)
		}
		heldc <- echoes
		echoes = nil
	})

	c := need(NewClient(endpoint, &Options{Timeout: 5 * time.Second}))(t)
	defer c.Close()
	need(c.Ping(bg))(t)                // makes the shared socket (this one may go on a pooled one)
	time.Sleep(200 * time.Millisecond) // its connection comes up
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := fmt.Sprintf("call-%d", i)
			v, err := c.Request(bg, "echo", Field{"id", id})
			if err != nil || v != id {
				errs <- fmt.Errorf("%s: got %v, %v", id, v, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := <-heldc
	for _, e := range got[1:] {
		if len(e.envelope) != 1 || !bytes.Equal(e.envelope[0], got[0].envelope[0]) {
			t.Fatalf("the %d calls did not share one connection: envelopes %q and %q", n, got[0].envelope, e.envelope)
		}
	}
}

// A call that gave up on the shared connection leaves nothing behind: its
// late reply is dropped, and the next call gets its own.
func TestSharedConnectionDropsALateReply(t *testing.T) {
	var mu sync.Mutex
	first := true
	endpoint := fakeDaemon(t, func(req map[string]interface{}) []byte {
		mu.Lock()
		slow := first && req["op"] == "echo"
		if slow {
			first = false
		}
		mu.Unlock()
		if slow {
			time.Sleep(300 * time.Millisecond) // past the first call's timeout
		}
		if req["op"] == "ping" {
			return mustEncode(t, fields{{"ok", true}, {"result", fields{{"protocol", int64(1)},
				{"version", "fake"}, {"clock", "server"}}}, {"rid", req["rid"]}})
		}
		return mustEncode(t, fields{{"ok", true}, {"result", req["id"]}, {"rid", req["rid"]}})
	})
	c := need(NewClient(endpoint, &Options{Timeout: 2 * time.Second}))(t)
	defer c.Close()
	need(c.Ping(bg))(t)                // makes the shared socket
	time.Sleep(200 * time.Millisecond) // its connection comes up
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Request(ctx, "echo", Field{"id", "late"}); Code(err) != CodeTimeout {
		t.Fatalf("first call: %v", err)
	}
	v, err := c.Request(bg, "echo", Field{"id", "next"})
	if err != nil || v != "next" {
		t.Fatalf("next call: %v, %v", v, err)
	}
}
