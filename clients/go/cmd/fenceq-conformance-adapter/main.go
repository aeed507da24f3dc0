// Command fenceq-conformance-adapter is the conformance kit's adapter for
// the Go client (protocol/conformance/README.md): it reads one JSON request
// per line on stdin, makes the call with fenceq.Client and prints the
// answer as one JSON line on stdout.
//
// Each protocol op maps to its Client method (ops below); the method's
// typed answer is written back in the op's wire form, a bin as
// {"$bin": hex}. A field the method has no parameter for, or a value it
// never sends as given (an empty queue name, a limit of 0: the Go options
// leave zero values out), is answered `unsupported`, before anything is
// sent; but for the kit's required ops, whose such requests go out through
// Client.Request with the fields as given.
//
//	(cd clients/go && ./offline.sh build -o /tmp/go-adapter ./cmd/fenceq-conformance-adapter)
//	FENCEQD=build/bin/fenceqd /usr/bin/python3 protocol/conformance/run.py --name go --adapter /tmp/go-adapter
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	fenceq "github.com/fenceq/fenceq/clients/go"
)

// failure is an answer with a code of the kit's own: unsupported (this
// client cannot make the call as asked; nothing was sent) or adapter (the
// line could not be read).
type failure struct {
	code, msg string
	zero      bool // a zero value the Go options leave out
}

func (f *failure) Error() string { return f.msg }

func unsupported(format string, a ...interface{}) *failure {
	return &failure{code: "unsupported", msg: fmt.Sprintf(format, a...)}
}

// leftOut: the typed method would leave this value out (zero means "not
// given" in the Go options), so it cannot send the request as asked.
func leftOut(format string, a ...interface{}) *failure {
	return &failure{code: "unsupported", msg: fmt.Sprintf(format, a...), zero: true}
}

func adapterError(format string, a ...interface{}) *failure {
	return &failure{code: "adapter", msg: fmt.Sprintf(format, a...)}
}

// args reads a request's fields; the first problem is kept in err, and
// every field read is marked, so that a field no parameter took is found.
type args struct {
	m    map[string]interface{}
	used map[string]bool
	err  *failure
}

func newArgs(v interface{}) *args {
	m, ok := v.(map[string]interface{})
	a := &args{m: m, used: map[string]bool{}}
	if !ok {
		a.err = unsupported("expected a map, got %v", v)
		a.m = map[string]interface{}{}
	}
	return a
}

func (a *args) fail(f *failure) {
	if a.err == nil {
		a.err = f
	}
}

func (a *args) has(k string) bool { _, ok := a.m[k]; return ok }

// get is the field's value; required fields that are missing are unsupported.
func (a *args) get(k string, required bool) (interface{}, bool) {
	a.used[k] = true
	v, ok := a.m[k]
	if !ok && required {
		a.fail(unsupported("no field %s", k))
	}
	return v, ok
}

// str reads a str field. An optional "" is unsupported: the Go options
// leave an empty string out, which is not what the request asks.
func (a *args) str(k string, required bool) string {
	v, ok := a.get(k, required)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		a.fail(unsupported("%s: the method takes a str, got %v", k, v))
	}
	if s == "" && !required {
		a.fail(leftOut("%s: an empty str is left out by the Go options", k))
	}
	return s
}

func (a *args) optStr(k string) *string {
	v, _ := a.get(k, false)
	if v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		a.fail(unsupported("%s: the method takes a str or nil, got %v", k, v))
	}
	return &s
}

func number(v interface{}) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// integer reads an int field (an integral float too: JSON cannot tell them apart).
func (a *args) integer(k string, required, zeroOK bool) (int64, bool) {
	v, ok := a.get(k, required)
	if !ok {
		return 0, false
	}
	f, isNum := number(v)
	if !isNum || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		a.fail(unsupported("%s: the method takes an int, got %v", k, v))
		return 0, false
	}
	if f == 0 && !zeroOK {
		a.fail(leftOut("%s: 0 is left out by the Go options", k))
	}
	return int64(f), true
}

// dur reads seconds as a time.Duration.
func (a *args) dur(k string, required, zeroOK bool) (time.Duration, bool) {
	v, ok := a.get(k, required)
	if !ok {
		return 0, false
	}
	f, isNum := number(v)
	if !isNum || math.Abs(f) > 9e9 {
		a.fail(unsupported("%s: the method takes seconds as a time.Duration, got %v", k, v))
		return 0, false
	}
	if f == 0 && !zeroOK {
		a.fail(leftOut("%s: 0 is left out by the Go options", k))
	}
	return time.Duration(math.Round(f * 1e9)), true
}

func (a *args) optInt(k string) *int {
	if !a.has(k) {
		a.used[k] = true
		return nil
	}
	i, _ := a.integer(k, true, true)
	n := int(i)
	return &n
}

