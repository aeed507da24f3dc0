package fenceq

// Batches, reads, queue settings, await, periodic jobs, fan-in and bulk
// actions: the ops added to protocol v1 after the first seven.

import (
	"context"
	"fmt"
	"math"
	"time"
)

// EnqueueMany enqueues up to 1000 jobs in one round trip and one
// transaction, and answers one bool per job in order (as Enqueue would).
// One bad entry refuses the whole request (its index in the message) and
// nothing is applied.
func (c *Client) EnqueueMany(ctx context.Context, jobs []JobSpec) ([]bool, error) {
	answers, err := c.enqueueMany(ctx, jobs)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(answers))
	for i, e := range answers {
		out[i] = e.Created
	}
	return out, nil
}

// EnqueueManyUnique is EnqueueMany answering, per job, which job holds its
// key (EnqueueUnique's answer) or, for a job without a key, its own id.
func (c *Client) EnqueueManyUnique(ctx context.Context, jobs []JobSpec) ([]Enqueued, error) {
	return c.enqueueMany(ctx, jobs)
}

func (c *Client) enqueueMany(ctx context.Context, jobs []JobSpec) ([]Enqueued, error) {
	entries := make([]interface{}, len(jobs))
	for i, j := range jobs {
		f, err := j.fields("enqueue_many", fmt.Sprintf("jobs[%d]: ", i))
		if err != nil {
			return nil, err
		}
		entries[i] = f
	}
	v, err := c.call(ctx, "enqueue_many", fields{{"jobs", entries}}, 0)
	if err != nil {
		return nil, err
	}
	a, ok := v.([]interface{})
	if !ok || len(a) != len(jobs) {
		return nil, badReply("enqueue_many", "expected an array of %d answers, got %v", len(jobs), v)
	}
	out := make([]Enqueued, len(jobs))
	for i, answer := range a {
		if out[i], err = parseEnqueued("enqueue_many", answer, jobs[i].Key != "", jobs[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// EnqueueFanIn enqueues the parts and then the job `then`, which waits for
// all of them (its After is the parts' ids, then its own), in one
// EnqueueMany request. Answers one bool per job: the parts', then then's.
func (c *Client) EnqueueFanIn(ctx context.Context, parts []JobSpec, then JobSpec) ([]bool, error) {
	if len(parts) == 0 {
		return nil, invalid("enqueue_many", "EnqueueFanIn needs at least one part; nothing was sent")
	}
	after := make([]string, 0, len(parts)+len(then.After))
	for _, p := range parts {
		after = append(after, p.ID)
	}
	then.After = append(after, then.After...)
	return c.EnqueueMany(ctx, append(append([]JobSpec{}, parts...), then))
}

// LeaseItem is one lease of CompleteMany (with its Result; nil: none) or
// RenewMany (with its Progress, sent when not nil).
type LeaseItem struct {
	ID       string
	Owner    string
	Fence    int64
	Result   *string
	Progress *string
}

// NextClaim is CompleteManyNext's claim after the completions: up to Max
// (1..1000) jobs of Queue, leased for TTL to the last item's owner.
type NextClaim struct {
	Queue string
	TTL   time.Duration
	Max   int
}

func completeItems(items []LeaseItem) []interface{} {
	out := make([]interface{}, len(items))
	for i, it := range items {
		f := leaseFields(it.ID, it.Owner, it.Fence)
		f.add("result", it.Result)
		out[i] = f
	}
	return out
}

// CompleteMany completes up to 1000 leases in order, in one round trip and
// one transaction, each judged on its own (C3.5): one bool per item.
func (c *Client) CompleteMany(ctx context.Context, items []LeaseItem) ([]bool, error) {
	v, err := c.call(ctx, "complete_many", fields{{"items", completeItems(items)}}, 0)
	if err != nil {
		return nil, err
	}
	return parseBools("complete_many", v, len(items))
}

// CompleteManyNext is CompleteMany and then a claim of up to next.Max jobs
// of next.Queue for the last item's owner, in the same round trip
// (whatever the completions answered; no wait).
func (c *Client) CompleteManyNext(ctx context.Context, items []LeaseItem, next NextClaim) (CompletedMany, error) {
	f := fields{{"items", completeItems(items)},
		{"next", fields{{"queue", next.Queue}, {"ttl", secs(next.TTL)}, {"max", next.Max}}}}
	v, err := c.call(ctx, "complete_many", f, 0)
	if err != nil {
		return CompletedMany{}, err
	}
	m, ok := asMap(v)
	if !ok {
		return CompletedMany{}, badReply("complete_many", "expected {completed, next}, got %v", v)
	}
	done, err := parseBools("complete_many", m["completed"], len(items))
	if err != nil {
		return CompletedMany{}, err
	}
	jobs, err := parseClaimedJobs("complete_many", m["next"], next.Max)
	if err != nil {
		return CompletedMany{}, err
	}
	return CompletedMany{Completed: done, Next: jobs}, nil
}

// RenewMany renews up to 1000 leases to now + ttl in one round trip: one
// bool per item, what Renew would answer (false: that lease is gone).
func (c *Client) RenewMany(ctx context.Context, items []LeaseItem, ttl time.Duration) ([]bool, error) {
	entries := make([]interface{}, len(items))
	for i, it := range items {
		f := leaseFields(it.ID, it.Owner, it.Fence)
		if it.Progress != nil {
			f.add("progress", *it.Progress)
		}
		entries[i] = f
	}
	v, err := c.call(ctx, "renew_many", fields{{"items", entries}, {"ttl", secs(ttl)}}, 0)
	if err != nil {
		return nil, err
	}
	return parseBools("renew_many", v, len(items))
}

// Job answers one job's whole record, or nil when the id does not exist.
func (c *Client) Job(ctx context.Context, id string) (*JobRecord, error) {
	v, err := c.call(ctx, "job", fields{{"id", id}}, 0)
	if err != nil {
		return nil, err
	}
	return parseOptRecord("job", v)
}

// ListOptions filter and page List. Zero values are not sent.
type ListOptions struct {
	Queue string
	State string // ready, delayed, leased, done, dead, cancelled, blocked, suspended
	Limit int    // 1..1000; the daemon's default 100
	After string // the last row's id of the previous page
	Order string // "id" (default), "created", "-created"
	// AfterCreated: the last row's Created, with After, in a created order.
	AfterCreated *float64
	Prefix       string
	Key          string
	Group        string
}

// List answers one page of job rows (an empty or short page is the end).
func (c *Client) List(ctx context.Context, o *ListOptions) ([]JobRecord, error) {
	if o == nil {
		o = &ListOptions{}
	}
	var f fields
	for _, e := range []kv{{"queue", o.Queue}, {"state", o.State}} {
		if e.val != "" {
			f.add(e.key, e.val)
		}
	}
	if o.Limit != 0 {
		f.add("limit", o.Limit)
	}
	for _, e := range []kv{{"after", o.After}, {"order", o.Order}} {
		if e.val != "" {
			f.add(e.key, e.val)
		}
	}
	if o.AfterCreated != nil {
		f.add("after_created", timestamp(*o.AfterCreated))
	}
	for _, e := range []kv{{"prefix", o.Prefix}, {"key", o.Key}, {"group", o.Group}} {
		if e.val != "" {
			f.add(e.key, e.val)
		}
	}
	v, err := c.call(ctx, "list", f, 0)
	if err != nil {
		return nil, err
	}
	a, ok := v.([]interface{})
	if !ok {
		return nil, badReply("list", "expected an array of maps, got %v", v)
	}
	out := make([]JobRecord, 0, len(a))
	for _, e := range a {
		j, err := parseRecord("list", e)
		if err != nil {
			return nil, err
		}
		out = append(out, *j)
	}
	return out, nil
}

// Stats answers the daemon's counts by queue and its own counters.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	v, err := c.call(ctx, "stats", nil, 0)
	if err != nil {
		return nil, err
	}
	return parseStats(v)
}

// Metrics answers the Stats figures in the Prometheus text format.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	v, err := c.call(ctx, "metrics", nil, 0)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", badReply("metrics", "expected a str, got %v", v)
	}
	return s, nil
}

// Purge removes the done, dead and cancelled jobs (of queue; "": every
// queue) that finished at least olderThan ago, and answers how many. Each
// id's fence is kept (C1.2).
func (c *Client) Purge(ctx context.Context, olderThan time.Duration, queue string) (int64, error) {
	f := fields{{"older_than", secs(olderThan)}}
	if queue != "" {
		f.add("queue", queue)
	}
	v, err := c.call(ctx, "purge", f, 0)
	if err != nil {
		return 0, err
	}
	n, ok := asInt(v)
	if !ok || n < 0 {
		return 0, badReply("purge", "expected a count, got %v", v)
	}
	return n, nil
}

// Results answers the state and stored result of up to 1000 jobs in one
// round trip, keyed by id (nil for an id that does not exist).
func (c *Client) Results(ctx context.Context, ids []string) (map[string]*JobResult, error) {
	v, err := c.call(ctx, "results", fields{{"ids", ids}}, 0)
	if err != nil {
		return nil, err
	}
	m, ok := asMap(v)
	if !ok {
		return nil, badReply("results", "expected a map of id to {state, result} or nil, got %v", v)
	}
	out := make(map[string]*JobResult, len(m))
	for id, e := range m {
		if e == nil {
			out[id] = nil
			continue
		}
		r, err := newReader("results", e, "{state, result}")
		if err != nil {
			return nil, err
		}
		r.need("state", "result")
		out[id] = &JobResult{State: r.str("state"), Result: r.optStr("result")}
		if o := r.optBool("omitted"); o != nil {
			out[id].Omitted = *o
		}
		if err := r.done(); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, badReply("results", "no answer for %q in %v", id, v)
		}
	}
	return out, nil
}

