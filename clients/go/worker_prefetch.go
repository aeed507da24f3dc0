package fenceq

// The prefetching worker (WorkerOptions.Prefetch > 1): it holds up to N
// jobs at once, never more.
//
//   - It claims up to N jobs with one ClaimNextMany (long-polling when the
//     queue is empty) and runs them one after another, in the daemon's
//     order (most urgent first).
//   - One goroutine renews every lease it holds (jobs waiting their turn,
//     the one running, finished ones not completed yet) with one RenewMany
//     every RenewEvery. A job whose renewal is refused is no longer ours:
//     it is dropped (logged, Lost set, its handler's context cancelled),
//     never run if it had not started, never completed; the others go on.
//   - A finished job is completed with CompleteManyNext, together with the
//     others finished since, once the jobs claimed ahead are all run (or
//     once the oldest completion has waited RenewEvery); that request also
//     claims the next jobs, up to N held in all. A job the daemon refuses
//     there is lost; the others are completed. A failed or snoozed job is
//     stored at once; a suspended one (its handler's job.Suspend) stores
//     nothing, its lease ended.
//   - Stop, MaxJobs, the end of Run's context or an error end it: what
//     finished is completed (claiming nothing more), jobs held and not
//     started are released untouched (their attempts stay used).

import (
	"context"
	"sync"
	"time"
)

// leaseKeeper renews the leases a prefetching worker holds.
type leaseKeeper struct {
	w    *Worker
	mu   sync.Mutex
	jobs map[*Job]bool
	quit chan struct{}
	done chan struct{}
}

func (w *Worker) startKeeper(ctx context.Context) *leaseKeeper {
	k := &leaseKeeper{w: w, jobs: map[*Job]bool{}, quit: make(chan struct{}), done: make(chan struct{})}
	go k.loop(ctx)
	return k
}

func (k *leaseKeeper) add(jobs []*Job) {
	k.mu.Lock()
	for _, j := range jobs {
		k.jobs[j] = true
	}
	k.mu.Unlock()
}

// discard stops renewing job (completed, failed, released or lost).
func (k *leaseKeeper) discard(job *Job) {
	k.mu.Lock()
	delete(k.jobs, job)
	k.mu.Unlock()
}

func (k *leaseKeeper) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.jobs)
}

func (k *leaseKeeper) stop() {
	close(k.quit)
	<-k.done
}

