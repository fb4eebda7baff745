package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The differential test of the fast path against protojson, over every
// message type of the test protos (test.protoset, fast.proto's Plain and
// Fancy, and rich.proto, the benchmark's shapes): for any input the fast
// path either gives up, or does exactly what protojson does.
//
// Params: when the fast path takes them, protojson accepts them too and
// makes the same message; and the codec's answer (fast path or not) is the
// general path's answer, the same message or the same error.
//
// Results: when the fast path renders wire bytes, proto.Unmarshal and
// protojson accept them too, and the JSON is protojson's, byte for byte
// (without protojson's random spaces) when the fields come in field-number
// order and the messages declare them in that order, the same JSON value
// otherwise.

// diffType is one message type under test.
type diffType struct {
	md      protoreflect.MessageDescriptor
	pl      *plan
	ordered bool // every message reachable declares its fields in number order
}

func diffTypes(tb testing.TB) []diffType {
	tb.Helper()
	var mds []protoreflect.MessageDescriptor
	var add func(msgs protoreflect.MessageDescriptors)
	add = func(msgs protoreflect.MessageDescriptors) {
		for i := range msgs.Len() {
			if md := msgs.Get(i); !md.IsMapEntry() {
				mds = append(mds, md)
				add(md.Messages())
			}
		}
	}
	bk := loadBackend(tb)
	bk.files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "google.protobuf" {
			add(fd.Messages())
		}
		return true
	})
	add(compileFast(tb).Messages())
	add(richFile(tb).Messages())
	var out []diffType
	for _, md := range mds {
		if pl, _ := newPlan(md); pl != nil {
			out = append(out, diffType{md, pl, numberOrdered(md, map[protoreflect.FullName]bool{})})
		}
	}
	if len(out) < 10 {
		tb.Fatalf("only %d message types have a fast path", len(out))
	}
	return out
}

// numberOrdered reports whether md and every message it reaches declare
// their fields in the order of their numbers.
func numberOrdered(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return true
	}
	seen[md.FullName()] = true
	fds := md.Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if i > 0 && fds.Get(i-1).Number() > fd.Number() {
			return false
		}
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if fd.Message() != nil && !numberOrdered(fd.Message(), seen) {
			return false
		}
	}
	return true
}

// canonicalWire rewrites the wire message b of md with its fields (and
// those of the messages inside) in field-number order, as generated code
// writes them. Unknown or malformed input is returned as is.
func canonicalWire(md protoreflect.MessageDescriptor, b []byte) []byte {
	type span struct {
		num protowire.Number
		b   []byte
	}
	var fields []span
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return b
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if m < 0 {
			return b
		}
		field := rest[:n+m]
		if fd := md.Fields().ByNumber(num); fd != nil && typ == protowire.BytesType && fd.Message() != nil {
			v, _ := protowire.ConsumeBytes(rest[n:])
			field = protowire.AppendBytes(protowire.AppendTag(nil, num, typ), canonicalWire(fd.Message(), v))
		}
		fields = append(fields, span{num, field})
		rest = rest[n+m:]
	}
	slices.SortStableFunc(fields, func(a, b span) int { return int(a.num) - int(b.num) })
	var out []byte
	for _, f := range fields {
		out = append(out, f.b...)
	}
	return out
}

// diffRequest checks the fast path on params for message type dt.
func diffRequest(t testing.TB, dt diffType, params []byte) bool {
	t.Helper()
	wire, ok, _ := dt.pl.appendRequestWhy(nil, params)
	slow := dynamicpb.NewMessage(dt.md)
	slowErr := protojson.Unmarshal(params, slow)
	if !ok {
		return false
	}
	if slowErr != nil {
		t.Fatalf("%s %s: the fast path accepted what protojson refuses: %v", dt.md.FullName(), params, slowErr)
	}
	fast := dynamicpb.NewMessage(dt.md)
	if err := proto.Unmarshal(wire, fast); err != nil {
		t.Fatalf("%s %s: the fast path wrote bad wire bytes: %v", dt.md.FullName(), params, err)
	}
	if !proto.Equal(fast, slow) {
		t.Fatalf("%s %s: the fast path made %v, protojson %v", dt.md.FullName(), params, fast, slow)
	}
	// The message back to JSON, in generated code's field order.
	canon, err := proto.Marshal(slow)
	if err != nil {
		t.Fatal(err)
	}
	diffResult(t, dt, canonicalWire(dt.md, canon), true)
	return true
}

