package fenceq

// The vectors' client pass: on a fresh daemon, every step whose request is
// exactly what a typed method sends goes through that method; the others go
// as raw bytes, to keep the daemon's state in step. "Exactly": the method
// is first called with a hook that stops it before sending and records the
// request it built, and that request must equal the step's (its rid aside):
// the same keys in the same order, each value of the same msgpack kind
// (`now` aside, which the client always sends as a float and a vector may
// carry as an int of the same value). Then the method is called for real,
// and its typed answer, turned back into the wire's shape, must equal the
// step's reply (or its error the step's code).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

var errDryRun = errors.New("dry run: not sent")

// args reads a step's request fields as a method's arguments; bad is set
// when a value has a type the method's parameter cannot carry.
type args struct {
	f    fields
	used map[string]bool
	bad  bool
}

func (a *args) get(k string) (interface{}, bool) {
	a.used[k] = true
	return a.f.get(k)
}

func (a *args) has(k string) bool { _, ok := a.f.get(k); return ok }

// unread reports whether the request has a field no parameter took.
func (a *args) unread() bool {
	for _, e := range a.f {
		if !a.used[e.key] {
			return true
		}
	}
	return false
}

func (a *args) str(k string) string {
	v, _ := a.get(k)
	s, ok := v.(string)
	if !ok && v != nil {
		a.bad = true
	}
	return s
}

func (a *args) optStr(k string) *string {
	v, _ := a.get(k)
	s, ok := asOptString(v)
	if !ok {
		a.bad = true
	}
	return s
}

func (a *args) integer(k string) int64 {
	v, _ := a.get(k)
	i, ok := v.(int64)
	if !ok && v != nil {
		a.bad = true
	}
	return i
}

func (a *args) optInt(k string) *int {
	if !a.has(k) {
		return nil
	}
	i := int(a.integer(k))
	return &i
}

// overrideInt reads a GroupOverride limit: nil on the wire is Inherit.
func (a *args) overrideInt(k string) *int {
	if v, ok := a.f.get(k); ok && v == nil {
		a.used[k] = true
		return Ptr(Inherit)
	}
	return a.optInt(k)
}

func toDuration(v interface{}) (time.Duration, bool) {
	switch x := v.(type) {
	case int64:
		return time.Duration(x) * time.Second, x >= -9e9 && x <= 9e9
	case float64:
		if x != x || x > 9e9 || x < -9e9 {
			return 0, false
		}
		return time.Duration(x*1e9 + 0.5*sign(x)), true
	}
	return 0, false
}

func sign(x float64) float64 {
	if x < 0 {
		return -1
	}
	return 1
}

func (a *args) dur(k string) time.Duration {
	v, _ := a.get(k)
	d, ok := toDuration(v)
	if !ok && v != nil {
		a.bad = true
	}
	return d
}

func (a *args) optDur(k string) *time.Duration {
	if !a.has(k) {
		return nil
	}
	if v, _ := a.get(k); v == nil {
		return Ptr(KeepForever)
	}
	d := a.dur(k)
	return &d
}

func (a *args) strs(k string) []string {
	v, ok := a.get(k)
	if !ok {
		return nil
	}
	s, ok := asStrings(v)
	if !ok {
		a.bad = true
	}
	return s
}

func (a *args) headers(k string) map[string]string {
	v, ok := a.get(k)
	if !ok {
		return nil
	}
	f, isMap := v.(fields)
	if !isMap {
		a.bad = true
		return nil
	}
	h := map[string]string{}
	for _, e := range f {
		s, ok := e.val.(string)
		if !ok {
			a.bad = true
		}
		h[e.key] = s
	}
	return h
}

func (a *args) payload(k string) Payload {
	v, _ := a.get(k)
	p, ok := payloadOf(v)
	if !ok {
		a.bad = true
	}
	return p
}

// spec reads an enqueue's (or an entry's) fields as a JobSpec.
func (a *args) spec() JobSpec {
	return JobSpec{ID: a.str("id"), Queue: a.str("queue"), Payload: a.payload("payload"),
		Priority: int(a.integer("priority")), Delay: a.dur("delay"), MaxAttempts: a.optInt("max_attempts"),
		Key: a.str("key"), UniqueFor: a.dur("unique_for"), OnConflict: a.str("on_conflict"),
		Group: a.str("group"), After: a.strs("after"), AfterFailure: a.str("after_failure"),
		MaxRuntime: a.dur("max_runtime"), Headers: a.headers("headers"), Deadline: a.instant("deadline")}
}

