package fenceq

// The typed results of the ops, and how each is read from a decoded reply.
// A record the daemon sends as a map (a job's row, stats, a schedule) keeps
// that map whole in Fields too: clients ignore keys they do not know, and a
// newer daemon's keys are there for whoever wants them. The `wire` tags
// name each field's key (the tests check every typed field against it).

import "fmt"

// PingInfo is ping's answer.
type PingInfo struct {
	Protocol int64  `wire:"protocol"`
	Version  string `wire:"version"`
	Clock    string `wire:"clock"` // "server" or "client"
	Fields   map[string]interface{}
}

// LeaseState is state's answer: the committed row of a job (C3.2).
type LeaseState struct {
	ID       string  `wire:"id"`
	Owner    *string `wire:"owner"` // nil: not leased
	Until    float64 `wire:"until"`
	Fence    int64   `wire:"fence"`
	Result   *string `wire:"result"`
	Done     bool    `wire:"done"`
	Progress *string `wire:"progress"` // only once a renew stored one
	Fields   map[string]interface{}
}

// ClaimedJob is a job a claim handed out (ClaimNext, the next jobs of
// CompleteAndClaimNext and CompleteManyNext). It is leased to the owner
// that claimed it: run it, renew it, or release it.
type ClaimedJob struct {
	ID       string  `wire:"id"`
	Fence    int64   `wire:"fence"`
	Payload  Payload `wire:"payload"`
	Attempts int64   `wire:"attempts"` // claims so far, this one included
	// After: the jobs it waited for (enqueued with After), in id order;
	// nil for a job enqueued without.
	After []string `wire:"after"`
	// Headers: the headers it was enqueued with (such as a W3C
	// traceparent); nil for a job enqueued without.
	Headers map[string]string `wire:"headers"`
	// Steps: the job's saved steps (StepSave, C3.22), each step's name to
	// its value as saved (Bytes, Text or nil); nil for a job that saved none.
	Steps map[string]Payload `wire:"steps"`
	// Signal (C3.23): nil when no signal woke the job since its last
	// Suspend (never suspended, never signalled, or woken by its timeout);
	// else the value the Signal sent, with its type: Bytes, Text, or the
	// nil Payload (IsNil: a signal without a value, which is still one).
	Signal *Payload `wire:"signal"`
}

// CompletedNext is CompleteAndClaimNext's answer.
type CompletedNext struct {
	// Completed is what Complete would answer.
	Completed bool
	// Next is the job claimed afterwards, whatever Completed says; nil when
	// the queue had none (ClaimNext with a wait long-polls then).
	Next *ClaimedJob
}

// CompletedMany is CompleteManyNext's answer.
type CompletedMany struct {
	Completed []bool       // one per item, what Complete would answer
	Next      []ClaimedJob // the jobs claimed afterwards, for the last item's owner
}

// Enqueued is the answer for a job with a unique key: Created true when
// this request made job ID; false when nothing was made, and ID is then
// the job that holds the key (or the request's own id when that id existed).
type Enqueued struct {
	ID      string
	Created bool
}

// BulkResult is one page of a bulk action: Count jobs acted on, and More
// true when jobs that pass the filter are left (ask again).
type BulkResult struct {
	Count int64
	More  bool
}

