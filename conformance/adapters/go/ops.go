package main

// The protocol ops: each made with the Client method opTable names for it
// (ops_gen.go, from protocol/ops/ops.json), its required fields the
// method's leading parameters (generic), but for the few hooks; render
// writes a typed answer back in the op's wire form.

import (
	"context"
	"encoding/hex"
	"reflect"
	"time"

	fenceq "github.com/fenceq/fenceq/clients/go"
)

// opSpec is one op of opTable (ops_gen.go, generated from
// protocol/ops/ops.json by protocol/ops/emit_adapters.py).
type opSpec struct {
	method             string            // the Client method
	required, optional []string          // the op's fields, in declaration order
	entries            map[string]string // field -> the entry kind it holds
	now                bool              // the op carries `now` (WithNow)
}

// hooks are the ops whose call says more than their method and fields: a
// variant method chosen by a field (EnqueueUnique for a key, RenewProgress,
// FailRetryIn, ClaimNextMany, CompleteManyNext), a JobSpec built from the
// job's fields, purge's two forms, suspend's (token, ok) answered as the
// token or false.
var hooks = map[string]parse{
	"enqueue":          enqueue,
	"enqueue_many":     enqueueMany,
	"enqueue_and_wait": enqueueAndWait,
	"renew":            renew,
	"fail":             fail,
	"claim_next":       claimNext,
	"complete_many":    completeMany,
	"purge":            purge,
	"suspend":          suspend,
}

// parser is the op's hook, else generic.
func parser(op string) parse {
	if h, ok := hooks[op]; ok {
		return h
	}
	return generic(op)
}

var clientType = reflect.TypeOf(&fenceq.Client{})

// optionReaders read a method's options parameter from the fields left.
var optionReaders = map[reflect.Type]func(a *args) interface{}{
	reflect.TypeOf(&fenceq.ListOptions{}):     func(a *args) interface{} { return listOptions(a) },
	reflect.TypeOf(fenceq.BulkFilter{}):       func(a *args) interface{} { return filter(a) },
	reflect.TypeOf(fenceq.QueueSettings{}):    func(a *args) interface{} { return queueSettings(a) },
	reflect.TypeOf(fenceq.GroupOverride{}):    func(a *args) interface{} { return groupOverride(a) },
	reflect.TypeOf(&fenceq.ScheduleOptions{}): func(a *args) interface{} { return scheduleOptions(a) },
}

// generic calls the op's method (opTable) with its required fields as the
// leading parameters after ctx, then an options parameter read from the
// fields left, or a plain one from the next optional field (claim_next's
// and await's wait).
func generic(op string) parse {
	return func(a *args) call {
		spec := opTable[op]
		m, ok := clientType.MethodByName(spec.method)
		if !ok {
			a.fail(unsupported("the Go client has no method %s", spec.method))
			return nil
		}
		optional := spec.optional
		var in []reflect.Value
		for i := 2; i < m.Type.NumIn(); i++ { // In(0) is the Client, In(1) the context
			t := m.Type.In(i)
			switch r, isOptions := optionReaders[t]; {
			case i-2 < len(spec.required):
				in = append(in, a.param(spec.required[i-2], t, true, spec.entries))
			case isOptions:
				in = append(in, reflect.ValueOf(r(a)))
			case len(optional) > 0:
				in = append(in, a.param(optional[0], t, false, spec.entries))
				optional = optional[1:]
			default:
				a.fail(unsupported("%s: no field for the parameter %d of %s", op, i-1, spec.method))
				return nil
			}
		}
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			out := reflect.ValueOf(c).MethodByName(spec.method).Call(append([]reflect.Value{reflect.ValueOf(ctx)}, in...))
			if err, _ := out[len(out)-1].Interface().(error); err != nil {
				return nil, err
			}
			if len(out) == 3 { // (value, ok, error): claim's fence, or null
				if !out[1].Bool() {
					return nil, nil
				}
				return out[0].Interface(), nil
			}
			return wire(out[0].Interface()), nil
		}
	}
}

// param reads field k as a value of the parameter's type t.
func (a *args) param(k string, t reflect.Type, required bool, entries map[string]string) reflect.Value {
	var v interface{}
	switch t {
	case reflect.TypeOf(""):
		v = a.str(k, required)
	case reflect.TypeOf(int64(0)):
		v, _ = a.integer(k, required, true)
	case reflect.TypeOf(time.Duration(0)):
		v, _ = a.dur(k, required, true)
	case reflect.TypeOf((*string)(nil)):
		a.get(k, required)
		v = a.optStr(k)
	case reflect.TypeOf(fenceq.Payload{}):
		v = a.value(k, required)
	case reflect.TypeOf([]string(nil)):
		v = a.strs(k, required)
	case reflect.TypeOf([]fenceq.LeaseItem(nil)):
		v = a.items(entries[k] == "complete_item")
	default:
		a.fail(unsupported("%s: the adapter reads no %v", k, t))
		return reflect.Zero(t)
	}
	return reflect.ValueOf(v)
}