func (a *args) optDur(k string) *time.Duration {
	if !a.has(k) {
		a.used[k] = true
		return nil
	}
	d, _ := a.dur(k, true, true)
	return &d
}

func (a *args) payload(k string) fenceq.Payload {
	v, ok := a.get(k, false)
	if !ok || v == nil {
		if ok {
			a.fail(leftOut("%s: an explicit nil is left out by the Go options", k))
		}
		return fenceq.Payload{}
	}
	switch x := v.(type) {
	case string:
		return fenceq.Text(x)
	case map[string]interface{}:
		if h, isStr := x["$bin"].(string); isStr && len(x) == 1 {
			b, err := hex.DecodeString(h)
			if err != nil {
				a.fail(adapterError("%s: bad $bin: %v", k, err))
			}
			return fenceq.Bytes(b)
		}
	}
	a.fail(unsupported("%s: a payload is str or bin, got %v", k, v))
	return fenceq.Payload{}
}

func (a *args) strs(k string, required bool) []string {
	v, ok := a.get(k, required)
	if !ok {
		return nil
	}
	list, isList := v.([]interface{})
	out := make([]string, len(list))
	for i, e := range list {
		s, isStr := e.(string)
		if !isStr {
			isList = false
		}
		out[i] = s
	}
	if !isList {
		a.fail(unsupported("%s: the method takes a list of str, got %v", k, v))
	}
	return out
}

func (a *args) headers(k string) map[string]string {
	v, ok := a.get(k, false)
	if !ok {
		return nil
	}
	m, isMap := v.(map[string]interface{})
	out := map[string]string{}
	for key, e := range m {
		s, isStr := e.(string)
		if !isStr {
			isMap = false
		}
		out[key] = s
	}
	if !isMap {
		a.fail(unsupported("%s: headers are a map of str to str, got %v", k, v))
	}
	return out
}

func (a *args) entries(k string) []*args {
	v, _ := a.get(k, true)
	list, ok := v.([]interface{})
	if !ok {
		a.fail(unsupported("%s: expected a list of maps, got %v", k, v))
		return nil
	}
	out := make([]*args, len(list))
	for i, e := range list {
		out[i] = newArgs(e)
		a.adopt(out[i])
	}
	return out
}

// adopt takes a nested map's first problem (after its fields were read).
func (a *args) adopt(sub *args) { a.fail(sub.err) }

// check answers the first problem, or a field no parameter took.
func (a *args) check() error {
	if a.err != nil {
		return a.err
	}
	var extra []string
	for k := range a.m {
		if !a.used[k] {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return unsupported("no parameter for %s", strings.Join(extra, ", "))
	}
	return nil
}

// spec reads an enqueue's fields (or an enqueue_many entry's).
func (a *args) spec() fenceq.JobSpec {
	j := fenceq.JobSpec{ID: a.str("id", true), Queue: a.str("queue", false), Payload: a.payload("payload"),
		Key: a.str("key", false), OnConflict: a.str("on_conflict", false), Group: a.str("group", false),
		After: a.strs("after", false), AfterFailure: a.str("after_failure", false), Headers: a.headers("headers")}
	p, _ := a.integer("priority", false, true)
	j.Priority = int(p)
	j.Delay, _ = a.dur("delay", false, true)
	j.MaxAttempts = a.optInt("max_attempts")
	j.UniqueFor, _ = a.dur("unique_for", false, false)
	j.MaxRuntime, _ = a.dur("max_runtime", false, false)
	return j
}

func (a *args) lease() (string, string, int64) {
	fence, _ := a.integer("fence", true, true)
	return a.str("id", true), a.str("owner", true), fence
}

// items reads complete_many's or renew_many's leases.
func (a *args) items(withResult bool) []fenceq.LeaseItem {
	var out []fenceq.LeaseItem
	for _, e := range a.entries("items") {
		id, owner, fence := e.lease()
		it := fenceq.LeaseItem{ID: id, Owner: owner, Fence: fence}
		if withResult {
			if _, ok := e.get("result", true); ok {
				it.Result = e.optStr("result")
			}
		} else if e.has("progress") {
			it.Progress = e.optStr("progress")
		}
		if err := e.check(); err != nil {
			a.fail(err.(*failure))
		}
		out = append(out, it)
	}
	return out
}

// call is a request bound to its method: it makes the call and answers the
// result in the wire's form.
type call func(ctx context.Context, c *fenceq.Client) (interface{}, error)

// parse maps an op and its fields to a call (nil, with a.err, when it cannot).
type parse func(a *args) call

func main() {
	s := &session{}
	defer s.close()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 256<<20)
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		if err := out.Encode(s.answer(line)); err != nil {
			fmt.Fprintln(os.Stderr, "go adapter:", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "go adapter:", err)
		os.Exit(1)
	}
}