// JobRecord is a job's row (List) or whole record (Job, AwaitJob,
// EnqueueAndWait: with Result and Payload). Pointers are nil for nil or
// for a key the daemon leaves out (Progress, Key and Group only when the
// job has one).
type JobRecord struct {
	ID              string             `wire:"id"`
	Queue           string             `wire:"queue"`
	State           string             `wire:"state"` // ready, delayed, leased, done, dead, cancelled, blocked, suspended
	Priority        int64              `wire:"priority"`
	Attempts        int64              `wire:"attempts"`
	MaxAttempts     int64              `wire:"max_attempts"`
	Fence           int64              `wire:"fence"`
	Owner           *string            `wire:"owner"`
	Until           float64            `wire:"until"`
	NotBefore       float64            `wire:"not_before"`
	Error           *string            `wire:"error"`
	Created         float64            `wire:"created"`
	Progress        *string            `wire:"progress"`
	Key             *string            `wire:"key"`
	Group           *string            `wire:"group"`
	Result          *string            `wire:"result"`
	Payload         Payload            `wire:"payload"`
	After           []string           `wire:"after"`
	BlockedChildren []string           `wire:"blocked_children"`
	Headers         map[string]string  `wire:"headers"`
	Steps           map[string]Payload `wire:"steps"` // saved steps (C3.22); nil for none
	// Signal: as ClaimedJob.Signal (C3.23), from Job; nil for none.
	Signal *Payload `wire:"signal"`
	// Suspended: the job's wait while it is suspended (Job); nil otherwise.
	Suspended *Suspension `wire:"suspended"`
	Fields    map[string]interface{}
}

// Suspension is a suspended job's wait (JobRecord.Suspended, C3.23).
type Suspension struct {
	Timeout   float64 `wire:"timeout"`    // when the wait ends: Unix seconds (or the client clock's)
	OnTimeout string  `wire:"on_timeout"` // OnTimeoutRetry or OnTimeoutFail
}

// Stats is stats' answer (protocol/PROTOCOL.md, "stats").
type Stats struct {
	Queues        map[string]QueueStats  `wire:"queues"`
	Requests      int64                  `wire:"requests"`
	Commits       int64                  `wire:"commits"`
	Batches       int64                  `wire:"batches"`
	FailedCommits int64                  `wire:"failed_commits"`
	MeanBatch     float64                `wire:"mean_batch"`
	WaitingClaims int64                  `wire:"waiting_claims"`
	Uptime        float64                `wire:"uptime"`
	Writes        map[string]WriteCounts `wire:"writes"`
	Fields        map[string]interface{}
}

// QueueStats is one queue's entry of Stats. The settings are nil for a
// queue without them.
type QueueStats struct {
	Ready          int64       `wire:"ready"`
	Delayed        int64       `wire:"delayed"`
	Leased         int64       `wire:"leased"`
	Done           int64       `wire:"done"`
	Dead           int64       `wire:"dead"`
	Cancelled      int64       `wire:"cancelled"`
	Blocked        int64       `wire:"blocked"`
	Suspended      int64       `wire:"suspended"` // waiting for a signal (C3.23)
	OldestReadyAge float64     `wire:"oldest_ready_age"`
	Totals         QueueTotals `wire:"totals"`
	GroupsWaiting  int64       `wire:"groups_waiting"`
	Paused         *bool       `wire:"paused"`
	MaxLeased      *int64      `wire:"max_leased"`
	Rate           *int64      `wire:"rate"`
	Per            *float64    `wire:"per"`
	GroupMaxLeased *int64      `wire:"group_max_leased"`
	GroupRate      *int64      `wire:"group_rate"`
	GroupPer       *float64    `wire:"group_per"`
	KeepDone       *float64    `wire:"keep_done"`
	KeepDead       *float64    `wire:"keep_dead"`
	KeepCancelled  *float64    `wire:"keep_cancelled"`
	// GroupOverrides: how many groups have settings of their own
	// (GroupConfig, C3.25); 0 for none.
	GroupOverrides int64 `wire:"group_overrides"`
	// GroupConfig: those groups' settings, the first 100 by group name;
	// nil for none.
	GroupConfig map[string]GroupOverrideStats `wire:"group_config"`
}

// GroupOverrideStats is one group's entry of QueueStats.GroupConfig: its
// overrides of the queue's group settings, each nil when the group follows
// the queue's.
type GroupOverrideStats struct {
	MaxLeased *int64   `wire:"max_leased"`
	Rate      *int64   `wire:"rate"`
	Per       *float64 `wire:"per"`
}

