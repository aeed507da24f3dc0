package fenceq

// The msgpack side of the protocol: requests are built as ordered lists of
// fields (the shared vectors pin every op's key order and each value's
// msgpack type), encoded with github.com/vmihailenco/msgpack/v5's primitives;
// replies are decoded into plain Go values that the typed results are read
// from.

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Payload is a job's payload as the daemon keeps it: msgpack bin, msgpack
// str, or none. Make one with Bytes or Text; the zero Payload is none.
// claim_next gives it back with the type it was enqueued with.
type Payload struct {
	data []byte
	kind payloadKind
}

type payloadKind uint8

const (
	payloadNone payloadKind = iota
	payloadBin
	payloadText
)

// Bytes is a payload sent as msgpack bin (a nil slice too: an empty bin).
func Bytes(b []byte) Payload {
	if b == nil {
		b = []byte{}
	}
	return Payload{data: b, kind: payloadBin}
}

// Text is a payload sent as msgpack str (UTF-8 text).
func Text(s string) Payload { return Payload{data: []byte(s), kind: payloadText} }

// IsNil reports whether there is no payload (nil on the wire).
func (p Payload) IsNil() bool { return p.kind == payloadNone }

// IsText reports whether the payload is a msgpack str (Text).
func (p Payload) IsText() bool { return p.kind == payloadText }

// Bytes is the payload's bytes, whether bin or str; nil for none.
func (p Payload) Bytes() []byte { return p.data }

// String is the payload's bytes as a string ("" for none).
func (p Payload) String() string { return string(p.data) }

// Len is the payload's size in bytes.
func (p Payload) Len() int { return len(p.data) }

// wire is the payload as a decoded msgpack value: nil, string or []byte.
func (p Payload) wire() interface{} {
	switch p.kind {
	case payloadBin:
		return p.data
	case payloadText:
		return string(p.data)
	}
	return nil
}

// payloadOf reads a decoded value as a Payload.
func payloadOf(v interface{}) (Payload, bool) {
	switch x := v.(type) {
	case nil:
		return Payload{}, true
	case string:
		return Text(x), true
	case []byte:
		return Bytes(x), true
	}
	return Payload{}, false
}

// kv is one field of a request map; fields keeps their order.
type kv struct {
	key string
	val interface{}
}

type fields []kv

func (f *fields) add(key string, val interface{}) { *f = append(*f, kv{key, val}) }

func (f fields) get(key string) (interface{}, bool) {
	for _, e := range f {
		if e.key == key {
			return e.val, true
		}
	}
	return nil, false
}

// seconds is a span of time as the protocol carries it: whole seconds as an
// int, anything finer as a float (what the daemon reads alike).
type seconds time.Duration

func secs(d time.Duration) seconds { return seconds(d) }

// timestamp is a point in time in Unix seconds (or the client clock's
// seconds): always a float64 on the wire, like the daemon's own times.
type timestamp float64

// unixSeconds is t as a timestamp: Unix seconds, with its fraction.
func unixSeconds(t time.Time) timestamp {
	return timestamp(float64(t.Unix()) + float64(t.Nanosecond())/1e9)
}

// nilValue is an explicit msgpack nil inside fields (a Go nil is one too;
// this one reads better where nil is a value, such as a keep_* retention).
type nilValue struct{}

