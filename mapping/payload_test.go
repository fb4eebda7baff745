package mapping

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The side-by-side benchmark's three request shapes (../shared/bench,
// "bench payloads --json NAME", in testdata/payloads) through the codecs
// of proto/testpb/rich/rich.proto, its service compiled at run time as the
// bridge sees a backend's types.

// richFile compiles proto/testpb/rich/rich.proto.
func richFile(tb testing.TB) protoreflect.FileDescriptor {
	tb.Helper()
	src, err := os.ReadFile("../proto/testpb/rich/rich.proto")
	if err != nil {
		tb.Fatal(err)
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"rich.proto": string(src)}),
	})}
	files, err := c.Compile(context.Background(), "rich.proto")
	if err != nil {
		tb.Fatal(err)
	}
	return files[0]
}

// payloadCase is one request shape: its codec, params, request wire bytes
// and the backend's response to it (the request and servedBy).
type payloadCase struct {
	name     string
	codec    *Codec
	params   []byte
	request  []byte
	response []byte
}

func payloadCases(tb testing.TB) []payloadCase {
	tb.Helper()
	svc := richFile(tb).Services().ByName("EchoService")
	var out []payloadCase
	for _, p := range []struct {
		name, method string
		servedBy     protowire.Number
	}{{"small", "Echo", 6}, {"large", "Echo", 6}, {"wkt", "EchoRich", 19}} {
		params, err := os.ReadFile("testdata/payloads/" + p.name + ".json")
		if err != nil {
			tb.Fatal(err)
		}
		c := NewCodec(svc.Methods().ByName(protoreflect.Name(p.method)), NewResolver(nil), Options{})
		wire, jerr := c.AppendRequest(nil, params)
		if jerr != nil {
			tb.Fatal(jerr)
		}
		// The backend (a Go server) answers with the request's fields in
		// order and servedBy last.
		m := dynamicpb.NewMessage(c.out.Descriptor())
		if err := proto.Unmarshal(wire, m); err != nil {
			tb.Fatal(err)
		}
		resp, err := proto.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		resp = canonicalWire(m.Descriptor(), resp)
		resp = protowire.AppendTag(resp, p.servedBy, protowire.BytesType)
		resp = protowire.AppendString(resp, "bench-backend")
		out = append(out, payloadCase{p.name, c, params, wire, resp})
	}
	return out
}

// TestPayloadsFastPath checks that each shape takes the fast path both
// ways, that the request is protojson's message and that the result is
// protojson's output byte for byte.
func TestPayloadsFastPath(t *testing.T) {
	for _, pc := range payloadCases(t) {
		t.Run(pc.name, func(t *testing.T) {
			c := pc.codec
			if in, out := c.FastPath(); in != "" || out != "" {
				t.Fatalf("no fast path: request %q, result %q", in, out)
			}
			wire, ok, why := c.inPlan.appendRequestWhy(nil, pc.params)
			if !ok {
				t.Fatalf("request: the fast path gave up (%s)", why)
			}
			fast := dynamicpb.NewMessage(c.in.Descriptor())
			if err := proto.Unmarshal(wire, fast); err != nil {
				t.Fatal(err)
			}
			slow := dynamicpb.NewMessage(c.in.Descriptor())
			if err := protojson.Unmarshal(pc.params, slow); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(fast, slow) {
				t.Fatalf("request: fast path made %v, protojson %v", fast, slow)
			}
			got, ok, why := c.outPlan.appendResultWhy(nil, pc.response)
			if !ok {
				t.Fatalf("result: the fast path gave up (%s)", why)
			}
			m := dynamicpb.NewMessage(c.out.Descriptor())
			if err := proto.Unmarshal(pc.response, m); err != nil {
				t.Fatal(err)
			}
			want := compactProtojson(t, m)
			if !bytes.Equal(got, want) {
				t.Fatalf("result:\nfast      %s\nprotojson %s", got, want)
			}
		})
	}
}

// compactProtojson is protojson's output for m without the spaces it
// inserts at random.
func compactProtojson(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	js, err := protojson.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, js); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// TestPayloadAllocationBudget keeps both mapping steps of every shape free
// of allocations once the output buffer has grown.
func TestPayloadAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; .ci/run checks budgets without it")
	}
	for _, pc := range payloadCases(t) {
		buf := make([]byte, 0, 64<<10)
		for _, step := range []struct {
			name string
			run  func()
		}{
			{"AppendRequest", func() { buf, _ = pc.codec.AppendRequest(buf[:0], pc.params) }},
			{"AppendResultWire", func() { buf, _ = pc.codec.AppendResultWire(buf[:0], pc.response) }},
		} {
			t.Run(pc.name+"/"+step.name, func(t *testing.T) {
				if got := testing.AllocsPerRun(200, step.run); got > 0 {
					t.Errorf("got %.1f allocations per call, want 0", got)
				}
			})
		}
	}
}

// BenchmarkPayload is each shape's params to wire bytes (request) and
// response wire bytes to JSON (result), the two mapping steps of a call.
func BenchmarkPayload(b *testing.B) {
	for _, pc := range payloadCases(b) {
		b.Run(pc.name+"/request", func(b *testing.B) {
			buf := make([]byte, 0, 64<<10)
			b.SetBytes(int64(len(pc.params)))
			b.ReportAllocs()
			for b.Loop() {
				var jerr *Error
				if buf, jerr = pc.codec.AppendRequest(buf[:0], pc.params); jerr != nil {
					b.Fatal(jerr)
				}
			}
		})
		b.Run(pc.name+"/result", func(b *testing.B) {
			buf := make([]byte, 0, 64<<10)
			b.SetBytes(int64(len(pc.response)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = pc.codec.AppendResultWire(buf[:0], pc.response); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