// KeepForever, as a QueueSettings retention, removes it (the jobs are kept
// until purged, the daemon's default).
const KeepForever = time.Duration(math.MaxInt64)

// QueueSettings change a queue's settings (QueueConfig); nil fields keep
// their stored value.
type QueueSettings struct {
	Paused         *bool
	MaxLeased      *int           // at most this many leased at once; 0: no limit
	Rate           *int           // at most Rate claims in any Per; 0: no limit
	Per            *time.Duration // the daemon's default 1 s
	GroupMaxLeased *int
	GroupRate      *int
	GroupPer       *time.Duration
	// Retention: finished jobs removed this long after they finished;
	// KeepForever removes the retention.
	KeepDone      *time.Duration
	KeepDead      *time.Duration
	KeepCancelled *time.Duration
}

// QueueConfig changes the settings of queue and answers true.
func (c *Client) QueueConfig(ctx context.Context, queue string, s QueueSettings) (bool, error) {
	f := fields{{"queue", queue}}
	if s.Paused != nil {
		f.add("paused", *s.Paused)
	}
	for _, e := range []struct {
		key string
		v   *int
	}{{"max_leased", s.MaxLeased}, {"rate", s.Rate}} {
		if e.v != nil {
			f.add(e.key, *e.v)
		}
	}
	if s.Per != nil {
		f.add("per", secs(*s.Per))
	}
	for _, e := range []struct {
		key string
		v   *int
	}{{"group_max_leased", s.GroupMaxLeased}, {"group_rate", s.GroupRate}} {
		if e.v != nil {
			f.add(e.key, *e.v)
		}
	}
	if s.GroupPer != nil {
		f.add("group_per", secs(*s.GroupPer))
	}
	for _, e := range []struct {
		key string
		v   *time.Duration
	}{{"keep_done", s.KeepDone}, {"keep_dead", s.KeepDead}, {"keep_cancelled", s.KeepCancelled}} {
		if e.v == nil {
			continue
		}
		if *e.v == KeepForever {
			f.add(e.key, nilValue{})
		} else {
			f.add(e.key, secs(*e.v))
		}
	}
	v, err := c.call(ctx, "queue_config", f, 0)
	return expectBool("queue_config", v, err)
}