// instant reads Unix seconds as a time.Time (absent: the zero Time). A
// deadline of 0 comes back as time.Unix(0, 0), which the method sends as a
// float: an int 0 then differs from what it sends, and goes raw.
func (a *args) instant(k string) time.Time {
	v, ok := a.get(k)
	if !ok {
		return time.Time{}
	}
	f, isNum := asNumber(v)
	if !isNum || f != f || f > 1e15 || f < -1e15 {
		a.bad = true
		return time.Time{}
	}
	sec := math.Floor(f)
	return time.Unix(int64(sec), int64(math.Round((f-sec)*1e9)))
}

// sub reads a nested map (an entry of a batch) with the same rules.
func (a *args) sub(v interface{}) *args {
	f, ok := v.(fields)
	if !ok {
		a.bad = true
		f = fields{}
	}
	return &args{f: f, used: map[string]bool{}}
}

func (a *args) entries(k string) []*args {
	v, _ := a.get(k)
	arr, ok := v.([]interface{})
	if !ok {
		a.bad = true
		return nil
	}
	out := make([]*args, len(arr))
	for i, e := range arr {
		out[i] = a.sub(e)
	}
	return out
}

func (a *args) lease() (string, string, int64) {
	return a.str("id"), a.str("owner"), a.integer("fence")
}

func (a *args) leaseItems(k string) []LeaseItem {
	var items []LeaseItem
	for _, e := range a.entries(k) {
		id, owner, fence := e.lease()
		it := LeaseItem{ID: id, Owner: owner, Fence: fence, Result: e.optStr("result"), Progress: e.optStr("progress")}
		a.bad = a.bad || e.bad || e.unread()
		items = append(items, it)
	}
	return items
}

// call is a typed method bound to its arguments; it answers the result in
// the wire's shape.
type call func(ctx context.Context, c *Client) (interface{}, error)

// typedCall maps a request onto its method; nil when none takes it.
func typedCall(req fields) call {
	op, _ := req.get("op")
	a := &args{f: req, used: map[string]bool{"op": true, "rid": true, "now": true}}
	name, _ := op.(string)
	var fn call
	switch name {
	case "ping", "enqueue", "state", "claim", "renew", "complete", "release", "claim_next",
		"complete_next", "fail", "snooze", "step_save", "suspend", "signal", "check", "retry", "cancel":
		fn = leaseOps(name, a)
	case "enqueue_many", "complete_many", "renew_many", "job", "list", "stats", "metrics", "results":
		fn = batchOps(name, a)
	default:
		fn = adminOps(name, a)
	}
	if rid, ok := req.get("rid"); ok {
		switch rid.(type) {
		case nil, int64, string:
		default:
			return nil // the client sends its own rid: a bad one must go raw
		}
	}
	if fn == nil || a.bad || a.unread() {
		return nil
	}
	return fn
}

func leaseOps(op string, a *args) call {
	switch op {
	case "ping":
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.Ping(ctx)) }
	case "enqueue":
		j := a.spec()
		if j.Key != "" {
			return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.EnqueueUnique(ctx, j)) }
		}
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.Enqueue(ctx, j)) }
	case "state":
		id := a.str("id")
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.State(ctx, id)) }
	case "claim":
		id, owner, ttl := a.str("id"), a.str("owner"), a.dur("ttl")
		return func(ctx context.Context, c *Client) (interface{}, error) {
			fence, ok, err := c.Claim(ctx, id, owner, ttl)
			if !ok {
				return nil, err
			}
			return fence, err
		}
	case "renew":
		id, owner, fence := a.lease()
		ttl := a.dur("ttl")
		if a.has("progress") {
			p := a.str("progress")
			return func(ctx context.Context, c *Client) (interface{}, error) {
				return wireOf(c.RenewProgress(ctx, id, owner, fence, ttl, p))
			}
		}
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.Renew(ctx, id, owner, fence, ttl))
		}
	case "complete":
		id, owner, fence := a.lease()
		if !a.has("result") {
			return nil
		}
		r := a.optStr("result")
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.Complete(ctx, id, owner, fence, r))
		}
	case "release", "check":
		id, owner, fence := a.lease()
		if op == "check" {
			return func(ctx context.Context, c *Client) (interface{}, error) {
				return wireOf(c.Check(ctx, id, owner, fence))
			}
		}
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.Release(ctx, id, owner, fence))
		}
	}
	return queueOps(op, a)
}

