package mapping

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/echo"
)

const benchParams = `{"fString": "hello", "fInt32": 42, "fInt64": "9000000000", "fBool": true, "fMessage": {"name": "n"}}`

func BenchmarkRequest(b *testing.B) {
	bk := loadBackend(b)
	c := NewCodec(bk.method(b, "test.v1.TestService.Echo"), NewResolver(bk.types), Options{})
	params := []byte(benchParams)
	b.ReportAllocs()
	for b.Loop() {
		if _, jerr := c.Request(params); jerr != nil {
			b.Fatal(jerr)
		}
	}
}

func BenchmarkAppendResult(b *testing.B) {
	bk := loadBackend(b)
	c := NewCodec(bk.method(b, "test.v1.TestService.Echo"), NewResolver(bk.types), Options{})
	m, jerr := c.Request([]byte(benchParams))
	if jerr != nil {
		b.Fatal(jerr)
	}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.AppendResult(buf[:0], m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRequestInvalid(b *testing.B) {
	c := NewCodec(generatedEcho(), NewResolver(nil), Options{})
	params := []byte(`{"fString": "hello", "fMessage": {"name": 1}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, jerr := c.Request(params); jerr == nil {
			b.Fatal("got no error")
		}
	}
}

// echoParams is the side-by-side benchmark's request: a string, an int64,
// a repeated string, a nested message and an enum.
const echoParams = `{"message":"hello from bench","sequence":"1234567890123","tags":["alpha","beta","gamma","delta"],"metadata":{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","clientName":"bench-load","attempt":1},"priority":"PRIORITY_HIGH"}`

// echoParamsByPosition is echoParams by position.
const echoParamsByPosition = `["hello from bench","1234567890123",["alpha","beta","gamma","delta"],{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","clientName":"bench-load","attempt":1},"PRIORITY_HIGH"]`

// fastCase is bench.v1.EchoService.Echo's codec and a request it takes on
// the fast path, with that request's wire bytes.
func fastCase(tb testing.TB) (*Codec, []byte, []byte) {
	md := echo.File_testpb_echo_echo_proto.Services().Get(0).Methods().ByName("Echo")
	c := NewCodec(md, NewResolver(new(protoregistry.Types)), Options{})
	if c.inPlan == nil || c.outPlan == nil {
		tb.Fatal("Echo has no fast path")
	}
	params := []byte(echoParams)
	wire, jerr := c.AppendRequest(nil, params)
	if jerr != nil {
		tb.Fatal(jerr)
	}
	return c, params, wire
}

// BenchmarkAppendRequest is params to wire bytes on the fast path.
func BenchmarkAppendRequest(b *testing.B) {
	c, params, _ := fastCase(b)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var jerr *Error
		if buf, jerr = c.AppendRequest(buf[:0], params); jerr != nil {
			b.Fatal(jerr)
		}
	}
}

// BenchmarkAppendResultWire is wire bytes to JSON on the fast path.
func BenchmarkAppendResultWire(b *testing.B) {
	c, _, wire := fastCase(b)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.AppendResultWire(buf[:0], wire); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFastPathAllocationBudget keeps the per-call mapping work of the hot
// path free of allocations once its buffers have grown: params to wire
// bytes, and wire bytes to the result's JSON.
func TestFastPathAllocationBudget(t *testing.T) {
	c, params, wire := fastCase(t)
	buf := make([]byte, 0, 1024)
	byPosition := []byte(echoParamsByPosition)
	if got, e := c.AppendRequest(nil, byPosition); e != nil || !bytes.Equal(got, wire) {
		t.Fatalf("by position: got %x %v, want %x", got, e, wire)
	}
	tests := []struct {
		name   string
		budget float64
		run    func()
	}{
		{"AppendRequest", 0, func() { buf, _ = c.AppendRequest(buf[:0], params) }},
		{"AppendRequest by position", 0, func() { buf, _ = c.AppendRequest(buf[:0], byPosition) }},
		{"AppendResultWire", 0, func() { buf, _ = c.AppendResultWire(buf[:0], wire) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(200, tt.run); got > tt.budget {
				t.Errorf("got %.1f allocations per call, want at most %.0f", got, tt.budget)
			}
		})
	}
}

// BenchmarkAppendRequestByPosition is BenchmarkAppendRequest with the same
// params by position.
func BenchmarkAppendRequestByPosition(b *testing.B) {
	c, _, _ := fastCase(b)
	params := []byte(echoParamsByPosition)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var jerr *Error
		if buf, jerr = c.AppendRequest(buf[:0], params); jerr != nil {
			b.Fatal(jerr)
		}
	}
}