func (k *leaseKeeper) loop(ctx context.Context) {
	defer close(k.done)
	w := k.w
	ticker := time.NewTicker(w.o.RenewEvery)
	defer ticker.Stop()
	for {
		select {
		case <-k.quit:
			return
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		k.mu.Lock()
		held := make([]*Job, 0, len(k.jobs))
		for j := range k.jobs {
			if j.Suspended() { // its lease ended with Suspend: not ours to renew
				delete(k.jobs, j)
				continue
			}
			held = append(held, j)
		}
		k.mu.Unlock()
		if len(held) == 0 {
			continue
		}
		items := make([]LeaseItem, len(held))
		for i, j := range held {
			items[i] = LeaseItem{ID: j.ID, Owner: j.Owner, Fence: j.Fence}
		}
		rctx, cancel := context.WithTimeout(ctx, w.renewTimeout())
		renewed, err := w.c.RenewMany(rctx, items, w.o.TTL)
		cancel()
		if err != nil {
			if !transient(err) {
				w.o.Logf("fenceq: renewing the held leases: %v", err)
			}
			continue // try again next round
		}
		for i, ok := range renewed {
			if ok {
				continue
			}
			k.mu.Lock()
			mine := k.jobs[held[i]] // completed or dropped meanwhile: not ours to judge
			delete(k.jobs, held[i])
			k.mu.Unlock()
			if mine && !held[i].leaseEnding() { // not its handler's own Suspend
				w.o.Logf("fenceq: %s (fence %d): renewal refused (cancelled, or the lease is no longer ours): dropped",
					held[i].ID, held[i].Fence)
				held[i].markLost()
			}
		}
	}
}

// prefetcher is one prefetching Run's state.
type prefetcher struct {
	w            *Worker
	ctx          context.Context
	keeper       *leaseKeeper
	ahead        []*Job // claimed, not run yet, in the daemon's order
	pending      []pendingJob
	pendingSince time.Time
}

type pendingJob struct {
	job    *Job
	result string
}

func (w *Worker) runPrefetch(ctx context.Context, h Handler) (handled int, err error) {
	p := &prefetcher{w: w, ctx: ctx, keeper: w.startKeeper(ctx)}
	defer p.keeper.stop()
	defer func() {
		if werr := p.windDown(err != nil); err == nil {
			err = werr
		}
	}()
	idleSince := time.Now()
	for !w.stopping.Load() && (w.o.MaxJobs == 0 || handled < w.o.MaxJobs) {
		most := w.o.Prefetch // claim no job that MaxJobs would leave unrun
		if w.o.MaxJobs > 0 {
			most = w.o.MaxJobs - handled - len(p.ahead)
		}
		if len(p.pending) > 0 && (len(p.ahead) == 0 || time.Since(p.pendingSince) >= w.o.RenewEvery) {
			if err := p.flush(most); err != nil {
				return handled, err
			}
			continue // the jobs it claimed count against MaxJobs
		}
		job := p.nextAhead()
		if job == nil {
			wait, ok := w.waitFor(idleSince)
			if !ok {
				break
			}
			if err := p.claim(wait, most); err != nil {
				return handled, err
			}
			if w.stopping.Load() {
				break // what came is released by windDown
			}
			if job = p.nextAhead(); job == nil {
				continue
			}
		}
		handled++
		idleSince = time.Now()
		if err := p.run(job, h); err != nil {
			return handled, err
		}
	}
	return handled, nil
}

// claim takes up to most jobs (no more than Prefetch held in all).
func (p *prefetcher) claim(wait time.Duration, most int) error {
	w := p.w
	want := most
	if room := w.o.Prefetch - p.keeper.count(); room < want {
		want = room
	}
	if want <= 0 {
		return nil
	}
	claimed, err := w.c.ClaimNextMany(p.ctx, w.o.Queue, w.o.Owner, w.o.TTL, want, wait)
	if err != nil {
		return err
	}
	p.hold(claimed)
	return nil
}

func (p *prefetcher) hold(claimed []ClaimedJob) {
	jobs := make([]*Job, len(claimed))
	for i, cj := range claimed {
		jobs[i] = newJob(p.w.c, cj, p.w.o.Queue, p.w.o.Owner, p.w.o.TTL)
	}
	p.keeper.add(jobs)
	p.ahead = append(p.ahead, jobs...)
}

// nextAhead is the next job claimed ahead whose lease is still ours.
func (p *prefetcher) nextAhead() *Job {
	for len(p.ahead) > 0 {
		job := p.ahead[0]
		p.ahead = p.ahead[1:]
		if !job.Lost() {
			return job
		}
	}
	return nil
}

// run runs a held job: a failure is stored at once and reported; a success
// waits in pending (its lease still renewed) for flush.
func (p *prefetcher) run(job *Job, h Handler) error {
	w := p.w
	result, herr := runHandler(p.ctx, h, job)
	if herr != nil || job.Lost() || job.Suspended() {
		p.keeper.discard(job)
		out, _, err := w.storeFailure(p.ctx, job, result, herr)
		if out.Job != nil {
			w.report(out)
		}
		return err
	}
	if len(p.pending) == 0 {
		p.pendingSince = time.Now()
	}
	p.pending = append(p.pending, pendingJob{job, result})
	return nil
}

// flush completes the finished jobs with one request and, in the same
// round trip, claims up to more jobs (no more than Prefetch held in all;
// none once stopping).
func (p *prefetcher) flush(more int) error {
	w := p.w
	pending := p.pending
	p.pending = nil
	var items []LeaseItem
	var sent []pendingJob
	for _, pj := range pending {
		// Before the request: a completed lease is not renewed any more,
		// and a request that fails leaves no lease behind but to expire.
		p.keeper.discard(pj.job)
		if pj.job.Lost() {
			w.o.Logf("fenceq: %s (fence %d): lease lost, the result was not sent", pj.job.ID, pj.job.Fence)
			w.report(Outcome{Job: pj.job, Status: StatusLost, Result: pj.result, Err: pj.job.lostError()})
			continue
		}
		r := pj.result
		items = append(items, LeaseItem{ID: pj.job.ID, Owner: pj.job.Owner, Fence: pj.job.Fence, Result: &r})
		sent = append(sent, pj)
	}
	if len(items) == 0 {
		return nil
	}
	if room := w.o.Prefetch - p.keeper.count(); room < more {
		more = room
	}
	if w.stopping.Load() || p.ctx.Err() != nil {
		more = 0
	}
	var completed []bool
	var err error
	if more > 0 {
		var reply CompletedMany
		reply, err = w.c.CompleteManyNext(p.ctx, items, NextClaim{Queue: w.o.Queue, TTL: w.o.TTL, Max: more})
		completed = reply.Completed
		if err == nil {
			p.hold(reply.Next)
		}
	} else {
		completed, err = w.c.CompleteMany(windDown(p.ctx), items)
	}
	if err != nil {
		return err
	}
	for i, ok := range completed {
		pj := sent[i]
		if ok {
			w.report(Outcome{Job: pj.job, Status: StatusCompleted, Result: pj.result})
			continue
		}
		w.o.Logf("fenceq: %s (fence %d): lease lost, the result was refused", pj.job.ID, pj.job.Fence)
		w.report(Outcome{Job: pj.job, Status: StatusLost, Result: pj.result, Err: pj.job.lostError()})
	}
	return nil
}

// windDown completes what finished (claiming nothing more), then releases
// what is held. quiet (an error is on its way out): a daemon error here is
// logged rather than answered.
func (p *prefetcher) windDown(quiet bool) error {
	var err error
	if len(p.pending) > 0 {
		if err = p.flush(0); err != nil && quiet {
			p.w.o.Logf("fenceq: could not complete the finished jobs, their leases end by themselves: %v", err)
			err = nil
		}
	}
	why := "run returns"
	if p.w.stopping.Load() {
		why = "stopping"
	}
	for _, job := range p.ahead {
		p.keeper.discard(job)
		p.w.release(p.ctx, job, why)
	}
	p.ahead = nil
	return err
}
