package main

// The protocol ops, each read from its wire fields and made with its Client
// method; render writes a typed answer back in the op's wire form.

import (
	"context"
	"encoding/hex"
	"time"

	fenceq "github.com/fenceq/fenceq/clients/go"
)

var ops = map[string]parse{
	"ping": func(a *args) call {
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.Ping(ctx)) }
	},
	"enqueue": func(a *args) call {
		j := a.spec()
		if j.Key != "" {
			return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
				return render(c.EnqueueUnique(ctx, j))
			}
		}
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.Enqueue(ctx, j)) }
	},
	"state": func(a *args) call {
		id := a.str("id", true)
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.State(ctx, id)) }
	},
	"claim": func(a *args) call {
		id, owner := a.str("id", true), a.str("owner", true)
		ttl, _ := a.dur("ttl", true, true)
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			fence, ok, err := c.Claim(ctx, id, owner, ttl)
			if err != nil || !ok {
				return nil, err
			}
			return fence, nil
		}
	},
	"renew": func(a *args) call {
		id, owner, fence := a.lease()
		ttl, _ := a.dur("ttl", true, true)
		if a.has("progress") {
			p := a.str("progress", true)
			return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
				return render(c.RenewProgress(ctx, id, owner, fence, ttl, p))
			}
		}
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(c.Renew(ctx, id, owner, fence, ttl))
		}
	},
	"complete": func(a *args) call {
		id, owner, fence := a.lease()
		a.get("result", true)
		r := a.optStr("result")
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(c.Complete(ctx, id, owner, fence, r))
		}
	},
	"release": leaseCall(func(ctx context.Context, c *fenceq.Client, id, owner string, fence int64) (bool, error) {
		return c.Release(ctx, id, owner, fence)
	}),
	"check": leaseCall(func(ctx context.Context, c *fenceq.Client, id, owner string, fence int64) (bool, error) {
		return c.Check(ctx, id, owner, fence)
	}),
	"claim_next":    claimNext,
	"complete_next": completeNext,
	"fail":          fail,
	"snooze": func(a *args) call {
		id, owner, fence := a.lease()
		delay, _ := a.dur("delay", true, true)
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(c.Snooze(ctx, id, owner, fence, delay))
		}
	},
	"retry": idCall(func(ctx context.Context, c *fenceq.Client, id string) (interface{}, error) {
		return render(c.Retry(ctx, id))
	}),
	"cancel": idCall(func(ctx context.Context, c *fenceq.Client, id string) (interface{}, error) {
		return render(c.Cancel(ctx, id))
	}),
	"job": idCall(func(ctx context.Context, c *fenceq.Client, id string) (interface{}, error) {
		return render(c.Job(ctx, id))
	}),
	"stats": func(a *args) call {
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.Stats(ctx)) }
	},
	"metrics": func(a *args) call {
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.Metrics(ctx)) }
	},
	"list":             list,
	"purge":            purge,
	"results":          results,
	"enqueue_many":     enqueueMany,
	"complete_many":    completeMany,
	"renew_many":       renewMany,
	"queue_config":     queueConfig,
	"await":            await,
	"enqueue_and_wait": enqueueAndWait,
	"schedule_set":     scheduleSet,
	"schedule_delete": func(a *args) call {
		name := a.str("name", true)
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(c.ScheduleDelete(ctx, name))
		}
	},
	"schedule_list": func(a *args) call {
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.ScheduleList(ctx)) }
	},
	"retry_many":  bulk(false),
	"cancel_many": bulk(true),
}

func leaseCall(m func(ctx context.Context, c *fenceq.Client, id, owner string, fence int64) (bool, error)) parse {
	return func(a *args) call {
		id, owner, fence := a.lease()
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(m(ctx, c, id, owner, fence))
		}
	}
}

func idCall(m func(ctx context.Context, c *fenceq.Client, id string) (interface{}, error)) parse {
	return func(a *args) call {
		id := a.str("id", true)
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return m(ctx, c, id) }
	}
}

func claimNext(a *args) call {
	q, owner := a.str("queue", true), a.str("owner", true)
	ttl, _ := a.dur("ttl", true, true)
	wait, _ := a.dur("wait", false, true)
	if a.has("max") {
		max, _ := a.integer("max", true, true)
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(c.ClaimNextMany(ctx, q, owner, ttl, int(max), wait))
		}
	}
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.ClaimNext(ctx, q, owner, ttl, wait))
	}
}

