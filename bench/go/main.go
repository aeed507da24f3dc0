// Command fenceq-go-bench: fenceq's Go client under the complete_next
// workload of `fenceq-bench --workload combined`, or as prefetching Workers.
//
//	(cd clients/go && ./offline.sh build -o /tmp/fenceq-go-bench ../../bench/go)
//	/tmp/fenceq-go-bench --endpoint ipc:///tmp/b/s --jobs 20000 --clients 8 [--mode prefetch --prefetch 32]
//
// N jobs are enqueued first with EnqueueMany (not measured). Then:
//
//   - --mode single: K goroutines share one fenceq.Client (its calls go out
//     on the Client's one shared connection); each takes a job with
//     ClaimNext, then CompleteAndClaimNext (the complete_next op, one round
//     trip a job) until the queue is empty. Every request's latency is kept.
//   - --mode prefetch: K fenceq.Workers on that one Client, each with
//     Prefetch P (ClaimNextMany, RenewMany, CompleteManyNext), a handler
//     that does nothing; the run ends when the N-th job is completed.
//
// Prints one JSON line in fenceq-bench's shape (target "go" or
// "go-prefetch"), so bench/run_bench.py puts it in the clients' table.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	fenceq "github.com/fenceq/fenceq/clients/go"
)

type report struct {
	Label       string   `json:"label"`
	Target      string   `json:"target"`
	Workload    string   `json:"workload"`
	Clients     int      `json:"clients"`
	Prefetch    int      `json:"prefetch,omitempty"`
	Jobs        int      `json:"jobs"`
	Completed   int64    `json:"completed"`
	Refused     int64    `json:"refused"`
	Seconds     float64  `json:"seconds"`
	JobsPerS    float64  `json:"jobs_per_s"`
	Requests    int      `json:"requests,omitempty"`
	P50us       *float64 `json:"p50_us,omitempty"`
	P99us       *float64 `json:"p99_us,omitempty"`
	P999us      *float64 `json:"p999_us,omitempty"`
	CommitsPerS float64  `json:"commits_per_s"`
	Errors      []string `json:"errors"`
}

func main() {
	endpoint := flag.String("endpoint", "", "fenceqd's endpoint")
	jobs := flag.Int("jobs", 20000, "jobs (N)")
	clients := flag.Int("clients", 8, "workers (K)")
	ttl := flag.Duration("ttl", 30*time.Second, "lease")
	mode := flag.String("mode", "single", "single (complete_next) or prefetch (Workers)")
	prefetch := flag.Int("prefetch", 32, "each Worker's prefetch (--mode prefetch)")
	label := flag.String("label", "", "label")
	profile := flag.String("cpuprofile", "", "write the measured part's CPU profile to this file")
	flag.Parse()
	if *endpoint == "" || (*mode != "single" && *mode != "prefetch") {
		fmt.Fprintln(os.Stderr, "usage: fenceq-go-bench --endpoint E [--jobs N] [--clients K] [--mode single|prefetch]")
		os.Exit(2)
	}
	c, err := fenceq.NewClient(*endpoint, &fenceq.Options{Timeout: 30 * time.Second, MaxIdle: *clients + 4})
	if err != nil {
		fail(err)
	}
	defer c.Close()
	ctx := context.Background()
	queue := fmt.Sprintf("go%d-%d", os.Getpid(), time.Now().Unix())
	for start := 0; start < *jobs; start += 500 {
		var batch []fenceq.JobSpec
		for n := start; n < *jobs && n < start+500; n++ {
			batch = append(batch, fenceq.JobSpec{ID: fmt.Sprintf("%s-%d", queue, n), Queue: queue})
		}
		if _, err := c.EnqueueMany(ctx, batch); err != nil {
			fail(err)
		}
	}
	before, err := c.Stats(ctx)
	if err != nil {
		fail(err)
	}
	r := report{Label: *label, Clients: *clients, Jobs: *jobs, Errors: []string{}}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	var lat []time.Duration
	if *mode == "single" {
		r.Target, r.Workload = "go", "combined"
		lat = single(ctx, c, queue, *clients, *ttl, &r)
	} else {
		r.Target, r.Workload, r.Prefetch = "go-prefetch", "batch", *prefetch
		prefetching(ctx, c, queue, *clients, *prefetch, *ttl, &r)
	}
	after, err := c.Stats(ctx)
	if err != nil {
		fail(err)
	}
	r.JobsPerS = round(float64(r.Completed) / r.Seconds)
	r.CommitsPerS = round(float64(after.Commits-before.Commits) / r.Seconds)
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		r.Requests = len(lat)
		r.P50us, r.P99us, r.P999us = pct(lat, 0.50), pct(lat, 0.99), pct(lat, 0.999)
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	fmt.Fprintf(os.Stderr, "%-12s %-11s %-9s K=%-3d %8.0f jobs/s\n", r.Label, r.Target, r.Workload, r.Clients, r.JobsPerS)
	if len(r.Errors) > 0 || r.Completed != int64(*jobs) {
		os.Exit(1)
	}
}