type session struct{ client *fenceq.Client }

func (s *session) close() {
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
}

type request struct {
	Seq  interface{}            `json:"seq"`
	Op   string                 `json:"op"`
	Args map[string]interface{} `json:"args"`
}

func (s *session) answer(line string) map[string]interface{} {
	var r request
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return map[string]interface{}{"seq": nil, "ok": false, "error": map[string]interface{}{"code": "adapter", "message": err.Error()}}
	}
	result, err := s.handle(r.Op, r.Args)
	if err == nil {
		return map[string]interface{}{"seq": r.Seq, "ok": true, "result": result}
	}
	code := "adapter"
	var f *failure
	var fe *fenceq.Error
	switch {
	case errors.As(err, &f):
		code = f.code
	case errors.As(err, &fe):
		code = fe.Code
	}
	msg := err.Error()
	if msg == "" {
		msg = code
	}
	return map[string]interface{}{"seq": r.Seq, "ok": false, "error": map[string]interface{}{"code": code, "message": msg}}
}

func (s *session) handle(op string, raw map[string]interface{}) (interface{}, error) {
	switch op {
	case "hello":
		return map[string]interface{}{"client": "go", "version": fenceq.Version}, nil
	case "connect":
		s.close()
		a := newArgs(raw)
		endpoint := a.str("endpoint", true)
		timeout, _ := a.dur("timeout", true, false)
		if err := a.check(); err != nil {
			return nil, adapterError("connect: %v", err)
		}
		c, err := fenceq.NewClient(endpoint, &fenceq.Options{Timeout: timeout})
		if err != nil {
			return nil, err
		}
		s.client = c
		return true, nil
	case "close":
		s.close()
		return true, nil
	}
	p, ok := ops[op]
	if !ok {
		return nil, unsupported("no op %q in this adapter", op)
	}
	if s.client == nil {
		return nil, adapterError("a protocol op before connect")
	}
	a := newArgs(raw)
	ctx := context.Background()
	if v, has := a.get("now", false); has {
		t, isNum := number(v)
		if !isNum || !takesNow[op] {
			return nil, unsupported("%s takes no now %v", op, v)
		}
		ctx = fenceq.WithNow(ctx, t)
	}
	fn := p(a)
	if err := a.check(); err != nil {
		var f *failure
		if errors.As(err, &f) && f.zero && required[op] {
			// A required op (README, "Required ops") with a value its typed
			// method leaves out (an empty queue name): Client.Request sends
			// the fields as given.
			return viaRequest(s.client, op, raw)
		}
		return nil, err
	}
	return fn(ctx, s.client)
}

// required are the kit's required ops: an `unsupported` for them fails.
var required = map[string]bool{"ping": true, "enqueue": true, "state": true, "claim": true, "renew": true,
	"complete": true, "release": true, "claim_next": true, "complete_many": true, "renew_many": true, "await": true}

// viaRequest sends op with its fields as given, through Client.Request.
func viaRequest(c *fenceq.Client, op string, raw map[string]interface{}) (interface{}, error) {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fields := make([]fenceq.Field, 0, len(keys))
	for _, k := range keys {
		v, err := fromJSON(raw[k])
		if err != nil {
			return nil, err
		}
		fields = append(fields, fenceq.Field{Key: k, Value: v})
	}
	v, err := c.Request(context.Background(), op, fields...)
	if err != nil {
		return nil, err
	}
	return jsonOf(v), nil
}

// fromJSON is adapter JSON as Request's values: {"$bin": hex} as bytes, a
// number with a fraction or exponent as a float64, any other as an int64.
func fromJSON(v interface{}) (interface{}, error) {
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return x.Float64()
		}
		return x.Int64()
	case map[string]interface{}:
		if h, ok := x["$bin"].(string); ok && len(x) == 1 {
			return hex.DecodeString(h)
		}
		out := map[string]interface{}{}
		for k, e := range x {
			conv, err := fromJSON(e)
			if err != nil {
				return nil, err
			}
			out[k] = conv
		}
		return out, nil
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			conv, err := fromJSON(e)
			if err != nil {
				return nil, err
			}
			out[i] = conv
		}
		return out, nil
	}
	return v, nil
}

// takesNow: the ops whose methods send a `now` (WithNow).
var takesNow = map[string]bool{
	"enqueue": true, "claim": true, "renew": true, "complete": true, "claim_next": true,
	"fail": true, "check": true, "cancel": true, "list": true, "job": true, "stats": true,
	"purge": true, "metrics": true, "complete_next": true, "enqueue_many": true,
	"complete_many": true, "renew_many": true, "await": true, "enqueue_and_wait": true,
	"schedule_set": true, "schedule_list": true, "results": true, "snooze": true,
	"retry_many": true, "cancel_many": true,
}
