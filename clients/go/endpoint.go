package fenceq

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ServiceEndpoint is the installed service's socket (systemd/fenceqd.conf):
// where every fenceq client connects when given no endpoint and no
// FENCEQ_ENDPOINT, if its file exists.
const ServiceEndpoint = "ipc:///run/fenceq/fenceqd.sock"

// DevelopmentEndpoint is the last step of ResolveEndpoint's order: the socket
// `make run` serves, relative to the current folder (the repository's root).
const DevelopmentEndpoint = "ipc://var/fenceqd.sock"

// The steps of ResolveEndpoint's order, as Resolved.Source names them.
const (
	SourceGiven       = "given"
	SourceEnvironment = "environment"
	SourceService     = "service"
	SourceDevelopment = "development"
)

// Resolved is an endpoint and the step of ResolveEndpoint's order that chose it.
type Resolved struct {
	Endpoint string
	Source   string
}

// ResolveEndpoint is the endpoint a Client connects to, the first of (as in
// every fenceq client: docs/operating.md, "Which endpoint a client uses"):
// endpoint when not empty; $FENCEQ_ENDPOINT when set and not empty;
// ServiceEndpoint when its socket file exists; DevelopmentEndpoint.
func ResolveEndpoint(endpoint string) Resolved {
	if endpoint != "" {
		return Resolved{endpoint, SourceGiven}
	}
	if env := os.Getenv("FENCEQ_ENDPOINT"); env != "" {
		return Resolved{env, SourceEnvironment}
	}
	if _, err := os.Stat(strings.TrimPrefix(ServiceEndpoint, "ipc://")); err == nil || errors.Is(err, os.ErrPermission) {
		// One in a folder this user may not search counts: the service is
		// there, and the error then says who may connect.
		return Resolved{ServiceEndpoint, SourceService}
	}
	return Resolved{DevelopmentEndpoint, SourceDevelopment}
}

var chosenBy = map[string]string{
	SourceGiven:       "given explicitly",
	SourceEnvironment: "from FENCEQ_ENDPOINT",
	SourceService:     "the installed service's socket",
	SourceDevelopment: "the development default",
}

// ipcProblem says why nothing can answer on an ipc:// endpoint, when its
// socket file says so ("" otherwise): none there (its absolute path), not
// a socket, or one this user may not connect to.
func ipcProblem(endpoint string) string {
	if !strings.HasPrefix(endpoint, "ipc://") || len(endpoint) == 6 || endpoint[6] == '@' {
		return "" // not ipc, or an abstract socket: no file to look at
	}
	path := endpoint[6:]
	absolute, err := filepath.Abs(path)
	if err != nil {
		absolute = path
	}
	denied := fmt.Sprintf("this user may not connect to %s (permission denied: fenceqd's --ipc-mode sets who may)", absolute)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrPermission):
		return denied // a folder on the way is not ours to search
	case err != nil:
		return fmt.Sprintf("there is no socket at %s (is fenceqd running? `make run` starts one "+
			"that serves ipc://var/fenceqd.sock from the repository's folder)", absolute)
	case info.Mode()&os.ModeSocket == 0:
		return fmt.Sprintf("%s is not a socket", absolute)
	case syscall.Access(path, 2 /* W_OK */) != nil:
		return denied
	}
	return ""
}

// CurveKeys is what a Client or Subscriber needs for a tcp:// endpoint,
// which fenceqd serves only with ZeroMQ CURVE: the daemon's public key and
// this client's key pair, each as its 40 characters of Z85 text. Read them
// with LoadCurveKeys. Its String leaves the secret key out.
type CurveKeys struct {
	ServerPublic string
	PublicKey    string
	SecretKey    string
}

func (k CurveKeys) String() string {
	return fmt.Sprintf("CurveKeys{ServerPublic: %q, PublicKey: %q, SecretKey: <hidden>}", k.ServerPublic, k.PublicKey)
}

// GoString keeps the secret out of %#v too.
func (k CurveKeys) GoString() string { return k.String() }

// check answers why the keys cannot be used ("" when they can).
func (k CurveKeys) check() string {
	for _, f := range []struct{ name, text string }{
		{"ServerPublic", k.ServerPublic}, {"PublicKey", k.PublicKey}, {"SecretKey", k.SecretKey},
	} {
		if why := z85KeyProblem(f.text); why != "" {
			return fmt.Sprintf("%s is not a CURVE key: %s", f.name, why)
		}
	}
	return ""
}

func z85KeyProblem(text string) string {
	if len(text) != 40 {
		return fmt.Sprintf("expected 40 Z85 characters, got %d", len(text))
	}
	if _, ok := z85Decode(text); !ok {
		return "not valid Z85 text"
	}
	return ""
}

