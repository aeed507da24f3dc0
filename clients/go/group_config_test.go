package fenceq

// GroupConfig (group_config, C3.25): one group's own limits against a real
// daemon, the refusals, what stats shows, and the request's three-way
// fields (left out, a value, nil).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// claimAll claims jobs of queue until none is handed out, and counts the
// claimed ones by group (the part of the id before "-"); it answers the
// leases too, by id.
func claimAll(t *testing.T, c *Client, queue string) (map[string]int, map[string]int64) {
	t.Helper()
	count, fences := map[string]int{}, map[string]int64{}
	for i := 0; i < 100; i++ { // bounded
		j := need(c.ClaimNext(bg, queue, "w", time.Minute, 0))(t)
		if j == nil {
			return count, fences
		}
		count[strings.SplitN(j.ID, "-", 2)[0]]++
		fences[j.ID] = j.Fence
	}
	t.Fatalf("claim_next of %s handed out 100 jobs", queue)
	return nil, nil
}

func groupStats(t *testing.T, c *Client, queue string) QueueStats {
	t.Helper()
	s := need(c.Stats(bg))(t)
	return s.Queues[queue]
}

func TestGroupConfigOverridesOneGroup(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	const q = "tenants"
	need(c.QueueConfig(bg, q, QueueSettings{GroupMaxLeased: Ptr(1)}))(t)
	if ok := need(c.GroupConfig(bg, q, "big", GroupOverride{MaxLeased: Ptr(3)}))(t); !ok {
		t.Fatal("group_config answered false")
	}
	var jobs []JobSpec
	for i := 0; i < 5; i++ {
		jobs = append(jobs, JobSpec{ID: fmt.Sprintf("big-%d", i), Queue: q, Group: "big"},
			JobSpec{ID: fmt.Sprintf("small-%d", i), Queue: q, Group: "small"})
	}
	need(c.EnqueueMany(bg, jobs))(t)

	// big has its own cap of 3, small the queue's 1.
	count, leases := claimAll(t, c, q)
	if count["big"] != 3 || count["small"] != 1 {
		t.Fatalf("leased with big's override 3 and the queue's 1: %v", count)
	}
	// A big lease finished makes room for one more big, not more.
	for id, fence := range leases {
		if strings.HasPrefix(id, "big-") {
			need(c.Complete(bg, id, "w", fence, nil))(t)
			delete(leases, id)
			break
		}
	}
	more, newLeases := claimAll(t, c, q)
	if more["big"] != 1 || more["small"] != 0 {
		t.Fatalf("after one big completed: claimed %v", more)
	}
	for id, f := range newLeases {
		leases[id] = f
	}

	// Removed (nil on the wire): big follows the queue's 1 again.
	need(c.GroupConfig(bg, q, "big", GroupOverride{MaxLeased: Ptr(Inherit)}))(t)
	if qs := groupStats(t, c, q); qs.GroupOverrides != 0 || qs.GroupConfig != nil {
		t.Fatalf("stats after the only override was removed: %d %v", qs.GroupOverrides, qs.GroupConfig)
	}
	if more, _ := claimAll(t, c, q); len(more) != 0 {
		t.Fatalf("3 big leased, the cap back at 1: claimed %v", more)
	}
	bigLeft := 0
	for id, fence := range leases {
		if strings.HasPrefix(id, "big-") {
			need(c.Complete(bg, id, "w", fence, nil))(t)
			bigLeft++
		}
	}
	if bigLeft != 3 {
		t.Fatalf("expected 3 big leases, had %d", bigLeft)
	}
	if more, _ := claimAll(t, c, q); more["big"] != 1 || more["small"] != 0 {
		t.Fatalf("no big leased, the queue's cap 1: claimed %v", more)
	}

	// max_leased 0 lifts the cap for small alone: its 4 others at once.
	need(c.GroupConfig(bg, q, "small", GroupOverride{MaxLeased: Ptr(0)}))(t)
	if more, _ := claimAll(t, c, q); more["small"] != 4 || more["big"] != 0 {
		t.Fatalf("small uncapped (max_leased 0), big at the queue's 1: claimed %v", more)
	}
}