func queueOps(op string, a *args) call {
	switch op {
	case "claim_next":
		q, owner, ttl, wait := a.str("queue"), a.str("owner"), a.dur("ttl"), a.dur("wait")
		if a.has("max") {
			max := int(a.integer("max"))
			return func(ctx context.Context, c *Client) (interface{}, error) {
				return wireOf(c.ClaimNextMany(ctx, q, owner, ttl, max, wait))
			}
		}
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.ClaimNext(ctx, q, owner, ttl, wait))
		}
	case "complete_next":
		id, owner, fence := a.lease()
		r, q, ttl := a.optStr("result"), a.str("queue"), a.dur("ttl")
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.CompleteAndClaimNext(ctx, id, owner, fence, r, q, ttl))
		}
	case "fail":
		id, owner, fence := a.lease()
		e := a.str("error")
		if a.has("retry_in") {
			in := a.dur("retry_in")
			return func(ctx context.Context, c *Client) (interface{}, error) {
				return wireOf(c.FailRetryIn(ctx, id, owner, fence, e, in))
			}
		}
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.Fail(ctx, id, owner, fence, e))
		}
	case "snooze":
		id, owner, fence := a.lease()
		if !a.has("delay") {
			return nil
		}
		delay := a.dur("delay")
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.Snooze(ctx, id, owner, fence, delay))
		}
	case "step_save":
		id, owner, fence := a.lease()
		if !a.has("step") || !a.has("value") {
			return nil // StepSave always sends both
		}
		step, value := a.str("step"), a.payload("value")
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.StepSave(ctx, id, owner, fence, step, value))
		}
	case "suspend":
		id, owner, fence := a.lease()
		if !a.has("timeout") {
			return nil // Suspend always sends its timeout
		}
		// An on_timeout "retry" (or "") Suspend leaves out: the dry run sees it.
		timeout, onTimeout := a.dur("timeout"), a.str("on_timeout")
		return func(ctx context.Context, c *Client) (interface{}, error) {
			token, ok, err := c.Suspend(ctx, id, owner, fence, timeout, onTimeout)
			if err != nil {
				return nil, err
			}
			if !ok {
				return false, nil
			}
			return token, nil
		}
	case "signal":
		// A nil value Signal leaves out (the same on the daemon): the dry run sees it.
		token, value := a.str("token"), a.payload("value")
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.Signal(ctx, token, value))
		}
	case "retry", "cancel":
		id := a.str("id")
		if op == "retry" {
			return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.Retry(ctx, id)) }
		}
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.Cancel(ctx, id)) }
	}
	return nil
}

func batchOps(op string, a *args) call {
	switch op {
	case "enqueue_many":
		var jobs []JobSpec
		for _, e := range a.entries("jobs") {
			jobs = append(jobs, e.spec())
			a.bad = a.bad || e.bad || e.unread()
		}
		return func(ctx context.Context, c *Client) (interface{}, error) {
			out, err := c.EnqueueManyUnique(ctx, jobs)
			if err != nil {
				return nil, err
			}
			wire := make([]interface{}, len(out))
			for i, e := range out {
				if jobs[i].Key != "" {
					wire[i] = map[string]interface{}{"id": e.ID, "created": e.Created}
				} else {
					wire[i] = e.Created
				}
			}
			return wire, nil
		}
	case "complete_many":
		items := a.leaseItems("items")
		for _, e := range a.f {
			if e.key == "items" {
				for _, it := range e.val.([]interface{}) {
					if f, ok := it.(fields); ok {
						if _, has := f.get("result"); !has {
							a.bad = true // the method always sends a result
						}
					}
				}
			}
		}
		if !a.has("next") {
			return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.CompleteMany(ctx, items)) }
		}
		v, _ := a.get("next")
		n := a.sub(v)
		next := NextClaim{Queue: n.str("queue"), TTL: n.dur("ttl"), Max: int(n.integer("max"))}
		a.bad = a.bad || n.bad || n.unread()
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.CompleteManyNext(ctx, items, next))
		}
	case "renew_many":
		items := a.leaseItems("items")
		if !a.has("ttl") {
			return nil
		}
		ttl := a.dur("ttl")
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.RenewMany(ctx, items, ttl)) }
	}
	return readOps(op, a)
}

