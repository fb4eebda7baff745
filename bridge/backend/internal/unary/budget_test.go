package unary

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

// manyHandler answers "/test.Svc/Many" with a request "n,size[,code]":
// n messages pattern(size+i), then the status code (0 by default).
func manyHandler(_ any, ss grpc.ServerStream) error {
	var req rawMsg
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	f := strings.Split(string(req.b), ",")
	n, _ := strconv.Atoi(f[0])
	size, _ := strconv.Atoi(f[1])
	for i := range n {
		if err := ss.SendMsg(&rawMsg{pattern(size + i)}); err != nil {
			return err
		}
	}
	if len(f) > 2 {
		code, _ := strconv.Atoi(f[2])
		return status.Errorf(codes.Code(code), "failed after %d", n)
	}
	return nil
}

func startMany(t *testing.T) *Client {
	t.Helper()
	target := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Server: []grpc.ServerOption{grpc.UnknownServiceHandler(manyHandler), grpc.ForceServerCodecV2(passCodec{})},
		Services: testserver.NoServices, Reflection: testserver.ReflectionNone, NoConn: true}).Addr()
	return newClient(t, target, Options{})
}

func messages(call *Call) [][]byte {
	var out [][]byte
	call.Messages(func(m []byte) bool {
		out = append(out, m)
		return true
	})
	return out
}

// TestStream collects the messages of server-streaming calls.
func TestStream(t *testing.T) {
	t.Parallel()
	c := startMany(t)
	tests := []struct {
		req  string
		n    int
		size int
		code codes.Code
	}{
		{"0,0", 0, 0, codes.OK},
		{"1,0", 1, 0, codes.OK},
		{"3,10", 3, 10, codes.OK},
		{"3,1048576", 3, 1 << 20, codes.OK},
		{"2,10,9", 0, 0, codes.FailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.req, func(t *testing.T) {
			call := &Call{Method: "/test.Svc/Many", Request: []byte(tt.req), Stream: true}
			err := c.Invoke(t.Context(), call)
			wantCode(t, err, tt.code)
			if err != nil {
				return
			}
			got := messages(call)
			if len(got) != tt.n {
				t.Fatalf("%d messages, want %d", len(got), tt.n)
			}
			for i, m := range got {
				if !bytes.Equal(m, pattern(tt.size+i)) {
					t.Fatalf("message %d: %d bytes, want %d", i, len(m), tt.size+i)
				}
			}
			if want := int64(tt.n*tt.size + tt.n*(tt.n-1)/2); call.Reserved != want {
				t.Errorf("Reserved %d, want %d: the bytes of the messages", call.Reserved, want)
			}
		})
	}
	// Without Stream, a second message is an error, as before.
	call := &Call{Method: "/test.Svc/Many", Request: []byte("2,10")}
	wantCode(t, c.Invoke(t.Context(), call), codes.Internal)
}