func completeNext(a *args) call {
	id, owner, fence := a.lease()
	a.get("result", true)
	r := a.optStr("result")
	q := a.str("queue", true)
	ttl, _ := a.dur("ttl", true, true)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.CompleteAndClaimNext(ctx, id, owner, fence, r, q, ttl))
	}
}

func fail(a *args) call {
	id, owner, fence := a.lease()
	text := a.str("error", true)
	if a.has("retry_in") {
		in, _ := a.dur("retry_in", true, true)
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(c.FailRetryIn(ctx, id, owner, fence, text, in))
		}
	}
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.Fail(ctx, id, owner, fence, text))
	}
}

func list(a *args) call {
	o := &fenceq.ListOptions{Queue: a.str("queue", false), State: a.str("state", false),
		After: a.str("after", false), Order: a.str("order", false), Key: a.str("key", false),
		Group: a.str("group", false)}
	limit, _ := a.integer("limit", false, false)
	o.Limit = int(limit)
	if v, ok := a.get("prefix", false); ok {
		o.Prefix, _ = v.(string) // "" is no prefix: every id, as sending none
		if _, isStr := v.(string); !isStr {
			a.fail(unsupported("prefix: the method takes a str, got %v", v))
		}
	}
	if v, ok := a.get("after_created", false); ok {
		f, isNum := number(v)
		if !isNum {
			a.fail(unsupported("after_created: the method takes a number, got %v", v))
		}
		o.AfterCreated = &f
	}
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.List(ctx, o)) }
}

func purge(a *args) call {
	if a.has("state") || a.has("prefix") || a.has("group") || a.has("limit") {
		p := fenceq.PurgeFilter{Queue: a.str("queue", false), BulkFilter: filter(a)}
		p.OlderThan, _ = a.dur("older_than", false, true)
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.PurgeMany(ctx, p)) }
	}
	older, _ := a.dur("older_than", true, true)
	q := a.str("queue", false)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.Purge(ctx, older, q))
	}
}

func filter(a *args) fenceq.BulkFilter {
	b := fenceq.BulkFilter{State: a.str("state", false), Prefix: a.str("prefix", false), Group: a.str("group", false)}
	limit, _ := a.integer("limit", false, false)
	b.Limit = int(limit)
	return b
}

func bulk(cancel bool) parse {
	return func(a *args) call {
		q, b := a.str("queue", true), filter(a)
		if cancel {
			return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
				return render(c.CancelMany(ctx, q, b))
			}
		}
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(c.RetryMany(ctx, q, b))
		}
	}
}

func results(a *args) call {
	ids := a.strs("ids", true)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.Results(ctx, ids)) }
}

func enqueueMany(a *args) call {
	var jobs []fenceq.JobSpec
	for _, e := range a.entries("jobs") {
		jobs = append(jobs, e.spec())
		if err := e.check(); err != nil {
			a.fail(err.(*failure))
		}
	}
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		answers, err := c.EnqueueManyUnique(ctx, jobs)
		if err != nil {
			return nil, err
		}
		out := make([]interface{}, len(answers))
		for i, e := range answers {
			if jobs[i].Key != "" {
				out[i] = map[string]interface{}{"id": e.ID, "created": e.Created}
			} else {
				out[i] = e.Created
			}
		}
		return out, nil
	}
}

func completeMany(a *args) call {
	items := a.items(true)
	v, ok := a.get("next", false)
	if !ok {
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(c.CompleteMany(ctx, items))
		}
	}
	n := newArgs(v)
	max, _ := n.integer("max", true, true)
	next := fenceq.NextClaim{Queue: n.str("queue", true), Max: int(max)}
	next.TTL, _ = n.dur("ttl", true, true)
	if err := n.check(); err != nil {
		a.fail(err.(*failure))
	}
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.CompleteManyNext(ctx, items, next))
	}
}

func renewMany(a *args) call {
	items := a.items(false)
	ttl, _ := a.dur("ttl", true, true)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.RenewMany(ctx, items, ttl))
	}
}

func queueConfig(a *args) call {
	q := a.str("queue", true)
	s := fenceq.QueueSettings{MaxLeased: a.optInt("max_leased"), Rate: a.optInt("rate"), Per: a.optDur("per"),
		GroupMaxLeased: a.optInt("group_max_leased"), GroupRate: a.optInt("group_rate"), GroupPer: a.optDur("group_per")}
	if v, ok := a.get("paused", false); ok {
		b, isBool := v.(bool)
		if !isBool {
			a.fail(unsupported("paused: the method takes a bool, got %v", v))
		}
		s.Paused = &b
	}
	s.KeepDone, s.KeepDead, s.KeepCancelled = keep(a, "keep_done"), keep(a, "keep_dead"), keep(a, "keep_cancelled")
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.QueueConfig(ctx, q, s))
	}
}