func readOps(op string, a *args) call {
	switch op {
	case "job":
		id := a.str("id")
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.Job(ctx, id)) }
	case "list":
		o := &ListOptions{Queue: a.str("queue"), State: a.str("state"), Limit: int(a.integer("limit")),
			After: a.str("after"), Order: a.str("order"), Prefix: a.str("prefix"), Key: a.str("key"), Group: a.str("group")}
		if v, ok := a.get("after_created"); ok {
			f, isNum := asNumber(v)
			a.bad = a.bad || !isNum
			o.AfterCreated = &f
		}
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.List(ctx, o)) }
	case "stats":
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.Stats(ctx)) }
	case "metrics":
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.Metrics(ctx)) }
	case "results":
		ids := a.strs("ids")
		if ids == nil {
			a.bad = true
		}
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.Results(ctx, ids)) }
	}
	return nil
}

func adminOps(op string, a *args) call {
	switch op {
	case "purge":
		if a.has("state") || a.has("prefix") || a.has("group") || a.has("limit") {
			p := PurgeFilter{Queue: a.str("queue"), OlderThan: a.dur("older_than"), BulkFilter: BulkFilter{
				State: a.str("state"), Prefix: a.str("prefix"), Group: a.str("group"), Limit: int(a.integer("limit"))}}
			return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.PurgeMany(ctx, p)) }
		}
		if !a.has("older_than") {
			return nil
		}
		older, q := a.dur("older_than"), a.str("queue")
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.Purge(ctx, older, q)) }
	case "retry_many", "cancel_many":
		if !a.has("queue") {
			return nil
		}
		q := a.str("queue")
		b := BulkFilter{State: a.str("state"), Prefix: a.str("prefix"), Group: a.str("group"), Limit: int(a.integer("limit"))}
		if op == "retry_many" {
			return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.RetryMany(ctx, q, b)) }
		}
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.CancelMany(ctx, q, b)) }
	case "queue_config":
		q := a.str("queue")
		s := QueueSettings{MaxLeased: a.optInt("max_leased"), Rate: a.optInt("rate"), Per: a.optDur("per"),
			GroupMaxLeased: a.optInt("group_max_leased"), GroupRate: a.optInt("group_rate"),
			GroupPer: a.optDur("group_per"), KeepDone: a.optDur("keep_done"), KeepDead: a.optDur("keep_dead"),
			KeepCancelled: a.optDur("keep_cancelled")}
		if v, ok := a.get("paused"); ok {
			b, isBool := v.(bool)
			a.bad = a.bad || !isBool
			s.Paused = &b
		}
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.QueueConfig(ctx, q, s)) }
	case "group_config":
		q, g := a.str("queue"), a.str("group")
		o := GroupOverride{MaxLeased: a.overrideInt("max_leased"), Rate: a.overrideInt("rate"), Per: a.optDur("per")}
		if o.Per != nil && *o.Per == KeepForever {
			o.Per = Ptr(InheritPer) // nil on the wire
		}
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.GroupConfig(ctx, q, g, o)) }
	}
	return policyOps(op, a)
}

func policyOps(op string, a *args) call {
	switch op {
	case "await":
		if !a.has("wait") {
			return nil // the method always sends its wait
		}
		id, wait := a.str("id"), a.dur("wait")
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.AwaitJob(ctx, id, wait)) }
	case "enqueue_and_wait":
		j := a.spec()
		if !a.has("wait") {
			return nil
		}
		wait := a.dur("wait")
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.EnqueueAndWait(ctx, j, wait))
		}
	case "schedule_set":
		name, cron := a.str("name"), a.str("cron")
		o := &ScheduleOptions{TZ: a.str("tz"), Queue: a.str("queue"), Payload: a.payload("payload"),
			Priority: int(a.integer("priority")), MaxAttempts: int(a.integer("max_attempts"))}
		return func(ctx context.Context, c *Client) (interface{}, error) {
			return wireOf(c.ScheduleSet(ctx, name, cron, o))
		}
	case "schedule_delete":
		name := a.str("name")
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.ScheduleDelete(ctx, name)) }
	case "schedule_list":
		return func(ctx context.Context, c *Client) (interface{}, error) { return wireOf(c.ScheduleList(ctx)) }
	case "snooze", "retry", "cancel":
		return queueOps(op, a)
	}
	return nil
}