// QueueTotals counts a queue's events since the daemon started.
type QueueTotals struct {
	Claimed        int64            `wire:"claimed"`
	Completed      int64            `wire:"completed"`
	Failed         int64            `wire:"failed"`
	Retried        int64            `wire:"retried"`
	Dead           int64            `wire:"dead"`
	Expired        int64            `wire:"expired"`
	Removed        int64            `wire:"removed"`
	DeadlinePassed int64            `wire:"deadline_passed"` // dead: not claimed by their Deadline (C3.24)
	Refused        map[string]int64 `wire:"refused"`
}

// WriteCounts counts one op's fenced writes since the daemon started.
type WriteCounts struct {
	Applied int64 `wire:"applied"`
	Refused int64 `wire:"refused"`
}

// Schedule is one periodic job (ScheduleList).
type Schedule struct {
	Name        string   `wire:"name"`
	Cron        string   `wire:"cron"`
	TZ          string   `wire:"tz"`
	Queue       string   `wire:"queue"`
	Payload     Payload  `wire:"payload"`
	Priority    int64    `wire:"priority"`
	MaxAttempts int64    `wire:"max_attempts"`
	Next        *float64 `wire:"next"` // nil: no tick within five years
	Last        *float64 `wire:"last"` // nil: none enqueued yet
	Fields      map[string]interface{}
}

// JobResult is one job's state and stored result (Results).
type JobResult struct {
	State  string  `wire:"state"`
	Result *string `wire:"result"`
	// Omitted: the job has a result this reply left out (issue 56: past the
	// reply's 1 MiB of results); ask again for it.
	Omitted bool `wire:"omitted"`
}

// reader reads typed fields out of one decoded map and keeps the first
// type error, as a bad_reply naming the op and the key.
type reader struct {
	op  string
	m   map[string]interface{}
	err *Error
}

func newReader(op string, v interface{}, what string) (*reader, error) {
	m, ok := asMap(v)
	if !ok {
		return nil, badReply(op, "expected %s (a map), got %v", what, v)
	}
	return &reader{op: op, m: m}, nil
}

func (r *reader) fail(key, want string) {
	if r.err == nil {
		r.err = badReply(r.op, "%q: expected %s, got %v", key, want, r.m[key])
	}
}

// need marks a key that must be there.
func (r *reader) need(keys ...string) {
	for _, k := range keys {
		if _, ok := r.m[k]; !ok && r.err == nil {
			r.err = badReply(r.op, "missing %q in %v", k, r.m)
		}
	}
}

func (r *reader) str(key string) string {
	v, ok := r.m[key]
	if !ok {
		return ""
	}
	s, ok := asString(v)
	if !ok {
		r.fail(key, "a str")
	}
	return s
}

func (r *reader) optStr(key string) *string {
	s, ok := asOptString(r.m[key])
	if !ok {
		r.fail(key, "a str or nil")
	}
	return s
}

func (r *reader) i64(key string) int64 {
	v, ok := r.m[key]
	if !ok {
		return 0
	}
	i, ok := asInt(v)
	if !ok {
		r.fail(key, "an int")
	}
	return i
}

func (r *reader) optI64(key string) *int64 {
	if v, ok := r.m[key]; !ok || v == nil {
		return nil
	}
	i := r.i64(key)
	return &i
}

func (r *reader) num(key string) float64 {
	v, ok := r.m[key]
	if !ok || v == nil {
		return 0
	}
	f, ok := asNumber(v)
	if !ok {
		r.fail(key, "a number")
	}
	return f
}

func (r *reader) optNum(key string) *float64 {
	if v, ok := r.m[key]; !ok || v == nil {
		return nil
	}
	f := r.num(key)
	return &f
}

func (r *reader) boolean(key string) bool {
	v, ok := r.m[key]
	if !ok {
		return false
	}
	b, ok := asBool(v)
	if !ok {
		r.fail(key, "a bool")
	}
	return b
}

func (r *reader) optBool(key string) *bool {
	if v, ok := r.m[key]; !ok || v == nil {
		return nil
	}
	b := r.boolean(key)
	return &b
}