func renew(a *args) call {
	if !a.has("progress") {
		return generic("renew")(a)
	}
	id, owner, fence := a.lease()
	ttl, _ := a.dur("ttl", true, true)
	p := a.str("progress", true)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.RenewProgress(ctx, id, owner, fence, ttl, p))
	}
}

func enqueue(a *args) call {
	j := a.spec()
	if j.Key != "" {
		return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
			return render(c.EnqueueUnique(ctx, j))
		}
	}
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) { return render(c.Enqueue(ctx, j)) }
}

func claimNext(a *args) call {
	if !a.has("max") {
		return generic("claim_next")(a)
	}
	q, owner := a.str("queue", true), a.str("owner", true)
	ttl, _ := a.dur("ttl", true, true)
	wait, _ := a.dur("wait", false, true)
	max, _ := a.integer("max", true, true)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.ClaimNextMany(ctx, q, owner, ttl, int(max), wait))
	}
}

func fail(a *args) call {
	if !a.has("retry_in") {
		return generic("fail")(a)
	}
	id, owner, fence := a.lease()
	text := a.str("error", true)
	in, _ := a.dur("retry_in", true, true)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.FailRetryIn(ctx, id, owner, fence, text, in))
	}
}

// suspend: Suspend answers (token, ok); the wire's answer is the token, or
// false. An on_timeout "retry" is the method's default, which it leaves
// out (as the daemon's default is the same); "" is unsupported.
func suspend(a *args) call {
	id, owner, fence := a.lease()
	timeout, _ := a.dur("timeout", true, true)
	onTimeout := a.str("on_timeout", false)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		token, ok, err := c.Suspend(ctx, id, owner, fence, timeout, onTimeout)
		if err != nil {
			return nil, err
		}
		if !ok {
			return false, nil
		}
		return token, nil
	}
}

func listOptions(a *args) *fenceq.ListOptions {
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
	return o
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
	if !a.has("next") {
		return generic("complete_many")(a)
	}
	items := a.items(true)
	v, _ := a.get("next", false)
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

func queueSettings(a *args) fenceq.QueueSettings {
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
	return s
}

// keep reads a retention: nil on the wire removes it (KeepForever).
func keep(a *args, k string) *time.Duration {
	if v, ok := a.m[k]; ok && v == nil {
		a.used[k] = true
		return fenceq.Ptr(fenceq.KeepForever)
	}
	return a.optDur(k)
}

// groupOverride reads group_config's settings: nil on the wire removes an
// override (Inherit, InheritPer), a field left out keeps it (a nil pointer).
func groupOverride(a *args) fenceq.GroupOverride {
	inherits := func(k string) bool {
		v, ok := a.m[k]
		if ok && v == nil {
			a.used[k] = true
		}
		return ok && v == nil
	}
	var o fenceq.GroupOverride
	for _, e := range []struct {
		k string
		p **int
	}{{"max_leased", &o.MaxLeased}, {"rate", &o.Rate}} {
		if inherits(e.k) {
			*e.p = fenceq.Ptr(fenceq.Inherit)
		} else {
			*e.p = a.optInt(e.k)
		}
	}
	if inherits("per") {
		o.Per = fenceq.Ptr(fenceq.InheritPer)
	} else {
		o.Per = a.optDur("per")
	}
	return o
}

func enqueueAndWait(a *args) call {
	j := a.spec()
	wait, _ := a.dur("wait", false, true)
	return func(ctx context.Context, c *fenceq.Client) (interface{}, error) {
		return render(c.EnqueueAndWait(ctx, j, wait))
	}
}

func scheduleOptions(a *args) *fenceq.ScheduleOptions {
	o := &fenceq.ScheduleOptions{TZ: a.str("tz", false), Queue: a.str("queue", false), Payload: a.payload("payload")}
	p, _ := a.integer("priority", false, true)
	m, _ := a.integer("max_attempts", false, false)
	o.Priority, o.MaxAttempts = int(p), int(m)
	return o
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
	if j.Steps != nil {
		steps := make(map[string]interface{}, len(j.Steps))
		for name, v := range j.Steps {
			steps[name] = payload(v)
		}
		m["steps"] = steps
	}
	if j.Signal != nil {
		m["signal"] = payload(*j.Signal)
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