// wireOf turns a typed answer back into the wire's shape, once its typed
// fields were checked against the maps they were read from.
func wireOf[T any](v T, err error) (interface{}, error) {
	if err != nil {
		return nil, err
	}
	if err := checkRecords(v); err != nil {
		return nil, fmt.Errorf("typed fields disagree with the reply: %w", err)
	}
	return toWire(v), nil
}

func toWire(v interface{}) interface{} {
	switch x := v.(type) {
	case []string, map[string]string:
		return plainOf(reflect.ValueOf(x))
	case []bool:
		out := make([]interface{}, len(x))
		for i, b := range x {
			out[i] = b
		}
		return out
	case *ClaimedJob:
		if x == nil {
			return nil
		}
		return claimedWire(*x)
	case []ClaimedJob:
		return claimedList(x)
	case CompletedNext:
		return map[string]interface{}{"completed": x.Completed, "next": toWire(x.Next)}
	case CompletedMany:
		return map[string]interface{}{"completed": toWire(x.Completed), "next": claimedList(x.Next)}
	case Enqueued:
		return map[string]interface{}{"id": x.ID, "created": x.Created}
	case BulkResult:
		return map[string]interface{}{"count": x.Count, "more": x.More}
	case map[string]*JobResult:
		out := map[string]interface{}{}
		for id, r := range x {
			if r == nil {
				out[id] = nil
			} else {
				out[id] = map[string]interface{}{"state": r.State, "result": optWire(r.Result)}
			}
		}
		return out
	}
	return recordWire(v)
}

// recordWire: a record's map as the daemon sent it (each typed field is
// checked against it by checkTyped).
func recordWire(v interface{}) interface{} {
	switch x := v.(type) {
	case *JobRecord:
		if x == nil {
			return nil
		}
		return x.Fields
	case []JobRecord:
		out := make([]interface{}, len(x))
		for i := range x {
			out[i] = x[i].Fields
		}
		return out
	case *LeaseState:
		if x == nil {
			return nil
		}
		return x.Fields
	case *PingInfo:
		return x.Fields
	case *Stats:
		return x.Fields
	case []Schedule:
		out := make([]interface{}, len(x))
		for i := range x {
			out[i] = x[i].Fields
		}
		return out
	}
	return v
}

func optWire(s *string) interface{} {
	if s == nil {
		return nil
	}
	return *s
}

func claimedWire(j ClaimedJob) map[string]interface{} {
	m := map[string]interface{}{"id": j.ID, "fence": j.Fence, "payload": j.Payload.wire(), "attempts": j.Attempts}
	if j.After != nil {
		m["after"] = toWire(j.After)
	}
	if j.Headers != nil {
		m["headers"] = toWire(j.Headers)
	}
	if j.Steps != nil {
		m["steps"] = plainOf(reflect.ValueOf(j.Steps))
	}
	if j.Signal != nil {
		m["signal"] = j.Signal.wire()
	}
	return m
}

func claimedList(js []ClaimedJob) []interface{} {
	out := make([]interface{}, len(js))
	for i, j := range js {
		out[i] = claimedWire(j)
	}
	return out
}