func (r *reader) strs(key string) []string {
	v, ok := r.m[key]
	if !ok {
		return nil
	}
	s, ok := asStrings(v)
	if !ok {
		r.fail(key, "an array of str")
	}
	return s
}

func (r *reader) headers(key string) map[string]string {
	v, ok := r.m[key]
	if !ok {
		return nil
	}
	h, ok := asHeaders(v)
	if !ok {
		r.fail(key, "a map of str to str")
	}
	return h
}

func (r *reader) steps(key string) map[string]Payload {
	v, ok := r.m[key]
	if !ok {
		return nil
	}
	m, ok := asMap(v)
	if !ok {
		r.fail(key, "a map of str to bin, str or nil")
		return nil
	}
	out := make(map[string]Payload, len(m))
	for name, e := range m {
		p, ok := payloadOf(e)
		if !ok {
			r.fail(key, "a map of str to bin, str or nil")
			return nil
		}
		out[name] = p
	}
	return out
}

// optPayload reads a payload that may be absent (nil) or present, nil too.
func (r *reader) optPayload(key string) *Payload {
	if _, ok := r.m[key]; !ok {
		return nil
	}
	p := r.payload(key)
	return &p
}

func (r *reader) suspension(key string) *Suspension {
	v, ok := r.m[key]
	if !ok || v == nil {
		return nil
	}
	m, ok := asMap(v)
	if !ok {
		r.fail(key, "a map {timeout, on_timeout}")
		return nil
	}
	sr := &reader{op: r.op, m: m}
	s := &Suspension{Timeout: sr.num("timeout"), OnTimeout: sr.str("on_timeout")}
	if sr.err != nil && r.err == nil {
		r.err = sr.err
	}
	return s
}

func (r *reader) payload(key string) Payload {
	p, ok := payloadOf(r.m[key])
	if !ok {
		r.fail(key, "bin, str or nil")
	}
	return p
}

func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	return nil
}

func parsePing(v interface{}) (*PingInfo, error) {
	r, err := newReader("ping", v, "the daemon's identity")
	if err != nil {
		return nil, err
	}
	p := &PingInfo{Protocol: r.i64("protocol"), Version: r.str("version"), Clock: r.str("clock"), Fields: r.m}
	return p, r.done()
}

func parseState(v interface{}) (*LeaseState, error) {
	if v == nil {
		return nil, nil
	}
	r, err := newReader("state", v, "a job's row or nil")
	if err != nil {
		return nil, err
	}
	s := &LeaseState{ID: r.str("id"), Owner: r.optStr("owner"), Until: r.num("until"), Fence: r.i64("fence"),
		Result: r.optStr("result"), Done: r.boolean("done"), Progress: r.optStr("progress"), Fields: r.m}
	return s, r.done()
}

func parseClaimedJob(op string, v interface{}) (*ClaimedJob, error) {
	r, err := newReader(op, v, "a claimed job")
	if err != nil {
		return nil, err
	}
	r.need("id", "fence", "payload", "attempts")
	j := &ClaimedJob{ID: r.str("id"), Fence: r.i64("fence"), Payload: r.payload("payload"),
		Attempts: r.i64("attempts"), After: r.strs("after"), Headers: r.headers("headers"), Steps: r.steps("steps"),
		Signal: r.optPayload("signal")}
	return j, r.done()
}

func parseClaimedJobs(op string, v interface{}, most int) ([]ClaimedJob, error) {
	a, ok := v.([]interface{})
	if !ok || (most > 0 && len(a) > most) {
		return nil, badReply(op, "expected an array of at most %d jobs, got %v", most, v)
	}
	out := make([]ClaimedJob, 0, len(a))
	for _, e := range a {
		j, err := parseClaimedJob(op, e)
		if err != nil {
			return nil, err
		}
		out = append(out, *j)
	}
	return out, nil
}

