package fenceq

// The shared protocol vectors (protocol/vectors/*.json, its README), as
// every fenceq client checks them, each suite on fresh daemons of its clock:
//
//   - codec: the readable request packs, with this client's encoder, to
//     request_hex; reply_hex decodes, with its decoder, to reply;
//   - raw: each step's exact bytes through a bare DEALER get the expected
//     reply;
//   - client (vectors_client_test.go): the same steps through the Client's
//     typed methods wherever the request is exactly what a method sends.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

type vectorStep struct {
	Name       string          `json:"name"`
	Request    json.RawMessage `json:"request"`
	RequestHex string          `json:"request_hex"`
	Reply      json.RawMessage `json:"reply"`
	ReplyHex   string          `json:"reply_hex"`
	Compare    string          `json:"compare"`
}

type vectorSuite struct {
	file  string
	Name  string       `json:"name"`
	Clock string       `json:"clock"`
	Steps []vectorStep `json:"steps"`
}

func vectorsDir() string {
	if d := os.Getenv("FENCEQ_VECTORS"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "protocol", "vectors")
}

func loadSuites(t *testing.T) []vectorSuite {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(vectorsDir(), "*.json"))
	sort.Strings(paths)
	if len(paths) == 0 {
		t.Fatalf("no protocol vectors in %s: the vectors are part of the protocol", vectorsDir())
	}
	var suites []vectorSuite
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var s vectorSuite
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if (s.Clock != "client" && s.Clock != "server") || len(s.Steps) == 0 {
			t.Fatalf("%s: bad suite", p)
		}
		s.file = filepath.Base(p)
		suites = append(suites, s)
	}
	return suites
}

func (s vectorStep) requestBytes(t testing.TB) []byte {
	b, err := hex.DecodeString(s.RequestHex)
	if err != nil {
		t.Fatalf("%s: request_hex: %v", s.Name, err)
	}
	return b
}

// expected is the step's reply as generic JSON (numbers as json.Number).
func (s vectorStep) expected(t testing.TB) map[string]interface{} {
	v := jsonGeneric(t, s.Reply)
	m, ok := v.(map[string]interface{})
	if !ok {
		t.Fatalf("%s: reply is not a map", s.Name)
	}
	return m
}

func jsonGeneric(t testing.TB, raw json.RawMessage) interface{} {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v interface{}
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// jsonOrdered reads JSON keeping each object's key order (as fields), a
// number with a fraction or exponent as a float64, any other as an int.
func jsonOrdered(dec *json.Decoder) (interface{}, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		if x == '[' {
			arr := []interface{}{}
			for dec.More() {
				v, err := jsonOrdered(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
		f := fields{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := jsonOrdered(dec)
			if err != nil {
				return nil, err
			}
			f.add(k.(string), v)
		}
		_, err := dec.Token()
		return f, err
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return x.Float64()
		}
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		return strconv.ParseUint(string(x), 10, 64)
	}
	return tok, nil
}

// decodeOrdered decodes msgpack keeping each map's key order (as fields)
// and each number's kind: int64 (uint64 beyond), float32, float64.
func decodeOrdered(data []byte) (interface{}, error) {
	r := bytes.NewReader(data)
	dec := msgpack.NewDecoder(r)
	v, err := orderedValue(dec)
	if err == nil && r.Len() != 0 {
		err = fmt.Errorf("%d trailing bytes", r.Len())
	}
	return v, err
}

func orderedValue(dec *msgpack.Decoder) (interface{}, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return nil, err
	}
	switch {
	case c == msgpcode.Float:
		return dec.DecodeFloat32()
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := dec.DecodeMapLen()
		if err != nil {
			return nil, err
		}
		f := fields{}
		for i := 0; i < n; i++ {
			k, err := dec.DecodeString()
			if err != nil {
				return nil, err
			}
			v, err := orderedValue(dec)
			if err != nil {
				return nil, err
			}
			f.add(k, v)
		}
		return f, nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return nil, err
		}
		arr := make([]interface{}, 0, minInt(n, 1024))
		for i := 0; i < n; i++ {
			v, err := orderedValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		return arr, nil
	}
	return decodeValue(dec, 0)
}

// sameOrdered compares two ordered trees exactly (key order, each value's
// kind), but for "now": the client sends its time as a float, and a vector
// may carry the same instant as an int, which the daemon reads alike.
func sameOrdered(a, b interface{}, key string) bool {
	switch x := a.(type) {
	case fields:
		y, ok := b.(fields)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].key != y[i].key || !sameOrdered(x[i].val, y[i].val, x[i].key) {
				return false
			}
		}
		return true
	case unordered:
		y, ok := b.(fields)
		if !ok || len(x) != len(y) {
			return false
		}
		for _, e := range y {
			v, has := fields(x).get(e.key)
			if !has || !sameOrdered(v, e.val, e.key) {
				return false
			}
		}
		return true
	case []interface{}:
		y, ok := b.([]interface{})
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameOrdered(x[i], y[i], "") {
				return false
			}
		}
		return true
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	if key == "now" {
		fa, oka := asNumber(a)
		fb, okb := asNumber(b)
		if oka && okb {
			return fa == fb
		}
	}
	return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) && a == b
}

// unordered marks a map whose key order sameOrdered does not compare.
type unordered fields