// Inherit, as a GroupOverride MaxLeased or Rate, removes that override
// (nil on the wire): the group follows the queue's setting again. It is the
// smallest int, a value no limit can have, so that any other value, -1 too,
// is sent as it is (and a bad one refused by the daemon).
const Inherit int = math.MinInt

// InheritPer, as a GroupOverride Per, removes that override (nil on
// the wire), as Inherit does for the limits.
const InheritPer = time.Duration(math.MinInt64)

// GroupOverride overrides, for one group (a tenant), the queue's
// GroupMaxLeased, GroupRate and GroupPer (GroupConfig). Each field is
// three-way, as QueueSettings' retentions are:
//   - nil: left out, the group's stored override (if any) is kept;
//   - Ptr(v): the override is v (MaxLeased or Rate 0 lifts that limit for
//     this group alone, even where the queue sets one);
//   - Ptr(Inherit) (Per: Ptr(InheritPer)): the override is removed
//     (nil on the wire) and the group follows the queue's setting again.
type GroupOverride struct {
	MaxLeased *int           // at most this many of the group leased at once (0..1e9)
	Rate      *int           // at most Rate claims of the group in any Per (0..100,000)
	Per       *time.Duration // the window of Rate (0 < Per <= 24 h)
}

// GroupConfig sets or removes the overrides of one group of queue (C3.25)
// and answers true. A group whose overrides are all removed has none; Stats
// lists a queue's overrides (QueueStats.GroupOverrides, GroupConfig).
func (c *Client) GroupConfig(ctx context.Context, queue, group string, o GroupOverride) (bool, error) {
	f := fields{{"queue", queue}, {"group", group}}
	for _, e := range []struct {
		key string
		v   *int
	}{{"max_leased", o.MaxLeased}, {"rate", o.Rate}} {
		switch {
		case e.v == nil:
		case *e.v == Inherit:
			f.add(e.key, nilValue{})
		default:
			f.add(e.key, *e.v)
		}
	}
	switch {
	case o.Per == nil:
	case *o.Per == InheritPer:
		f.add("per", nilValue{})
	default:
		f.add("per", secs(*o.Per))
	}
	v, err := c.call(ctx, "group_config", f, 0)
	return expectBool("group_config", v, err)
}