// diffResult checks the fast path on the wire bytes of a dt message;
// canonical says they are in field-number order.
func diffResult(t testing.TB, dt diffType, wire []byte, canonical bool) bool {
	t.Helper()
	fast, ok, _ := dt.pl.appendResultWhy(nil, wire)
	m := dynamicpb.NewMessage(dt.md)
	unmarshalErr := unmarshalWire(proto.UnmarshalOptions{}, wire, m)
	var slow []byte
	var marshalErr error
	if unmarshalErr == nil {
		slow, marshalErr = protojson.Marshal(m)
	}
	if !ok {
		return false
	}
	if unmarshalErr != nil || marshalErr != nil {
		t.Fatalf("%s %x: the fast path rendered %s, protojson fails: %v %v", dt.md.FullName(), wire, fast, unmarshalErr, marshalErr)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, slow); err != nil {
		t.Fatal(err)
	}
	if canonical && dt.ordered {
		if !bytes.Equal(fast, compact.Bytes()) {
			t.Fatalf("%s %x:\nfast      %s\nprotojson %s", dt.md.FullName(), wire, fast, compact.Bytes())
		}
	} else if !sameJSON(t, fast, compact.Bytes()) {
		t.Fatalf("%s %x:\nfast      %s\nprotojson %s", dt.md.FullName(), wire, fast, compact.Bytes())
	}
	return true
}

// fillAny sets random fields of m, well-known types and maps included,
// now and then with values protojson refuses to write (out of range).
func fillAny(r *rand.Rand, m protoreflect.Message, depth int) {
	md := m.Descriptor()
	if wellKnown(md.FullName()) != wktNone {
		fillWellKnown(r, m, depth)
		return
	}
	fds := md.Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if r.IntN(3) == 0 || (fd.Message() != nil && depth > 3) {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range r.IntN(4) {
				k := randomScalar(r, fd.MapKey()).MapKey()
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					fillAny(r, v.Message(), depth+1)
					mp.Set(k, v)
				} else {
					mp.Set(k, randomScalar(r, fd.MapValue()))
				}
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range r.IntN(4) {
				if fd.Message() != nil {
					e := l.NewElement()
					fillAny(r, e.Message(), depth+1)
					l.Append(e)
				} else {
					l.Append(randomScalar(r, fd))
				}
			}
		case fd.Message() != nil:
			fillAny(r, m.Mutable(fd).Message(), depth+1)
		default:
			m.Set(fd, randomScalar(r, fd))
		}
	}
}

func fillWellKnown(r *rand.Rand, m protoreflect.Message, depth int) {
	fds := m.Descriptor().Fields()
	set := func(num protowire.Number, v protoreflect.Value) { m.Set(fds.ByNumber(num), v) }
	bad := r.IntN(100) == 0
	switch wellKnown(m.Descriptor().FullName()) {
	case wktTimestamp:
		secs := r.Int64N(maxTimestampSeconds-minTimestampSeconds) + minTimestampSeconds
		nanos := []int32{0, 5e8, 123e6, 456789e3, 999999999, 1}[r.IntN(6)]
		if bad {
			secs, nanos = []int64{maxTimestampSeconds + 1, minTimestampSeconds - 1, 0}[r.IntN(3)], []int32{0, -1, 1e9}[r.IntN(3)]
		}
		set(1, protoreflect.ValueOfInt64(secs))
		set(2, protoreflect.ValueOfInt32(nanos))
	case wktDuration:
		secs := r.Int64N(2*maxDurationSeconds) - maxDurationSeconds
		nanos := []int32{0, 5e8, 123e6, 456789e3, 999999999, 1}[r.IntN(6)]
		if secs < 0 || (secs == 0 && r.IntN(2) == 0) {
			nanos = -nanos
		}
		if bad {
			secs, nanos = []int64{maxDurationSeconds + 1, 5, -5}[r.IntN(3)], []int32{-1, 1, 1e9}[r.IntN(3)]
		}
		set(1, protoreflect.ValueOfInt64(secs))
		set(2, protoreflect.ValueOfInt32(nanos))
	case wktWrapper:
		if r.IntN(4) != 0 {
			set(1, randomScalar(r, fds.ByNumber(1)))
		}
	case wktStruct:
		mp := m.Mutable(fds.ByNumber(1)).Map()
		for range r.IntN(4) {
			v := mp.NewValue()
			fillWellKnown(r, v.Message(), depth+1)
			mp.Set(randomScalar(r, fds.ByNumber(1).MapKey()).MapKey(), v)
		}
	case wktList:
		l := m.Mutable(fds.ByNumber(1)).List()
		for range r.IntN(4) {
			e := l.NewElement()
			fillWellKnown(r, e.Message(), depth+1)
			l.Append(e)
		}
	case wktValue:
		kind := r.IntN(6) + 1
		if depth > 4 && kind >= 5 {
			kind = 3
		}
		if bad {
			if r.IntN(2) == 0 {
				return // no kind
			}
			set(2, protoreflect.ValueOfFloat64(math.NaN()))
			return
		}
		fd := fds.ByNumber(protowire.Number(kind))
		switch kind {
		case 1:
			set(1, protoreflect.ValueOfEnum(0))
		case 2:
			set(2, protoreflect.ValueOfFloat64([]float64{0, -1.5, 3, 1e21, 2.5e-10, 1e300}[r.IntN(6)]))
		case 5, 6:
			fillWellKnown(r, m.Mutable(fd).Message(), depth+1)
		default:
			set(protowire.Number(kind), randomScalar(r, fd))
		}
	}
}