// number reads an int, float or json.Number as a float64 and says whether
// it is one; exact ints compare as ints.
func number(v interface{}) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float32:
		return float64(x), true
	}
	return asNumber(v)
}

// same is the README's equality: numbers by value (a bool is no number),
// maps with the same keys (or, subset, at least the expected ones).
func same(expected, actual interface{}, subset bool) bool {
	if eb, ok := expected.(bool); ok {
		ab, ok := actual.(bool)
		return ok && ab == eb
	}
	if _, ok := actual.(bool); ok {
		return false
	}
	if en, ok := number(expected); ok {
		an, ok := number(actual)
		if ej, isJSON := expected.(json.Number); isJSON {
			if ei, err := ej.Int64(); err == nil {
				if ai, isInt := actual.(int64); isInt {
					return ai == ei
				}
			}
		}
		return ok && (an == en || (math.IsNaN(an) && math.IsNaN(en)))
	}
	switch e := expected.(type) {
	case nil:
		return actual == nil
	case string:
		a, ok := actual.(string)
		return ok && a == e
	case []byte:
		a, ok := actual.([]byte)
		return ok && bytes.Equal(a, e)
	case []interface{}:
		a, ok := actual.([]interface{})
		if !ok || len(a) != len(e) {
			return false
		}
		for i := range e {
			if !same(e[i], a[i], subset) {
				return false
			}
		}
		return true
	case map[string]interface{}:
		a, ok := actual.(map[string]interface{})
		if !ok || (!subset && len(a) != len(e)) {
			return false
		}
		for k, ev := range e {
			av, present := a[k]
			if !present || !same(ev, av, subset) {
				return false
			}
		}
		return true
	}
	return false
}

// replyMatches checks a decoded reply against the step's expectation.
func replyMatches(expected map[string]interface{}, actual interface{}, compare string) bool {
	a, ok := actual.(map[string]interface{})
	if !ok {
		return false
	}
	if ee, isErr := expected["error"].(map[string]interface{}); isErr {
		rid, hasRid := expected["rid"]
		ae, ok := a["error"].(map[string]interface{})
		msg, _ := ae["message"].(string)
		_, actualRid := a["rid"]
		return ok && a["ok"] == false && ae["code"] == ee["code"] && msg != "" &&
			((hasRid && same(rid, a["rid"], false)) || (!hasRid && !actualRid))
	}
	return same(expected, actual, compare == "subset")
}

// rawPeer is a bare DEALER for sending exact bytes.
type rawPeer struct {
	t testing.TB
	s *zsock
}

func newRawPeer(t testing.TB, endpoint string) *rawPeer {
	s, err := newZsock(zmqDEALER)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.setInt(zmqLINGER, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.connect(endpoint); err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{t: t, s: s}
	t.Cleanup(s.close)
	return p
}

// exchange sends ["", payload] and answers the reply's last frame.
func (p *rawPeer) exchange(payload []byte) []byte {
	p.t.Helper()
	if err := p.s.send([][]byte{{}, payload}, 0); err != nil {
		p.t.Fatal(err)
	}
	ready, err := p.s.poll(zmqPOLLIN, 5*time.Second)
	if err != nil || ready == 0 {
		p.t.Fatalf("no reply within 5 s (%v)", err)
	}
	frames, err := p.s.recv(0)
	if err != nil {
		p.t.Fatal(err)
	}
	return frames[len(frames)-1]
}

func TestVectorCodec(t *testing.T) {
	for _, suite := range loadSuites(t) {
		for _, step := range suite.Steps {
			where := suite.file + ": " + step.Name
			if len(step.Request) > 0 {
				dec := json.NewDecoder(bytes.NewReader(step.Request))
				dec.UseNumber()
				req, err := jsonOrdered(dec)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				var buf bytes.Buffer
				err = encodeValue(msgpack.NewEncoder(&buf), req)
				packed := buf.Bytes()
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if !bytes.Equal(packed, step.requestBytes(t)) {
					t.Errorf("%s: request packs to %x, request_hex is %s", where, packed, step.RequestHex)
				}
			}
			if step.ReplyHex != "" {
				b, _ := hex.DecodeString(step.ReplyHex)
				v, err := decodeMsgpack(b)
				if err != nil || !same(step.expected(t), v, false) {
					t.Errorf("%s: reply_hex decodes to %v (%v)", where, v, err)
				}
			}
		}
	}
}

func TestVectorRaw(t *testing.T) {
	for _, suite := range loadSuites(t) {
		suite := suite
		t.Run(strings.TrimSuffix(suite.file, ".json"), func(t *testing.T) {
			d := startDaemon(t, suite.Clock)
			raw := newRawPeer(t, d.endpoint)
			for _, step := range suite.Steps {
				reply := raw.exchange(step.requestBytes(t))
				v, err := decodeMsgpack(reply)
				if err != nil || !replyMatches(step.expected(t), v, step.Compare) {
					t.Fatalf("%s: step %q: expected %s, got %v (%v)", suite.file, step.Name, step.Reply, v, err)
				}
				if step.ReplyHex != "" && hex.EncodeToString(reply) != step.ReplyHex {
					t.Fatalf("%s: step %q: reply bytes %x, reply_hex %s", suite.file, step.Name, reply, step.ReplyHex)
				}
			}
		})
	}
}