// zcertProperty is (name, value) of a zcert `name = value` line, `=` a word
// of its own (as the daemon reads it: `=` is also a Z85 digit).
func zcertProperty(line string) (string, string, bool) {
	words := strings.Fields(line)
	if len(words) < 2 || words[1] != "=" {
		return "", "", false
	}
	rest := strings.TrimSpace(line)
	rest = strings.TrimSpace(rest[len(words[0]):])
	return words[0], strings.TrimSpace(rest[1:]), true
}

func quoted(value string) (string, bool) {
	if len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
		return "", false
	}
	return value[1 : len(value)-1], true
}

// LoadCurveKeys reads this client's CURVE key pair from keyFile, a file
// written by `fenceqd --curve-keygen FILE` (zcert text: `public-key = "…"`
// and `secret-key = "…"` lines; whole lines starting with # are comments;
// section lines and other properties are skipped), and pairs it with the
// daemon's public key: its 40 Z85 characters, or the line `fenceqd
// --curve-keygen` printed (`public-key = "…"`). The error is an
// invalid_argument naming the file (and line) or the server key.
func LoadCurveKeys(keyFile, serverPublic string) (CurveKeys, error) {
	server := strings.TrimSpace(serverPublic)
	if name, value, ok := zcertProperty(server); ok {
		v, isQuoted := quoted(value)
		if name != "public-key" || !isQuoted {
			return CurveKeys{}, invalid("", "server public key: expected its 40 Z85 characters or 'public-key = \"<40 Z85 chars>\"', got %q", serverPublic)
		}
		server = v
	}
	if why := z85KeyProblem(server); why != "" {
		return CurveKeys{}, invalid("", "server public key %q is not a CURVE key: %s", serverPublic, why)
	}
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return CurveKeys{}, invalid("", "cannot read CURVE key file %s: %v", keyFile, err)
	}
	found, err := readZcert(keyFile, data)
	if err != nil {
		return CurveKeys{}, err
	}
	if derived, err := curvePublic(found["secret-key"]); err == nil && derived != found["public-key"] {
		return CurveKeys{}, invalid("", "CURVE key file %s: its public-key does not belong to its secret-key", keyFile)
	}
	return CurveKeys{ServerPublic: server, PublicKey: found["public-key"], SecretKey: found["secret-key"]}, nil
}

// readZcert finds the public-key and secret-key lines of a zcert file.
func readZcert(keyFile string, data []byte) (map[string]string, error) {
	found := map[string]string{}
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; scanner.Scan(); n++ {
		text := strings.TrimSpace(scanner.Text())
		// Only whole lines are comments: '#' is also a Z85 digit.
		if text == "" || strings.HasPrefix(text, "#") || text == "curve" || text == "metadata" {
			continue
		}
		name, value, ok := zcertProperty(text)
		if !ok {
			return nil, invalid("", "%s:%d: expected 'public-key = \"<40 Z85 chars>\"' or 'secret-key = \"<40 Z85 chars>\"', got %q", keyFile, n, text)
		}
		if name != "public-key" && name != "secret-key" {
			continue // another zcert property (metadata)
		}
		if _, twice := found[name]; twice {
			return nil, invalid("", "%s:%d: a second %s line", keyFile, n, name)
		}
		v, isQuoted := quoted(value)
		if !isQuoted {
			return nil, invalid("", "%s:%d: expected %s = \"<40 Z85 chars>\"", keyFile, n, name)
		}
		if why := z85KeyProblem(v); why != "" {
			return nil, invalid("", "%s:%d: %s is not a CURVE key: %s", keyFile, n, name, why)
		}
		found[name] = v
	}
	for _, name := range []string{"public-key", "secret-key"} {
		if _, ok := found[name]; !ok {
			return nil, invalid("", "CURVE key file %s has no %s line (expected a file written by fenceqd --curve-keygen)", keyFile, name)
		}
	}
	return found, nil
}

// applyCurve sets the keys on a socket before it connects.
func applyCurve(s *zsock, k *CurveKeys) error {
	if k == nil {
		return nil
	}
	for _, o := range []struct {
		option int
		key    string
	}{{zmqCURVESERVERKEY, k.ServerPublic}, {zmqCURVEPUBLICKEY, k.PublicKey}, {zmqCURVESECRETKEY, k.SecretKey}} {
		if err := s.setBytes(o.option, []byte(o.key)); err != nil {
			return invalid("", "cannot use CURVE keys (libzmq %s, CURVE support: %v): %v", zmqVersion(), zmqHas("curve"), err)
		}
	}
	return nil
}