// checkTyped checks every `wire`-tagged field of a typed record against the
// map it was read from: equal when the key is there, zero when it is not.
func checkTyped(where string, v reflect.Value, wire map[string]interface{}) error {
	if v.Kind() == reflect.Ptr {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	for i := 0; i < v.NumField(); i++ {
		key := v.Type().Field(i).Tag.Get("wire")
		if key == "" {
			continue
		}
		fv := v.Field(i)
		w, present := wire[key]
		if err := checkField(where+"."+key, fv, w, present); err != nil {
			return err
		}
	}
	return nil
}

func checkField(where string, fv reflect.Value, w interface{}, present bool) error {
	if fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeOf(Payload{}) {
		m, _ := w.(map[string]interface{})
		return checkTyped(where, fv, m)
	}
	if fv.Kind() == reflect.Ptr && fv.Type().Elem().Kind() == reflect.Struct && fv.Type().Elem() != reflect.TypeOf(Payload{}) {
		m, isMap := w.(map[string]interface{})
		if fv.IsNil() != !(present && isMap) {
			return fmt.Errorf("%s: typed %v, wire %v (present %v)", where, fv.Interface(), w, present)
		}
		return checkTyped(where, fv, m)
	}
	if fv.Kind() == reflect.Map && fv.Type().Elem().Kind() == reflect.Struct && fv.Type().Elem() != reflect.TypeOf(Payload{}) {
		m, _ := w.(map[string]interface{})
		for _, k := range fv.MapKeys() {
			sub, _ := m[k.String()].(map[string]interface{})
			if err := checkTyped(where+"."+k.String(), fv.MapIndex(k), sub); err != nil {
				return err
			}
		}
		return nil
	}
	typed := plainOf(fv)
	if !present {
		if !fv.IsZero() {
			return fmt.Errorf("%s: typed %v, absent from the wire", where, typed)
		}
		return nil
	}
	if !same(w, typed, false) && !(w == nil && fv.IsZero()) {
		return fmt.Errorf("%s: typed %v, wire %v", where, typed, w)
	}
	return nil
}

// plainOf is a typed field's value as decoded msgpack would hold it.
func plainOf(fv reflect.Value) interface{} {
	if fv.Kind() == reflect.Ptr {
		if fv.IsNil() {
			return nil
		}
		fv = fv.Elem()
	}
	switch x := fv.Interface().(type) {
	case Payload:
		return x.wire()
	case []string:
		if x == nil {
			return nil
		}
		out := make([]interface{}, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case map[string]string:
		out := map[string]interface{}{}
		for k, s := range x {
			out[k] = s
		}
		return out
	case map[string]int64:
		out := map[string]interface{}{}
		for k, n := range x {
			out[k] = n
		}
		return out
	case map[string]Payload:
		if x == nil {
			return nil
		}
		out := map[string]interface{}{}
		for k, p := range x {
			out[k] = p.wire()
		}
		return out
	}
	return fv.Interface()
}

// checkRecords runs checkTyped over whatever records an answer holds.
func checkRecords(v interface{}) error {
	switch x := v.(type) {
	case *JobRecord:
		if x != nil {
			return checkTyped("record", reflect.ValueOf(x), x.Fields)
		}
	case []JobRecord:
		for i := range x {
			if err := checkTyped("row", reflect.ValueOf(&x[i]), x[i].Fields); err != nil {
				return err
			}
		}
	case *LeaseState:
		if x != nil {
			return checkTyped("state", reflect.ValueOf(x), x.Fields)
		}
	case *Stats:
		return checkTyped("stats", reflect.ValueOf(x), x.Fields)
	case *PingInfo:
		return checkTyped("ping", reflect.ValueOf(x), x.Fields)
	case []Schedule:
		for i := range x {
			if err := checkTyped("schedule", reflect.ValueOf(&x[i]), x[i].Fields); err != nil {
				return err
			}
		}
	}
	return nil
}

// dryRun answers the request the call would send (op first, rid left out),
// as an ordered tree; or the client's own refusal, made before sending.
func dryRun(fn call, c *Client, ctx context.Context) (interface{}, error) {
	var sent fields
	hook := sendHook(func(request fields) error { sent = request; return errDryRun })
	_, err := fn(context.WithValue(ctx, sendHookKey{}, hook), c)
	if !errors.Is(err, errDryRun) {
		return nil, err
	}
	packed, err := encodeRequest(sent)
	if err != nil {
		return nil, err
	}
	return decodeOrdered(packed)
}

func withoutRid(f fields) fields {
	out := fields{}
	for _, e := range f {
		if e.key != "rid" {
			out = append(out, e)
		}
	}
	return out
}

// stepContext is the context a typed call of the step runs with: its now.
func stepContext(req fields) (context.Context, bool) {
	v, ok := req.get("now")
	if !ok {
		return context.Background(), true
	}
	n, isNum := asNumber(v)
	if !isNum {
		return nil, false
	}
	return WithNow(context.Background(), n), true
}

// clientRoute is how the client pass sends a step: through fn, or raw (nil).
func clientRoute(t *testing.T, c *Client, step vectorStep) (call, context.Context, string) {
	decoded, err := decodeOrdered(step.requestBytes(t))
	req, isMap := decoded.(fields)
	if err != nil || !isMap {
		return nil, nil, "not a msgpack map"
	}
	if op, _ := req.get("op"); op == nil {
		return nil, nil, "no op"
	}
	fn := typedCall(req)
	if fn == nil {
		return nil, nil, "no method takes these fields"
	}
	ctx, ok := stepContext(req)
	if !ok {
		return nil, nil, "now is not a number"
	}
	sent, err := dryRun(fn, c, ctx)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) && fe.NotSent {
			return fn, ctx, "" // the client refuses it itself: the step's code must be its
		}
		return nil, nil, "dry run: " + err.Error()
	}
	var want interface{} = withoutRid(req)
	if op, _ := req.get("op"); op == "list" {
		// The listing suite's steps put list's keys in no one order (one
		// has limit before after, another after before limit), so list is
		// compared by its keys and values; the client sends the C++
		// encoder's order (queue, state, limit, after, order,
		// after_created, prefix, key, group).
		sent = unordered(sent.(fields))
	}
	if !sameOrdered(sent, want, "") {
		return nil, nil, fmt.Sprintf("the method sends %v", sent)
	}
	return fn, ctx, ""
}

