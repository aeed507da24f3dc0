package fenceq

// The Client over tcp:// with ZeroMQ CURVE against a real fenceqd: the
// daemon answers only the clients whose public key is in its
// --curve-allowed-clients file; everyone else gets no reply (the handshake
// is refused, so nothing they send is read).

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// keygen runs `fenceqd --curve-keygen path` and answers the line it prints.
func keygen(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(fenceqdBinary(t), "--curve-keygen", path).Output()
	if err != nil {
		t.Fatalf("keygen: %v", err)
	}
	line := strings.TrimSpace(string(out))
	if !strings.HasPrefix(line, `public-key = "`) {
		t.Fatalf("keygen printed %q", line)
	}
	return line
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestCurveOverTCP(t *testing.T) {
	dir := shortDir(t)
	serverLine := keygen(t, filepath.Join(dir, "server.key"))
	listedLine := keygen(t, filepath.Join(dir, "listed.key"))
	keygen(t, filepath.Join(dir, "unlisted.key"))
	allowed := filepath.Join(dir, "allowed")
	if err := os.WriteFile(allowed, []byte("# the clients allowed on tcp\n"+listedLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listed := need(LoadCurveKeys(filepath.Join(dir, "listed.key"), serverLine))(t)
	unlisted := need(LoadCurveKeys(filepath.Join(dir, "unlisted.key"), strings.Split(serverLine, `"`)[1]))(t)
	if strings.Contains(fmt.Sprint(listed), listed.SecretKey) || strings.Contains(fmt.Sprintf("%#v", listed), listed.SecretKey) {
		t.Fatal("the secret key is printed")
	}

	d := &testDaemon{t: t, dir: dir, name: "tcp", clock: "client", extra: []string{"--allow-tcp",
		"--curve-secret-key", filepath.Join(dir, "server.key"), "--curve-allowed-clients", allowed}}
	d.endpoint = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	t.Cleanup(d.kill)
	d.startTCP(listed)

	c := d.client(&Options{Curve: &listed})
	if ok := need(c.Enqueue(bg, JobSpec{ID: "j"}))(t); !ok {
		t.Fatal("enqueue over tcp: false")
	}
	fence, ok, err := c.Claim(at(100), "j", "w1", 10*time.Second)
	if err != nil || !ok || fence != 1 {
		t.Fatalf("claim: %v %v %v", fence, ok, err)
	}
	if ok := need(c.Complete(at(101), "j", "w1", 1, str("ok")))(t); !ok {
		t.Fatal("complete refused")
	}
	for name, opts := range map[string]*Options{
		"unlisted": {Curve: &unlisted, Timeout: 500 * time.Millisecond},
		"no CURVE": {Timeout: 500 * time.Millisecond},
	} {
		other := d.client(opts)
		_, err := other.Enqueue(bg, JobSpec{ID: "never"})
		var fe *Error
		if !errors.As(err, &fe) || fe.Code != CodeTimeout || !fe.NotSent {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if st := need(c.State(bg, "never"))(t); st != nil {
		t.Fatalf("a refused client's enqueue was applied: %+v", st)
	}
}

// startTCP starts the daemon and waits until it answers the listed client.
func (d *testDaemon) startTCP(keys CurveKeys) {
	d.t.Helper()
	args := append([]string{"--db", filepath.Join(d.dir, d.name+".db"), "--listen", d.endpoint, "--clock", d.clock}, d.extra...)
	d.cmd = exec.Command(fenceqdBinary(d.t), args...)
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	c := need(NewClient(d.endpoint, &Options{Curve: &keys, Timeout: 200 * time.Millisecond}))(d.t)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.Ping(bg); err == nil {
			return
		}
	}
	d.t.Fatal("fenceqd on tcp did not answer the listed client within 10 s")
}

func TestCurveKeysAreChecked(t *testing.T) {
	dir := shortDir(t)
	line := keygen(t, filepath.Join(dir, "k.key"))
	server := strings.Split(line, `"`)[1]
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := need(LoadCurveKeys(filepath.Join(dir, "k.key"), server))(t)
	cases := map[string]func() error{
		"a missing file": func() error { _, err := LoadCurveKeys(filepath.Join(dir, "none"), server); return err },
		"no secret key": func() error {
			_, err := LoadCurveKeys(write("pub", `public-key = "`+key.PublicKey+`"`+"\n"), server)
			return err
		},
		"a bad server key": func() error { _, err := LoadCurveKeys(filepath.Join(dir, "k.key"), "short"); return err },
		"keys of two pairs": func() error {
			other := strings.Split(keygen(t, filepath.Join(dir, "o.key")), `"`)[1]
			_, err := LoadCurveKeys(write("mixed", `public-key = "`+other+`"`+"\n"+`secret-key = "`+key.SecretKey+`"`+"\n"), server)
			return err
		},
		"CURVE on ipc": func() error { _, err := NewClient("ipc:///tmp/x.sock", &Options{Curve: &key}); return err },
		"a key that is not Z85": func() error {
			bad := key
			bad.PublicKey = strings.Repeat("~", 40)
			_, err := NewClient("tcp://127.0.0.1:1", &Options{Curve: &bad})
			return err
		},
	}
	for name, f := range cases {
		if err := f(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