func parseRecord(op string, v interface{}) (*JobRecord, error) {
	r, err := newReader(op, v, "a job's record")
	if err != nil {
		return nil, err
	}
	j := &JobRecord{ID: r.str("id"), Queue: r.str("queue"), State: r.str("state"),
		Priority: r.i64("priority"), Attempts: r.i64("attempts"), MaxAttempts: r.i64("max_attempts"),
		Fence: r.i64("fence"), Owner: r.optStr("owner"), Until: r.num("until"),
		NotBefore: r.num("not_before"), Error: r.optStr("error"), Created: r.num("created"),
		Progress: r.optStr("progress"), Key: r.optStr("key"), Group: r.optStr("group"),
		Result: r.optStr("result"), Payload: r.payload("payload"), After: r.strs("after"),
		BlockedChildren: r.strs("blocked_children"), Headers: r.headers("headers"), Steps: r.steps("steps"),
		Signal: r.optPayload("signal"), Suspended: r.suspension("suspended"), Fields: r.m}
	return j, r.done()
}

func parseOptRecord(op string, v interface{}) (*JobRecord, error) {
	if v == nil {
		return nil, nil
	}
	return parseRecord(op, v)
}

func parseStats(v interface{}) (*Stats, error) {
	r, err := newReader("stats", v, "stats")
	if err != nil {
		return nil, err
	}
	s := &Stats{Requests: r.i64("requests"), Commits: r.i64("commits"), Batches: r.i64("batches"),
		FailedCommits: r.i64("failed_commits"), MeanBatch: r.num("mean_batch"),
		WaitingClaims: r.i64("waiting_claims"), Uptime: r.num("uptime"), Fields: r.m,
		Queues: map[string]QueueStats{}, Writes: map[string]WriteCounts{}}
	queues, ok := asMap(r.m["queues"])
	if !ok {
		return nil, badReply("stats", "expected a map with \"queues\", got %v", v)
	}
	for name, q := range queues {
		qs, err := parseQueueStats(q)
		if err != nil {
			return nil, err
		}
		s.Queues[name] = qs
	}
	if writes, ok := asMap(r.m["writes"]); ok {
		for op, w := range writes {
			wr, err := newReader("stats", w, "writes."+op)
			if err != nil {
				return nil, err
			}
			s.Writes[op] = WriteCounts{Applied: wr.i64("applied"), Refused: wr.i64("refused")}
			if err := wr.done(); err != nil {
				return nil, err
			}
		}
	}
	return s, r.done()
}

func parseQueueStats(v interface{}) (QueueStats, error) {
	r, err := newReader("stats", v, "a queue's entry")
	if err != nil {
		return QueueStats{}, err
	}
	q := QueueStats{Ready: r.i64("ready"), Delayed: r.i64("delayed"), Leased: r.i64("leased"),
		Done: r.i64("done"), Dead: r.i64("dead"), Cancelled: r.i64("cancelled"), Blocked: r.i64("blocked"),
		Suspended: r.i64("suspended"), OldestReadyAge: r.num("oldest_ready_age"), GroupsWaiting: r.i64("groups_waiting"),
		Paused: r.optBool("paused"), MaxLeased: r.optI64("max_leased"), Rate: r.optI64("rate"),
		Per: r.optNum("per"), GroupMaxLeased: r.optI64("group_max_leased"),
		GroupRate: r.optI64("group_rate"), GroupPer: r.optNum("group_per"),
		KeepDone: r.optNum("keep_done"), KeepDead: r.optNum("keep_dead"),
		KeepCancelled: r.optNum("keep_cancelled"), GroupOverrides: r.i64("group_overrides")}
	if g, ok := r.m["group_config"]; ok {
		m, isMap := asMap(g)
		if !isMap {
			return q, badReply("stats", "group_config: expected a map of group to its settings, got %v", g)
		}
		q.GroupConfig = make(map[string]GroupOverrideStats, len(m))
		for group, e := range m {
			gr, err := newReader("stats", e, "group_config."+group)
			if err != nil {
				return q, err
			}
			q.GroupConfig[group] = GroupOverrideStats{MaxLeased: gr.optI64("max_leased"), Rate: gr.optI64("rate"),
				Per: gr.optNum("per")}
			if err := gr.done(); err != nil {
				return q, err
			}
		}
	}
	if t, ok := r.m["totals"]; ok {
		tr, err := newReader("stats", t, "a queue's totals")
		if err != nil {
			return q, err
		}
		q.Totals = QueueTotals{Claimed: tr.i64("claimed"), Completed: tr.i64("completed"),
			Failed: tr.i64("failed"), Retried: tr.i64("retried"), Dead: tr.i64("dead"),
			Expired: tr.i64("expired"), Removed: tr.i64("removed"), DeadlinePassed: tr.i64("deadline_passed"),
			Refused: map[string]int64{}}
		if refused, ok := asMap(tr.m["refused"]); ok {
			for op, n := range refused {
				if q.Totals.Refused[op], ok = asInt(n); !ok {
					return q, badReply("stats", "totals.refused.%s: expected an int, got %v", op, n)
				}
			}
		}
		if err := tr.done(); err != nil {
			return q, err
		}
	}
	return q, r.done()
}

