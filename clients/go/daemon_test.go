package fenceq

// Real fenceqd daemons for the tests: each on a fresh database in its own
// folder under /tmp (ipc paths must stay short), serving ipc://. The binary
// is $FENCEQD (the Makefile passes its build's), else the checkout's
// build/bin/fenceqd. Every daemon a test starts is killed when the test
// ends, and every wait is bounded.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func fenceqdBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("FENCEQD")
	if bin == "" {
		bin = filepath.Join("..", "..", "build", "bin", "fenceqd")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(abs); err != nil || info.Mode()&0o111 == 0 {
		t.Fatalf("fenceqd binary not found at %s: build it or set FENCEQD", abs)
	}
	return abs
}

// shortDir is a fresh folder under /tmp, removed when the test ends.
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "fqgo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type testDaemon struct {
	t        testing.TB
	dir      string
	name     string
	endpoint string
	clock    string
	extra    []string
	cmd      *exec.Cmd
}

// startDaemon starts fenceqd (clock "client" or "server") and waits until it
// answers a ping.
func startDaemon(t testing.TB, clock string, extra ...string) *testDaemon {
	t.Helper()
	dir := shortDir(t)
	d := &testDaemon{t: t, dir: dir, name: "fq", endpoint: "ipc://" + dir + "/fq.sock", clock: clock, extra: extra}
	d.start()
	t.Cleanup(d.kill)
	return d
}

func (d *testDaemon) start() {
	d.t.Helper()
	args := append([]string{"--db", filepath.Join(d.dir, d.name+".db"), "--listen", d.endpoint,
		"--clock", d.clock}, d.extra...)
	stderr, err := os.OpenFile(filepath.Join(d.dir, d.name+".stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer stderr.Close()
	d.cmd = exec.Command(fenceqdBinary(d.t), args...)
	d.cmd.Stderr = stderr
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.waitReady(10 * time.Second)
}

func (d *testDaemon) stderr() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, d.name+".stderr"))
	return string(b)
}

func (d *testDaemon) waitReady(limit time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(limit)
	if strings.HasPrefix(d.endpoint, "ipc://") {
		for time.Now().Before(deadline) {
			if _, err := os.Stat(strings.TrimPrefix(d.endpoint, "ipc://")); err == nil {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	c, err := NewClient(d.endpoint, &Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		d.t.Fatal(err)
	}
	defer c.Close()
	for time.Now().Before(deadline) {
		_, err := c.Ping(context.Background())
		if err == nil {
			return
		}
		if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrUnreachable) {
			d.t.Fatalf("ping: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	d.t.Fatalf("fenceqd did not answer within %v: %s", limit, d.stderr())
}

// stop signals the daemon and waits for it (SIGKILL after 10 s).
func (d *testDaemon) stop(sig syscall.Signal) {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
	d.cmd = nil
}

func (d *testDaemon) kill() { d.stop(syscall.SIGKILL) }

func (d *testDaemon) restart() {
	d.t.Helper()
	d.stop(syscall.SIGTERM)
	d.start()
}

// client is a Client of this daemon, closed when the test ends.
func (d *testDaemon) client(opts *Options) *Client {
	d.t.Helper()
	c, err := NewClient(d.endpoint, opts)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { c.Close() })
	return c
}

// at is a context whose calls carry now = t (client clock daemons).
func at(t float64) context.Context { return WithNow(context.Background(), t) }

var bg = context.Background()

// need(f())(t) is f's value, or the test fails with f's error.
func need[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func str(s string) *string { return &s }