// TestStreamMaxMessages ends a stream with more messages than MaxMessages
// allows, and the connection goes on.
func TestStreamMaxMessages(t *testing.T) {
	t.Parallel()
	c := startMany(t)
	call := &Call{Method: "/test.Svc/Many", Request: []byte("3,10"), Stream: true, MaxMessages: 3}
	if err := c.Invoke(t.Context(), call); err != nil || len(messages(call)) != 3 {
		t.Fatalf("at the limit: %d messages, %v", len(messages(call)), err)
	}
	call = &Call{Method: "/test.Svc/Many", Request: []byte("4,10"), Stream: true, MaxMessages: 3}
	if err := c.Invoke(t.Context(), call); !errors.Is(err, ErrTooManyMessages) {
		t.Fatalf("past the limit: got %v, want ErrTooManyMessages", err)
	}
	call = &Call{Method: "/test.Svc/Many", Request: []byte("1,10"), Stream: true}
	if err := c.Invoke(t.Context(), call); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if n := connCount(c); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestLimit refuses a response, or the message of a stream, that would
// take the call past Limit, as soon as its length is known.
func TestLimit(t *testing.T) {
	t.Parallel()
	c := startMany(t)
	tests := []struct {
		req      string
		stream   bool
		limit    int64
		err      error
		reserved int64
	}{
		{"1,1000", false, 1000, nil, 1000},
		{"1,1001", false, 1000, ErrOverBudget, 0},
		{"3,1000", true, 3003, nil, 3003},
		{"3,1000", true, 3002, ErrOverBudget, 2001},
		{"1,4000000", false, 1000, ErrOverBudget, 0},
	}
	for _, tt := range tests {
		call := &Call{Method: "/test.Svc/Many", Request: []byte(tt.req), Stream: tt.stream, Limit: tt.limit}
		if err := c.Invoke(t.Context(), call); !errors.Is(err, tt.err) {
			t.Errorf("%s with limit %d: got %v, want %v", tt.req, tt.limit, err, tt.err)
		}
		if call.Reserved != tt.reserved {
			t.Errorf("%s with limit %d: Reserved %d, want %d", tt.req, tt.limit, call.Reserved, tt.reserved)
		}
	}
}

// TestBudget shares a budget between the calls of a Group: the responses
// that fit take their share, the others fail before they are kept.
func TestBudget(t *testing.T) {
	t.Parallel()
	c := startMany(t)
	var budget atomic.Int64
	budget.Store(10_000)
	var g Group
	calls := make([]*Call, 10)
	for i := range calls {
		calls[i] = &Call{Method: "/test.Svc/Many", Request: []byte("1,3000"), Budget: &budget}
		if i%2 == 1 {
			calls[i].Request, calls[i].Stream = []byte("3,1000"), true
		}
		g.Start(t.Context(), c, calls[i])
	}
	g.Wait(t.Context())
	var ok, reserved int64
	for i, call := range calls {
		switch {
		case call.Err == nil:
			ok++
		case !errors.Is(call.Err, ErrOverBudget):
			t.Errorf("call %d: %v, want success or ErrOverBudget", i, call.Err)
		}
		reserved += call.Reserved
	}
	if left := budget.Load(); left < 0 || left+reserved != 10_000 {
		t.Errorf("budget left %d, reserved %d, want them to add up to 10000", left, reserved)
	}
	if ok < 3 || ok == int64(len(calls)) {
		t.Errorf("%d calls fit, want at least 3, not all", ok)
	}
	// A call made again gives back what its earlier attempt reserved.
	call := calls[0]
	before := budget.Load() + call.Reserved
	call.Budget = &budget
	call.Request, call.Stream = []byte("0,0"), true
	if err := c.Invoke(t.Context(), call); err != nil || budget.Load() != before {
		t.Errorf("call made again: %v, budget %d, want %d", err, budget.Load(), before)
	}
}

// TestStreamCompressed reads a stream of compressed and plain messages
// split across frames in every way.
func TestStreamCompressed(t *testing.T) {
	t.Parallel()
	zip := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	prefixed := func(flag byte, m []byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{flag}, uint32(len(m))), m...)
	}
	want := [][]byte{pattern(100), nil, pattern(70000), pattern(5)}
	var body []byte
	for i, m := range want {
		if i%2 == 0 {
			body = append(body, prefixed(1, zip(m))...)
		} else {
			body = append(body, prefixed(0, m)...)
		}
	}
	p := &h2peer{respond: func(s *h2stream) {
		s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true,
			BlockFragment: s.encode(":status", "200", "content-type", "application/grpc", "grpc-encoding", "gzip")})
		for i := 0; i < len(body); i += 3 {
			s.fr.WriteData(s.id, false, body[i:min(i+3, len(body))])
		}
		s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true, EndStream: true,
			BlockFragment: s.encode("grpc-status", "0")})
	}}
	c := newClient(t, serveH2(t, p), Options{})
	call := &Call{Method: "/t.S/M", Stream: true}
	if err := c.Invoke(t.Context(), call); err != nil {
		t.Fatal(err)
	}
	got := messages(call)
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("message %d: %d bytes, want %d", i, len(got[i]), len(want[i]))
		}
	}
}