// single: K goroutines, claim_next then complete_next until the queue is empty.
func single(ctx context.Context, c *fenceq.Client, queue string, k int, ttl time.Duration, r *report) []time.Duration {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []time.Duration
	var completed, refused int64
	empty := ""
	start := time.Now()
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			owner := fmt.Sprintf("go-%d", i)
			var lat []time.Duration
			t := time.Now()
			job, err := c.ClaimNext(ctx, queue, owner, ttl, 0)
			lat = append(lat, time.Since(t))
			for err == nil && job != nil {
				t = time.Now()
				var out fenceq.CompletedNext
				out, err = c.CompleteAndClaimNext(ctx, job.ID, owner, job.Fence, &empty, queue, ttl)
				lat = append(lat, time.Since(t))
				if out.Completed {
					atomic.AddInt64(&completed, 1)
				} else if err == nil {
					atomic.AddInt64(&refused, 1)
				}
				job = out.Next
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, lat...)
			if err != nil {
				r.Errors = append(r.Errors, err.Error())
			}
		}(i)
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	r.Completed, r.Refused = completed, refused
	return all
}

// prefetching: K Workers with Prefetch p until the N-th job is completed.
func prefetching(ctx context.Context, c *fenceq.Client, queue string, k, p int, ttl time.Duration, r *report) {
	var completed, refused int64
	var end atomic.Value
	workers := make([]*fenceq.Worker, k)
	stopAll := func() {
		for _, w := range workers {
			w.Stop()
		}
	}
	for i := range workers {
		w, err := fenceq.NewWorker(c, fenceq.WorkerOptions{Queue: queue, Owner: fmt.Sprintf("go-%d", i), TTL: ttl,
			Wait: 200 * time.Millisecond, Prefetch: p, Logf: func(string, ...interface{}) {},
			OnOutcome: func(o fenceq.Outcome) {
				if o.Status != fenceq.StatusCompleted {
					atomic.AddInt64(&refused, 1)
					return
				}
				if atomic.AddInt64(&completed, 1) == int64(r.Jobs) {
					end.Store(time.Now())
					stopAll()
				}
			}})
		if err != nil {
			fail(err)
		}
		workers[i] = w
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := time.Now()
	for _, w := range workers {
		wg.Add(1)
		go func(w *fenceq.Worker) {
			defer wg.Done()
			_, err := w.Run(ctx, func(context.Context, *fenceq.Job) (string, error) { return "", nil })
			if err != nil {
				mu.Lock()
				r.Errors = append(r.Errors, err.Error())
				mu.Unlock()
				stopAll()
			}
		}(w)
	}
	wg.Wait()
	stop, ok := end.Load().(time.Time)
	if !ok {
		stop = time.Now()
	}
	r.Seconds = stop.Sub(start).Seconds()
	r.Completed, r.Refused = completed, refused
}

func pct(sorted []time.Duration, q float64) *float64 {
	i := int(q * float64(len(sorted)))
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	v := round(float64(sorted[i]) / float64(time.Microsecond))
	return &v
}

func round(x float64) float64 { return float64(int64(x + 0.5)) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fenceq-go-bench:", err)
	os.Exit(1)
}
