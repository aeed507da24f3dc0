package main

// The adapter's line protocol against a real fenceqd ($FENCEQD, else the
// checkout's build/bin/fenceqd): the README's example session. The kit
// itself (conformance/run.py) runs the adapter through every check.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func startFenceqd(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("FENCEQD")
	if bin == "" {
		bin = filepath.Join("..", "..", "..", "build", "bin", "fenceqd")
	}
	dir, err := os.MkdirTemp("/tmp", "fqad")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	endpoint := "ipc://" + dir + "/fenceqd.sock"
	cmd := exec.Command(bin, "--db", dir+"/fenceq.db", "--listen", endpoint, "--clock", "client")
	if err := cmd.Start(); err != nil {
		t.Fatalf("fenceqd (%s): %v", bin, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; i < 500; i++ { // the socket file: within 5 s
		if _, err := os.Stat(dir + "/fenceqd.sock"); err == nil {
			return endpoint
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("fenceqd made no socket within 5 s")
	return ""
}

func TestAdapterSession(t *testing.T) {
	endpoint := startFenceqd(t)
	s := &session{}
	defer s.close()
	steps := []struct{ request, reply string }{
		{`{"seq":1,"op":"hello","args":{}}`, `{"ok":true,"result":{"client":"go","version":"0.1.0"},"seq":1}`},
		{`{"seq":2,"op":"ping","args":{}}`, `{"error":{"code":"adapter"},"ok":false,"seq":2}`},
		{fmt.Sprintf(`{"seq":3,"op":"connect","args":{"endpoint":%q,"timeout":5.0}}`, endpoint), `{"ok":true,"result":true,"seq":3}`},
		{`{"seq":4,"op":"enqueue","args":{"id":"p-bin","queue":"pay","payload":{"$bin":"00ff10c1"},"priority":5}}`, `{"ok":true,"result":true,"seq":4}`},
		{`{"seq":5,"op":"claim_next","args":{"queue":"pay","owner":"w","ttl":30,"now":10.0}}`,
			`{"ok":true,"result":{"attempts":1,"fence":1,"id":"p-bin","payload":{"$bin":"00ff10c1"}},"seq":5}`},
		{`{"seq":6,"op":"complete","args":{"id":"p-bin","owner":"old","fence":1,"result":"x","now":11.0}}`, `{"ok":true,"result":false,"seq":6}`},
		{`{"seq":7,"op":"claim","args":{"id":"p-bin","owner":"w","ttl":0,"now":11.0}}`, `{"error":{"code":"invalid_argument"},"ok":false,"seq":7}`},
		{`{"seq":8,"op":"release","args":{"id":"p-bin","owner":"w","fence":1,"now":11.0}}`, `{"error":{"code":"unsupported"},"ok":false,"seq":8}`},
		{`{"seq":9,"op":"list","args":{"queue":"pay","limit":0}}`, `{"error":{"code":"unsupported"},"ok":false,"seq":9}`},
		{`{"seq":10,"op":"enqueue","args":{"id":"e","queue":""}}`, `{"error":{"code":"invalid_argument"},"ok":false,"seq":10}`},
		{`{"seq":11,"op":"no_such_op","args":{}}`, `{"error":{"code":"unsupported"},"ok":false,"seq":11}`},
		{`not json`, `{"error":{"code":"adapter"},"ok":false,"seq":null}`},
		{`{"seq":12,"op":"close","args":{}}`, `{"ok":true,"result":true,"seq":12}`},
	}
	for _, step := range steps {
		got := s.answer(step.request)
		if e, ok := got["error"].(map[string]interface{}); ok {
			if m, _ := e["message"].(string); m == "" {
				t.Fatalf("%s: an error without a message: %v", step.request, got)
			}
			delete(e, "message")
		}
		b, _ := json.Marshal(got)
		if string(b) != step.reply {
			t.Fatalf("%s:\n got %s\nwant %s", step.request, b, step.reply)
		}
	}
}