func TestVectorClient(t *testing.T) {
	type rawStep struct{ name, why string }
	typed, rawOK, rawErr := 0, []rawStep{}, 0
	for _, suite := range loadSuites(t) {
		suite := suite
		t.Run(strings.TrimSuffix(suite.file, ".json"), func(t *testing.T) {
			d := startDaemon(t, suite.Clock)
			raw := newRawPeer(t, d.endpoint)
			c := d.client(nil)
			for _, step := range suite.Steps {
				where := fmt.Sprintf("%s: step %q", suite.file, step.Name)
				expected := step.expected(t)
				fn, ctx, why := clientRoute(t, c, step)
				if fn == nil {
					reply, err := decodeMsgpack(raw.exchange(step.requestBytes(t)))
					if err != nil || !replyMatches(expected, reply, step.Compare) {
						t.Fatalf("%s (raw): got %v", where, reply)
					}
					if _, isErr := expected["error"]; isErr {
						if os.Getenv("FENCEQ_VECTORS_VERBOSE") != "" {
							t.Logf("raw refusal: %s: %s", where, why)
						}
						rawErr++
					} else if len(step.Request) > 0 {
						rawOK = append(rawOK, rawStep{suite.file + ": " + step.Name, why})
					}
					continue
				}
				typed++
				checkTypedStep(t, where, fn, ctx, c, step, expected)
			}
		})
	}
	t.Logf("client pass: %d steps through typed methods, %d refusals and %d answered steps raw", typed, rawErr, len(rawOK))
	for _, s := range rawOK {
		if !rawAnswered[s.name] {
			t.Errorf("an answered step went raw: %s: %s", s.name, s.why)
		}
	}
	if len(rawOK) != len(rawAnswered) {
		t.Errorf("rawAnswered names %d steps, %d went raw", len(rawAnswered), len(rawOK))
	}
}

// rawAnswered are the answered steps a typed method cannot send as they
// are, and why.
var rawAnswered = map[string]bool{
	// ListOptions sends no Prefix "" (the same as no prefix).
	"listing.json: an empty prefix: every id": true,
	// A request with v, which no method sends.
	"operations.json: v 1 is accepted": true,
	// AwaitJob and EnqueueAndWait always send their wait.
	"policy.json: wait left out is 0":                                                true,
	"policy.json: enqueue_and_wait a new job with wait 0: nil, and the job is there": true,
}

func checkTypedStep(t *testing.T, where string, fn call, ctx context.Context, c *Client, step vectorStep,
	expected map[string]interface{}) {
	t.Helper()
	got, err := fn(ctx, c)
	if ee, isErr := expected["error"].(map[string]interface{}); isErr {
		var fe *Error
		if !errors.As(err, &fe) || fe.Code != ee["code"] || fe.Message == "" {
			t.Fatalf("%s: expected error %v, got %v, %v", where, ee["code"], got, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if want, ok := expected["result"]; !ok || !same(want, got, step.Compare == "subset") {
		t.Fatalf("%s: expected %v, got %v", where, expected["result"], got)
	}
}