func TestGroupConfigRefusesBadInput(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	const q = "bad"
	need(c.GroupConfig(bg, q, "g", GroupOverride{MaxLeased: Ptr(2), Per: Ptr(1500 * time.Millisecond)}))(t)
	before := groupStats(t, c, q)
	if before.GroupOverrides != 1 || fmt.Sprint(overrideOf(before, "g")) != "{max_leased 2, per 1.5}" {
		t.Fatalf("stats before: %d %s", before.GroupOverrides, overrideOf(before, "g"))
	}
	long := strings.Repeat("x", 257)
	for _, tc := range []struct {
		name         string
		queue, group string
		o            GroupOverride
	}{
		{"group empty", q, "", GroupOverride{MaxLeased: Ptr(5)}},
		{"group 257 bytes", q, long, GroupOverride{MaxLeased: Ptr(5)}},
		{"queue empty", "", "g", GroupOverride{MaxLeased: Ptr(5)}},
		{"max_leased -1", q, "g", GroupOverride{MaxLeased: Ptr(-1)}},
		{"max_leased 1e9+1", q, "g", GroupOverride{MaxLeased: Ptr(1_000_000_001)}},
		{"rate 100001", q, "g", GroupOverride{Rate: Ptr(100_001)}},
		{"rate -1", q, "g", GroupOverride{Rate: Ptr(-1)}},
		{"per 0", q, "g", GroupOverride{Per: Ptr(time.Duration(0))}},
		{"per -1 s", q, "g", GroupOverride{Per: Ptr(-time.Second)}},
		{"per 86401 s", q, "g", GroupOverride{Per: Ptr(86401 * time.Second)}},
		// one good field, one bad: nothing applied
		{"max_leased 7 with rate 100001", q, "g", GroupOverride{MaxLeased: Ptr(7), Rate: Ptr(100_001)}},
		{"max_leased removed with per 0", q, "g", GroupOverride{MaxLeased: Ptr(Inherit), Per: Ptr(time.Duration(0))}},
	} {
		ok, err := c.GroupConfig(bg, tc.queue, tc.group, tc.o)
		if ok || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, %v; want invalid_argument", tc.name, ok, err)
		}
	}
	// Wrong types (no typed call can send them): bad_request.
	for _, f := range []Field{{"max_leased", "3"}, {"rate", 1.5}, {"per", true}, {"group", 7}} {
		fs := []Field{{"queue", q}, {"group", "g"}}
		if f.Key == "group" {
			fs = fs[:1]
		}
		if _, err := c.Request(bg, "group_config", append(fs, f)...); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s %v: %v; want bad_request", f.Key, f.Value, err)
		}
	}
	after := groupStats(t, c, q)
	if after.GroupOverrides != 1 || fmt.Sprint(overrideOf(after, "g")) != "{max_leased 2, per 1.5}" || len(after.GroupConfig) != 1 {
		t.Fatalf("refusals changed the overrides: %d %v", after.GroupOverrides, after.GroupConfig)
	}
}