// encodeRequest packs an ordered map.
func encodeRequest(f fields) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := encodeValue(enc, f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encodeValue(enc *msgpack.Encoder, v interface{}) error {
	switch x := v.(type) {
	case nil, nilValue:
		return enc.EncodeNil()
	case bool:
		return enc.EncodeBool(x)
	case string:
		return enc.EncodeString(x)
	case *string:
		if x == nil {
			return enc.EncodeNil()
		}
		return enc.EncodeString(*x)
	case []byte:
		return enc.EncodeBytes(x)
	case int:
		return enc.EncodeInt(int64(x))
	case int64:
		return enc.EncodeInt(x)
	case uint64:
		return enc.EncodeUint(x)
	case float64:
		return enc.EncodeFloat64(x)
	case timestamp:
		return enc.EncodeFloat64(float64(x))
	case seconds:
		d := time.Duration(x)
		if d%time.Second == 0 {
			return enc.EncodeInt(int64(d / time.Second))
		}
		return enc.EncodeFloat64(d.Seconds())
	case Payload:
		return encodeValue(enc, x.wire())
	case []string:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, s := range x {
			if err := enc.EncodeString(s); err != nil {
				return err
			}
		}
		return nil
	case map[string]string:
		return encodeHeaders(enc, x)
	case fields:
		if err := enc.EncodeMapLen(len(x)); err != nil {
			return err
		}
		for _, e := range x {
			if err := enc.EncodeString(e.key); err != nil {
				return err
			}
			if err := encodeValue(enc, e.val); err != nil {
				return err
			}
		}
		return nil
	case []interface{}:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, e := range x {
			if err := encodeValue(enc, e); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("fenceq: cannot encode a %T", v)
}

// encodeHeaders packs headers with their keys sorted, so that the same
// headers are always the same bytes.
func encodeHeaders(enc *msgpack.Encoder, h map[string]string) error {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if err := enc.EncodeMapLen(len(keys)); err != nil {
		return err
	}
	for _, k := range keys {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := enc.EncodeString(h[k]); err != nil {
			return err
		}
	}
	return nil
}

// decodeMsgpack decodes one whole msgpack value into nil, bool, int64
// (uint64 beyond int64), float64, string, []byte, []interface{} or
// map[string]interface{}; trailing bytes, extension types and map keys that
// are not str are errors.
func decodeMsgpack(data []byte) (interface{}, error) {
	r := bytes.NewReader(data)
	dec := msgpack.NewDecoder(r)
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", r.Len())
	}
	return v, nil
}

// maxDepth bounds the nesting a reply may have (the daemon's are shallow).
const maxDepth = 64

func decodeValue(dec *msgpack.Decoder, depth int) (interface{}, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	c, err := dec.PeekCode()
	if err != nil {
		return nil, err
	}
	switch {
	case c == msgpcode.Nil:
		return nil, dec.DecodeNil()
	case c == msgpcode.True || c == msgpcode.False:
		return dec.DecodeBool()
	case msgpcode.IsFixedNum(c) || c == msgpcode.Int8 || c == msgpcode.Int16 ||
		c == msgpcode.Int32 || c == msgpcode.Int64 || c == msgpcode.Uint8 ||
		c == msgpcode.Uint16 || c == msgpcode.Uint32:
		return dec.DecodeInt64()
	case c == msgpcode.Uint64:
		u, err := dec.DecodeUint64()
		if err != nil || u > math.MaxInt64 {
			return u, err
		}
		return int64(u), nil
	case c == msgpcode.Float || c == msgpcode.Double:
		return dec.DecodeFloat64()
	case msgpcode.IsString(c):
		return dec.DecodeString()
	case msgpcode.IsBin(c):
		return dec.DecodeBytes()
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return decodeArray(dec, depth)
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return decodeMap(dec, depth)
	}
	return nil, fmt.Errorf("unexpected msgpack code 0x%02x", c)
}

func decodeArray(dec *msgpack.Decoder, depth int) (interface{}, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	out := make([]interface{}, 0, minInt(n, 1024))
	for i := 0; i < n; i++ {
		v, err := decodeValue(dec, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func decodeMap(dec *msgpack.Decoder, depth int) (interface{}, error) {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	out := make(map[string]interface{}, minInt(n, 1024))
	for i := 0; i < n; i++ {
		c, err := dec.PeekCode()
		if err != nil {
			return nil, err
		}
		if !msgpcode.IsString(c) {
			return nil, fmt.Errorf("a map key that is not a str (code 0x%02x)", c)
		}
		k, err := dec.DecodeString()
		if err != nil {
			return nil, err
		}
		v, err := decodeValue(dec, depth+1)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// The readers below take one decoded value; ok is false for the wrong type.

func asMap(v interface{}) (map[string]interface{}, bool) {
	m, ok := v.(map[string]interface{})
	return m, ok
}

func asInt(v interface{}) (int64, bool) {
	i, ok := v.(int64)
	return i, ok
}

// asNumber reads an int or a float as a float64 (the daemon's times and
// ratios are floats; an int is read as the same number).
func asNumber(v interface{}) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func asString(v interface{}) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// asOptString reads a str or nil.
func asOptString(v interface{}) (*string, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case string:
		return &x, true
	}
	return nil, false
}

func asBool(v interface{}) (bool, bool) {
	b, ok := v.(bool)
	return b, ok
}

func asStrings(v interface{}) ([]string, bool) {
	a, ok := v.([]interface{})
	if !ok {
		return nil, false
	}
	out := make([]string, len(a))
	for i, e := range a {
		if out[i], ok = e.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

func asHeaders(v interface{}) (map[string]string, bool) {
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}
