// Command stale-worker plays the stale-worker story with Go workers, for
// `make demo-queue` (scripts/queue_demo.sh, its `go` section; checked by
// tests/check_demo.sh):
//
//	stale-worker a QUEUE   # worker A: claims the next job of QUEUE with a 1 s
//	                       # lease, then freezes itself (SIGSTOP) until SIGCONT,
//	                       # then writes its result with its old fence
//	stale-worker b QUEUE   # worker B: a fenceq.Worker that runs one job of QUEUE
//
// Worker A stands for any worker that stops for longer than its lease: a
// long GC pause, a frozen VM, a network partition. Nothing of it runs while
// it is stopped, renewals included, so its lease runs out and B takes the
// job over with a higher fence. When A goes on, its complete and renew
// carry the old fence and the daemon refuses both (C3.4, C3.5). A exits 0
// when they were refused, 1 when one was applied (the story broken).
//
// The endpoint is FENCEQ_ENDPOINT's (or the clients' usual order).
//
//	(cd clients/go && ./offline.sh build -o /tmp/stale-worker ./examples/stale-worker)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	fenceq "github.com/fenceq/fenceq/clients/go"
)

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "a" && os.Args[1] != "b") {
		fmt.Fprintln(os.Stderr, "usage: stale-worker a|b QUEUE")
		os.Exit(2)
	}
	c, err := fenceq.NewClient("", nil)
	if err != nil {
		fail(err)
	}
	defer c.Close()
	ctx := context.Background()
	if os.Args[1] == "a" {
		os.Exit(workerA(ctx, c, os.Args[2]))
	}
	workerB(ctx, c, os.Args[2])
}

// workerA claims a job with a 1 s lease, stops itself, and once continued
// writes its late result with the fence it got.
func workerA(ctx context.Context, c *fenceq.Client, queue string) int {
	const owner = "worker-a"
	job, err := c.ClaimNext(ctx, queue, owner, time.Second, 5*time.Second)
	if err != nil {
		fail(err)
	}
	if job == nil {
		fail(fmt.Errorf("no job in queue %q", queue))
	}
	fmt.Printf("worker-a (Go): claimed %s with fence %d and a 1 s lease; it freezes now (SIGSTOP: no renewal)\n",
		job.ID, job.Fence)
	// Stopped by its own SIGSTOP, and on only once SIGCONT came: the stop
	// takes effect a moment after kill returns, and this goroutine must
	// not write anything meanwhile.
	continued := make(chan os.Signal, 1)
	signal.Notify(continued, syscall.SIGCONT)
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		fail(err)
	}
	<-continued
	// The late writes, with the old fence.
	result := "paid again, by A"
	done, err := c.Complete(ctx, job.ID, owner, job.Fence, &result)
	if err != nil {
		fail(err)
	}
	fmt.Printf("worker-a (Go): woke up; Complete(%s, fence %d) = %v\n", job.ID, job.Fence, done)
	renewed, err := c.Renew(ctx, job.ID, owner, job.Fence, 30*time.Second)
	if err != nil {
		fail(err)
	}
	fmt.Printf("worker-a (Go): Renew(%s, fence %d) = %v\n", job.ID, job.Fence, renewed)
	if done || renewed {
		fmt.Println("worker-a (Go): a late write was applied: the story is broken")
		return 1
	}
	fmt.Println("worker-a (Go): both refused: the job is not A's any more, and B's result stays")
	return 0
}

// workerB runs one job of queue with a fenceq.Worker: claim, renew while the
// handler runs, complete under its fence.
func workerB(ctx context.Context, c *fenceq.Client, queue string) {
	w, err := fenceq.NewWorker(c, fenceq.WorkerOptions{Queue: queue, Owner: "worker-b", TTL: 30 * time.Second,
		MaxJobs: 1, IdleExit: 10 * time.Second,
		OnOutcome: func(o fenceq.Outcome) {
			fmt.Printf("worker-b (Go): %s with fence %d: %s, result %q\n", o.Job.ID, o.Job.Fence, o.Status, o.Result)
		}})
	if err != nil {
		fail(err)
	}
	n, err := w.Run(ctx, func(ctx context.Context, job *fenceq.Job) (string, error) {
		return "paid once, by B", nil
	})
	if err != nil {
		fail(err)
	}
	if n != 1 {
		fail(fmt.Errorf("worker-b ran %d jobs, not 1", n))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "stale-worker:", err)
	os.Exit(1)
}