func parseSchedules(v interface{}) ([]Schedule, error) {
	a, ok := v.([]interface{})
	if !ok {
		return nil, badReply("schedule_list", "expected an array of maps, got %v", v)
	}
	out := make([]Schedule, 0, len(a))
	for _, e := range a {
		r, err := newReader("schedule_list", e, "a schedule")
		if err != nil {
			return nil, err
		}
		out = append(out, Schedule{Name: r.str("name"), Cron: r.str("cron"), TZ: r.str("tz"),
			Queue: r.str("queue"), Payload: r.payload("payload"), Priority: r.i64("priority"),
			MaxAttempts: r.i64("max_attempts"), Next: r.optNum("next"), Last: r.optNum("last"), Fields: r.m})
		if err := r.done(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func parseBulk(op string, v interface{}) (BulkResult, error) {
	r, err := newReader(op, v, "{count, more}")
	if err != nil {
		return BulkResult{}, err
	}
	r.need("count", "more")
	b := BulkResult{Count: r.i64("count"), More: r.boolean("more")}
	if b.Count < 0 {
		r.fail("count", "an int >= 0")
	}
	return b, r.done()
}

func parseBools(op string, v interface{}, n int) ([]bool, error) {
	a, ok := v.([]interface{})
	if !ok || len(a) != n {
		return nil, badReply(op, "expected an array of %d bools, got %v", n, v)
	}
	out := make([]bool, n)
	for i, e := range a {
		if out[i], ok = e.(bool); !ok {
			return nil, badReply(op, "expected an array of %d bools, got %v", n, v)
		}
	}
	return out, nil
}

func expectBool(op string, v interface{}, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, badReply(op, "expected a bool, got %v", v)
	}
	return b, nil
}

// parseEnqueued reads an enqueue's answer: a keyed request's {id, created},
// an unkeyed one's bool (for its own id).
func parseEnqueued(op string, v interface{}, keyed bool, id string) (Enqueued, error) {
	if !keyed {
		b, ok := v.(bool)
		if !ok {
			return Enqueued{}, badReply(op, "expected a bool, got %v", v)
		}
		return Enqueued{ID: id, Created: b}, nil
	}
	if b, ok := v.(bool); ok {
		return Enqueued{}, &Error{Code: CodeUnsupportedVersion, Op: op, Message: fmt.Sprintf(
			"the daemon answered a keyed enqueue with %v, not {id, created}: it does not know unique keys and ignored the key", b)}
	}
	r, err := newReader(op, v, "{id, created}")
	if err != nil {
		return Enqueued{}, err
	}
	r.need("id", "created")
	e := Enqueued{ID: r.str("id"), Created: r.boolean("created")}
	return e, r.done()
}