// overrideOf is one group's entry of QueueStats.GroupConfig, readable.
func overrideOf(qs QueueStats, group string) string {
	o, ok := qs.GroupConfig[group]
	if !ok {
		return "none"
	}
	var parts []string
	if o.MaxLeased != nil {
		parts = append(parts, fmt.Sprintf("max_leased %d", *o.MaxLeased))
	}
	if o.Rate != nil {
		parts = append(parts, fmt.Sprintf("rate %d", *o.Rate))
	}
	if o.Per != nil {
		parts = append(parts, fmt.Sprintf("per %g", *o.Per))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func TestGroupConfigInStats(t *testing.T) {
	d := startDaemon(t, "server")
	c := d.client(nil)
	const q = "shown"
	need(c.QueueConfig(bg, q, QueueSettings{GroupMaxLeased: Ptr(1), GroupRate: Ptr(10)}))(t)
	if qs := groupStats(t, c, q); qs.GroupOverrides != 0 || qs.GroupConfig != nil {
		t.Fatalf("no override yet: %d %v", qs.GroupOverrides, qs.GroupConfig)
	}
	need(c.GroupConfig(bg, q, "big", GroupOverride{MaxLeased: Ptr(3)}))(t)
	need(c.GroupConfig(bg, q, "slow", GroupOverride{Rate: Ptr(5), Per: Ptr(2500 * time.Millisecond)}))(t)
	qs := groupStats(t, c, q)
	if qs.GroupOverrides != 2 || len(qs.GroupConfig) != 2 || overrideOf(qs, "big") != "{max_leased 3}" ||
		overrideOf(qs, "slow") != "{rate 5, per 2.5}" {
		t.Fatalf("two overrides: %d %s %s", qs.GroupOverrides, overrideOf(qs, "big"), overrideOf(qs, "slow"))
	}
	if *qs.GroupMaxLeased != 1 || *qs.GroupRate != 10 {
		t.Fatalf("the queue's own group settings changed: %v %v", *qs.GroupMaxLeased, *qs.GroupRate)
	}
	// Left out keeps the stored override; nil removes just that one.
	need(c.GroupConfig(bg, q, "slow", GroupOverride{MaxLeased: Ptr(0)}))(t)
	if s := overrideOf(groupStats(t, c, q), "slow"); s != "{max_leased 0, rate 5, per 2.5}" {
		t.Fatalf("max_leased added, the rest left out: %s", s)
	}
	need(c.GroupConfig(bg, q, "slow", GroupOverride{Per: Ptr(InheritPer), Rate: Ptr(Inherit)}))(t)
	if s := overrideOf(groupStats(t, c, q), "slow"); s != "{max_leased 0}" {
		t.Fatalf("rate and per removed: %s", s)
	}
	need(c.GroupConfig(bg, q, "slow", GroupOverride{}))(t) // nothing sent: nothing changes
	if s := overrideOf(groupStats(t, c, q), "slow"); s != "{max_leased 0}" {
		t.Fatalf("an empty GroupOverride: %s", s)
	}

	// Stored: a restart keeps them.
	d.restart()
	c = d.client(nil)
	if qs := groupStats(t, c, q); qs.GroupOverrides != 2 || overrideOf(qs, "big") != "{max_leased 3}" ||
		overrideOf(qs, "slow") != "{max_leased 0}" {
		t.Fatalf("after a restart: %d %v", qs.GroupOverrides, qs.GroupConfig)
	}

	// All three removed: the group has none.
	need(c.GroupConfig(bg, q, "slow", GroupOverride{MaxLeased: Ptr(Inherit), Rate: Ptr(Inherit), Per: Ptr(InheritPer)}))(t)
	if qs := groupStats(t, c, q); qs.GroupOverrides != 1 || overrideOf(qs, "slow") != "none" {
		t.Fatalf("slow's overrides all removed: %d %v", qs.GroupOverrides, qs.GroupConfig)
	}

	// At most 100 listed, the first by group name; all counted.
	for i := 0; i < 104; i++ {
		need(c.GroupConfig(bg, q, fmt.Sprintf("g%03d", i), GroupOverride{Rate: Ptr(i + 1)}))(t)
	}
	qs = groupStats(t, c, q)
	if qs.GroupOverrides != 105 || len(qs.GroupConfig) != 100 {
		t.Fatalf("105 overrides: counted %d, listed %d", qs.GroupOverrides, len(qs.GroupConfig))
	}
	if overrideOf(qs, "big") != "{max_leased 3}" || overrideOf(qs, "g098") != "{rate 99}" || overrideOf(qs, "g099") != "none" {
		t.Fatalf("the first 100 by name (big, g000..g098): big %s, g098 %s, g099 %s",
			overrideOf(qs, "big"), overrideOf(qs, "g098"), overrideOf(qs, "g099"))
	}
}

// The request: a field left out is not sent, Inherit and InheritPer are
// nil, a value is sent as it is (a negative one too, for the daemon to
// refuse); per in seconds.
func TestGroupConfigRequest(t *testing.T) {
	c, err := NewClient("ipc:///nonexistent/fq.sock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		o    GroupOverride
		want string
	}{
		{GroupOverride{}, "op=group_config queue=q group=g"},
		{GroupOverride{MaxLeased: Ptr(3)}, "op=group_config queue=q group=g max_leased=3"},
		{GroupOverride{MaxLeased: Ptr(0), Rate: Ptr(0)}, "op=group_config queue=q group=g max_leased=0 rate=0"},
		{GroupOverride{MaxLeased: Ptr(-1)}, "op=group_config queue=q group=g max_leased=-1"},
		{GroupOverride{Rate: Ptr(5), Per: Ptr(2 * time.Second)}, "op=group_config queue=q group=g rate=5 per=2"},
		{GroupOverride{Per: Ptr(1500 * time.Millisecond)}, "op=group_config queue=q group=g per=1.5"},
		{GroupOverride{MaxLeased: Ptr(Inherit), Rate: Ptr(Inherit), Per: Ptr(InheritPer)},
			"op=group_config queue=q group=g max_leased=nil rate=nil per=nil"},
	} {
		var sent fields
		ctx := context.WithValue(bg, sendHookKey{}, sendHook(func(f fields) error { sent = f; return errDryRun }))
		if _, err := c.GroupConfig(ctx, "q", "g", tc.o); !errors.Is(err, errDryRun) {
			t.Fatalf("%+v: %v", tc.o, err)
		}
		if got := showFields(sent); got != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.o, got, tc.want)
		}
	}
}

// showFields is a request as key=value pairs, an explicit nil as nil, a
// span of time in seconds.
func showFields(f fields) string {
	parts := make([]string, len(f))
	for i, e := range f {
		v := fmt.Sprint(e.val)
		switch x := e.val.(type) {
		case nilValue:
			v = "nil"
		case seconds:
			v = fmt.Sprint(time.Duration(x).Seconds())
		}
		parts[i] = e.key + "=" + v
	}
	return strings.Join(parts, " ")
}