// Pause hands out no job of queue until Resume.
func (c *Client) Pause(ctx context.Context, queue string) (bool, error) {
	return c.QueueConfig(ctx, queue, QueueSettings{Paused: Ptr(true)})
}

// Resume hands out the queue's jobs again.
func (c *Client) Resume(ctx context.Context, queue string) (bool, error) {
	return c.QueueConfig(ctx, queue, QueueSettings{Paused: Ptr(false)})
}

// AwaitJob waits up to wait (0..1 h) for job id to be finished (done, dead
// or cancelled) and answers its record; nil when the wait passes first.
// There must be such a job (else invalid_argument).
func (c *Client) AwaitJob(ctx context.Context, id string, wait time.Duration) (*JobRecord, error) {
	v, err := c.call(ctx, "await", fields{{"id", id}, {"wait", secs(wait)}}, waitExtension(wait))
	if err != nil {
		return nil, err
	}
	return parseOptRecord("await", v)
}

// EnqueueAndWait enqueues job (or finds it there already) and awaits it,
// in one request: its record once finished, nil when wait passes first.
// The daemon refuses a Key here (enqueue with it, then AwaitJob). Against
// a daemon without the op it sends Enqueue and AwaitJob.
func (c *Client) EnqueueAndWait(ctx context.Context, job JobSpec, wait time.Duration) (*JobRecord, error) {
	f, err := job.fields("enqueue_and_wait", "")
	if err != nil {
		return nil, err
	}
	f.add("wait", secs(wait))
	v, err := c.call(ctx, "enqueue_and_wait", f, waitExtension(wait))
	if Code(err) == CodeUnknownOp {
		if _, err := c.Enqueue(ctx, job); err != nil {
			return nil, err
		}
		return c.AwaitJob(ctx, job.ID, wait)
	}
	if err != nil {
		return nil, err
	}
	return parseOptRecord("enqueue_and_wait", v)
}

// ScheduleOptions of ScheduleSet; zero values are the daemon's defaults
// (tz UTC, queue "default", priority 0, max_attempts 25) and are not sent.
type ScheduleOptions struct {
	TZ          string
	Queue       string
	Payload     Payload
	Priority    int
	MaxAttempts int
}

// ScheduleSet creates or replaces the periodic job name: at each tick of
// cron (five fields, or @daily...) in time zone TZ the daemon enqueues one
// job name@YYYY-MM-DDTHH:MMZ.
func (c *Client) ScheduleSet(ctx context.Context, name, cron string, o *ScheduleOptions) (bool, error) {
	if o == nil {
		o = &ScheduleOptions{}
	}
	f := fields{{"name", name}, {"cron", cron}}
	if o.TZ != "" && o.TZ != "UTC" {
		f.add("tz", o.TZ)
	}
	if o.Queue != "" && o.Queue != "default" {
		f.add("queue", o.Queue)
	}
	if !o.Payload.IsNil() {
		f.add("payload", o.Payload)
	}
	if o.Priority != 0 {
		f.add("priority", o.Priority)
	}
	if o.MaxAttempts != 0 {
		f.add("max_attempts", o.MaxAttempts)
	}
	v, err := c.call(ctx, "schedule_set", f, 0)
	return expectBool("schedule_set", v, err)
}

// ScheduleDelete removes the schedule name (its jobs stay); false: none.
func (c *Client) ScheduleDelete(ctx context.Context, name string) (bool, error) {
	v, err := c.call(ctx, "schedule_delete", fields{{"name", name}}, 0)
	return expectBool("schedule_delete", v, err)
}