// diffSeeds are params the fuzz targets start from: the payloads, and the
// JSON of random messages of every type.
func diffSeeds(tb testing.TB, types []diffType) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"small", "large", "wkt"} {
		b, err := os.ReadFile("testdata/payloads/" + name + ".json")
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 3 {
		for _, dt := range types {
			m := dynamicpb.NewMessage(dt.md)
			fillAny(r, m, 0)
			if js, err := protojson.Marshal(m); err == nil {
				seeds = append(seeds, js)
			}
		}
	}
	return seeds
}

// pick chooses the message type of a fuzz input from its first byte.
func pick(types []diffType, data []byte) (diffType, []byte) {
	if len(data) == 0 {
		return types[0], data
	}
	return types[int(data[0])%len(types)], data[1:]
}

func TestFastDiffRandom(t *testing.T) {
	types := diffTypes(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range types {
		fastIn, fastOut, n := 0, 0, 150
		for i := range n {
			m := dynamicpb.NewMessage(dt.md)
			fillAny(r, m, 0)
			wire, err := proto.MarshalOptions{Deterministic: i%2 == 0}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if diffResult(t, dt, canonicalWire(dt.md, wire), true) {
				fastOut++
			}
			diffResult(t, dt, wire, false)
			if js, err := protojson.Marshal(m); err == nil && diffRequest(t, dt, js) {
				fastIn++
			}
		}
		// Well-known types protojson refuses to write (1 in 100 random
		// ones) send a message back to the general path, and JSON
		// requests with them cannot be made: the fast path should take
		// most of the rest.
		if fastOut < n/2 || fastIn < n/2 {
			t.Errorf("%s: the fast path took %d of %d results and %d requests, want most", dt.md.FullName(), fastOut, n, fastIn)
		}
	}
}

// FuzzFastDiffRequest: params of a message type (chosen by the first
// byte) through the fast path and protojson.
func FuzzFastDiffRequest(f *testing.F) {
	types := diffTypes(f)
	for _, s := range diffSeeds(f, types) {
		for i := range types {
			if i%7 == 0 {
				f.Add(append([]byte{byte(i)}, s...))
			}
		}
	}
	for i, dt := range types {
		if dt.md.Name() == "EchoRichRequest" || dt.md.Name() == "Fancy" {
			f.Add(append([]byte{byte(i)}, `{"attributes":{"a":[1,null,{"b":"\u00e9\ud83d\ude80"}]},"labels":{"k":"v"},"createdAt":"2026-01-02T03:04:05.120Z","ttl":"-0.5s","m_i32":{"-7":{}},"m_bool":{"true":"x"}}`...))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dt, params := pick(types, data)
		diffRequest(t, dt, params)
	})
}

// FuzzFastDiffResult: wire bytes of a message type (chosen by the first
// byte) through the fast path and protojson.
func FuzzFastDiffResult(f *testing.F) {
	types := diffTypes(f)
	r := rand.New(rand.NewPCG(9, 10))
	for i, dt := range types {
		for range 2 {
			m := dynamicpb.NewMessage(dt.md)
			fillAny(r, m, 0)
			wire, _ := proto.Marshal(m)
			f.Add(append([]byte{byte(i)}, canonicalWire(dt.md, wire)...))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dt, wire := pick(types, data)
		canonical := bytes.Equal(canonicalWire(dt.md, wire), wire)
		diffResult(t, dt, wire, canonical)
	})
}

// TestFastDiffCodecErrors checks that the codec's answer to params is the
// general path's answer, whether the fast path took them or not: the same
// message, or the same *Error (code, message and data).
func TestFastDiffCodecErrors(t *testing.T) {
	svc := richFile(t).Services().ByName("EchoService")
	c := NewCodec(svc.Methods().ByName("EchoRich"), NewResolver(nil), Options{})
	for _, params := range []string{
		`{"id":"a","labels":{"k":1}}`, `{"createdAt":"2026-13-01T00:00:00Z"}`, `{"ttl":"1.0000000001s"}`,
		`{"attributes":{"a":NaN}}`, `{"items":[null]}`, `{"hops":{"a":null}}`, `{"labels":{"a":"b","a":"c"}}`,
		`{"blob":"!!"}`, `{"note":1}`, `{"revision":"1.5"}`, `{"ratio":"Infinity"}`, `{"samples":["NaN",1]}`,
		`{"userEmail":"a","accountId":"1"}`, `{"userEmail":null,"accountId":"1"}`, `{"priority":9}`, `{"bigUnsigned":-1}`,
	} {
		wire, e := c.AppendRequest(nil, []byte(params))
		m, want := c.Request([]byte(params))
		switch {
		case (e == nil) != (want == nil):
			t.Errorf("%s: got error %v, the general path %v", params, e, want)
		case e != nil:
			if e.Code != want.Code || e.Message != want.Message || !bytes.Equal(e.Data, want.Data) || !errors.Is(error(e), error(want)) {
				t.Errorf("%s: got %+v, the general path %+v", params, e, want)
			}
		default:
			got := dynamicpb.NewMessage(c.in.Descriptor())
			if err := proto.Unmarshal(wire, got); err != nil || !proto.Equal(got, m) {
				t.Errorf("%s: got %v (%v), the general path %v", params, got, err, m)
			}
		}
	}
}

// TestResultWirePanic: wire bytes that make proto.Unmarshal panic are an
// error of AppendResultWire, not a panic.
func TestResultWirePanic(t *testing.T) {
	c := NewCodec(richFile(t).Services().ByName("EchoService").Methods().ByName("EchoRich"), NewResolver(nil), Options{})
	// labels (7): an entry whose key (1) comes as a string, then as a varint
	wire := []byte{7<<3 | 2, 5, 1<<3 | 2, 1, 'k', 1 << 3, 1}
	if out, err := c.AppendResultWire(nil, wire); err == nil {
		t.Fatalf("got %s and no error", out)
	}
}

// TestFallbacksCounted: what the fast path leaves to the general path is
// counted under its direction and reason.
func TestFallbacksCounted(t *testing.T) {
	c := NewCodec(richFile(t).Services().ByName("EchoService").Methods().ByName("EchoRich"), NewResolver(nil), Options{})
	count := func(dir Direction, reason string) uint64 {
		for _, f := range Fallbacks() {
			if f.Direction == dir && f.Reason == reason {
				return f.Count
			}
		}
		return 0
	}
	tests := []struct {
		name   string
		dir    Direction
		reason string
		run    func(t *testing.T)
	}{
		{"time zone offset", DirRequest, "well-known-type", func(t *testing.T) {
			if _, e := c.AppendRequest(nil, []byte(`{"createdAt":"2026-01-01T00:00:00+01:00"}`)); e != nil {
				t.Fatal(e)
			}
		}},
		{"unknown field", DirRequest, "field", func(t *testing.T) {
			if _, e := c.AppendRequest(nil, []byte(`{"nope":1}`)); e == nil {
				t.Fatal("got no error")
			}
		}},
		{"int with a fraction", DirRequest, "number", func(t *testing.T) {
			if _, e := c.AppendRequest(nil, []byte(`{"revision":"1.0"}`)); e != nil {
				t.Fatal(e) // protojson takes it: 1
			}
		}},
		{"Value NaN", DirResult, "range", func(t *testing.T) {
			// attributes (4) {"a": number_value NaN}
			v := protowire.AppendFixed64([]byte{2<<3 | 1}, math.Float64bits(math.NaN()))
			entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("a"))
			entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), v)
			st := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)
			wire := protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), st)
			if _, err := c.AppendResultWire(nil, wire); err == nil {
				t.Fatal("got no error") // protojson refuses NaN in a Value
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := count(tt.dir, tt.reason)
			tt.run(t)
			if got := count(tt.dir, tt.reason); got != before+1 {
				t.Errorf("%s %s: count went from %d to %d, want +1", tt.dir, tt.reason, before, got)
			}
		})
	}
}