// keep reads a retention: nil on the wire removes it (KeepForever).
func keep(a *args, k string) *time.Duration {
	if v, ok := a.m[k]; ok && v == nil {
		a.used[k] = true
		return fenceq.Ptr(fenceq.KeepForever)
	}
	return a.optDur(k)
}

func await(a *args) call {
	id := a.str("id", true)
	wait, _ := a.dur("wait", false, true) // left out: the method's 0
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.AwaitJob(ctx, id, wait))
	}
}

func enqueueAndWait(a *args) call {
	j := a.spec()
	wait, _ := a.dur("wait", false, true)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.EnqueueAndWait(ctx, j, wait))
	}
}

func scheduleSet(a *args) call {
	name, cron := a.str("name", true), a.str("cron", true)
	o := &fenceq.ScheduleOptions{TZ: a.str("tz", false), Queue: a.str("queue", false), Payload: a.payload("payload")}
	p, _ := a.integer("priority", false, true)
	m, _ := a.integer("max_attempts", false, false)
	o.Priority, o.MaxAttempts = int(p), int(m)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.ScheduleSet(ctx, name, cron, o))
	}
}

// render writes a method's typed answer in the op's wire form, for JSON.
func render[T any](v T, err error) (interface{}, error) {
	if err != nil {
		return nil, err
	}
	return wire(v), nil
}

func wire(v interface{}) interface{} {
	switch x := v.(type) {
	case *fenceq.ClaimedJob:
		if x == nil {
			return nil
		}
		return claimed(*x)
	case []fenceq.ClaimedJob:
		out := make([]interface{}, len(x))
		for i, j := range x {
			out[i] = claimed(j)
		}
		return out
	case fenceq.CompletedNext:
		return map[string]interface{}{"completed": x.Completed, "next": wire(x.Next)}
	case fenceq.CompletedMany:
		return map[string]interface{}{"completed": x.Completed, "next": wire(x.Next)}
	case fenceq.Enqueued:
		return map[string]interface{}{"id": x.ID, "created": x.Created}
	case fenceq.BulkResult:
		return map[string]interface{}{"count": x.Count, "more": x.More}
	case map[string]*fenceq.JobResult:
		out := map[string]interface{}{}
		for id, r := range x {
			if r == nil {
				out[id] = nil
			} else {
				out[id] = map[string]interface{}{"state": r.State, "result": r.Result}
			}
		}
		return out
	}
	return records(v)
}

// records: the maps the daemon sent for its records, as JSON.
func records(v interface{}) interface{} {
	switch x := v.(type) {
	case *fenceq.JobRecord:
		if x == nil {
			return nil
		}
		return jsonOf(x.Fields)
	case []fenceq.JobRecord:
		out := make([]interface{}, len(x))
		for i := range x {
			out[i] = jsonOf(x[i].Fields)
		}
		return out
	case *fenceq.LeaseState:
		if x == nil {
			return nil
		}
		return jsonOf(x.Fields)
	case *fenceq.PingInfo:
		return jsonOf(x.Fields)
	case *fenceq.Stats:
		return jsonOf(x.Fields)
	case []fenceq.Schedule:
		out := make([]interface{}, len(x))
		for i := range x {
			out[i] = jsonOf(x[i].Fields)
		}
		return out
	}
	return v
}

func claimed(j fenceq.ClaimedJob) map[string]interface{} {
	m := map[string]interface{}{"id": j.ID, "fence": j.Fence, "payload": payload(j.Payload), "attempts": j.Attempts}
	if j.After != nil {
		m["after"] = j.After
	}
	if j.Headers != nil {
		m["headers"] = j.Headers
	}
	return m
}

func payload(p fenceq.Payload) interface{} {
	switch {
	case p.IsNil():
		return nil
	case p.IsText():
		return p.String()
	}
	return map[string]interface{}{"$bin": hex.EncodeToString(p.Bytes())}
}

// jsonOf turns decoded msgpack into adapter JSON: a bin as {"$bin": hex}.
func jsonOf(v interface{}) interface{} {
	switch x := v.(type) {
	case []byte:
		return map[string]interface{}{"$bin": hex.EncodeToString(x)}
	case map[string]interface{}:
		out := make(map[string]interface{}, len(x))
		for k, e := range x {
			out[k] = jsonOf(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = jsonOf(e)
		}
		return out
	}
	return v
}