// ScheduleList answers every schedule, by name.
func (c *Client) ScheduleList(ctx context.Context) ([]Schedule, error) {
	v, err := c.call(ctx, "schedule_list", nil, 0)
	if err != nil {
		return nil, err
	}
	return parseSchedules(v)
}

// BulkFilter selects the jobs of a bulk action; zero values are not sent.
type BulkFilter struct {
	State  string // RetryMany: dead, cancelled; CancelMany: ready, delayed, leased, blocked, dead
	Prefix string
	Group  string
	Limit  int // 1..10,000; the daemon's default 1,000
}

func (b BulkFilter) add(f *fields) {
	for _, e := range []kv{{"state", b.State}, {"prefix", b.Prefix}, {"group", b.Group}} {
		if e.val != "" {
			f.add(e.key, e.val)
		}
	}
}

// RetryMany retries one page of the dead or cancelled jobs of queue that
// pass the filter, as Retry would.
func (c *Client) RetryMany(ctx context.Context, queue string, b BulkFilter) (BulkResult, error) {
	return c.bulk(ctx, "retry_many", queue, b)
}

// CancelMany cancels one page of the jobs of queue that pass the filter,
// as Cancel would.
func (c *Client) CancelMany(ctx context.Context, queue string, b BulkFilter) (BulkResult, error) {
	return c.bulk(ctx, "cancel_many", queue, b)
}

func (c *Client) bulk(ctx context.Context, op, queue string, b BulkFilter) (BulkResult, error) {
	f := fields{{"queue", queue}}
	b.add(&f)
	if b.Limit != 0 {
		f.add("limit", b.Limit)
	}
	v, err := c.call(ctx, op, f, 0)
	if err != nil {
		return BulkResult{}, err
	}
	return parseBulk(op, v)
}

// PurgeFilter selects the finished jobs PurgeMany removes.
type PurgeFilter struct {
	Queue string // "": every queue
	BulkFilter
	OlderThan time.Duration // finished at least this long ago (0: any)
}

// DefaultBulkLimit is the limit PurgeMany sends when its filter has none of
// State, Prefix, Group, Limit (so the daemon answers a page).
const DefaultBulkLimit = 1000

// PurgeMany removes one page of the finished jobs that pass the filter
// (each id's fence kept).
func (c *Client) PurgeMany(ctx context.Context, p PurgeFilter) (BulkResult, error) {
	var f fields
	if p.Queue != "" {
		f.add("queue", p.Queue)
	}
	p.BulkFilter.add(&f)
	if p.OlderThan != 0 {
		f.add("older_than", secs(p.OlderThan))
	}
	limit := p.Limit
	if limit == 0 && p.State == "" && p.Prefix == "" && p.Group == "" {
		limit = DefaultBulkLimit // a page, never purge by age alone
	}
	if limit != 0 {
		f.add("limit", limit)
	}
	v, err := c.call(ctx, "purge", f, 0)
	if err != nil {
		return BulkResult{}, err
	}
	return parseBulk("purge", v)
}

// RetryAll, CancelAll and PurgeAll ask page after page while More, at most
// maxPages requests, stopping after a page that acted on none; they answer
// the total. An error on a later page comes after the earlier pages were
// applied.
func (c *Client) RetryAll(ctx context.Context, queue string, b BulkFilter, maxPages int) (int64, error) {
	return bulkAll(maxPages, func() (BulkResult, error) { return c.RetryMany(ctx, queue, b) })
}

// CancelAll: see RetryAll.
func (c *Client) CancelAll(ctx context.Context, queue string, b BulkFilter, maxPages int) (int64, error) {
	return bulkAll(maxPages, func() (BulkResult, error) { return c.CancelMany(ctx, queue, b) })
}

// PurgeAll: see RetryAll.
func (c *Client) PurgeAll(ctx context.Context, p PurgeFilter, maxPages int) (int64, error) {
	return bulkAll(maxPages, func() (BulkResult, error) { return c.PurgeMany(ctx, p) })
}

func bulkAll(maxPages int, page func() (BulkResult, error)) (int64, error) {
	if maxPages < 1 {
		return 0, invalid("", "maxPages must be >= 1, got %d; nothing was sent", maxPages)
	}
	var total int64
	for i := 0; i < maxPages; i++ {
		r, err := page()
		total += r.Count
		if err != nil {
			return total, err
		}
		if !r.More || r.Count == 0 {
			break
		}
	}
	return total, nil
}
