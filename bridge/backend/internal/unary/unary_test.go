package unary

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

var networks = []string{"tcp", "unix", "unix-abstract"}

// TestEcho sends and receives messages of many sizes, over TCP and Unix
// sockets: empty ones, frame-sized ones, and ones many times the windows
// of both sides, so that WINDOW_UPDATEs are needed both ways.
func TestEcho(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		req    []byte
		want   []byte
	}{
		{"small", mEcho, []byte("hello"), []byte("hello")},
		{"empty request and response", mEcho, nil, nil},
		{"empty response", mSize, []byte("0"), nil},
		{"response of one frame", mSize, []byte("16379"), pattern(16379)},
		{"response of 16384", mSize, []byte("16384"), pattern(16384)},
		{"response of 64 KiB", mSize, []byte("65536"), pattern(65536)},
		{"response of 1 MiB", mSize, []byte(strconv.Itoa(1 << 20)), pattern(1 << 20)},
		{"response of 3.9 MiB", mSize, []byte(strconv.Itoa(39 << 20 / 10)), pattern(39 << 20 / 10)},
		{"request of 16384", mEcho, pattern(16384), pattern(16384)},
		{"request of 3 MiB", mEcho, pattern(3 << 20), pattern(3 << 20)},
	}
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			_, target := startBackend(t, network, nil)
			c := newClient(t, target, Options{})
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					// Twice: the second call reuses the connection, its
					// HPACK state and the windows the first one left.
					for range 2 {
						call, err := invoke(t.Context(), c, tt.method, tt.req)
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(call.Response, tt.want) {
							t.Fatalf("response of %d bytes, want %d", len(call.Response), len(tt.want))
						}
					}
				})
			}
			if n := connCount(c); n != 1 {
				t.Errorf("%d connections, want 1", n)
			}
		})
	}
}

// TestLargeConcurrent makes large calls at once, which share the
// connection's send and receive windows.
func TestLargeConcurrent(t *testing.T) {
	t.Parallel()
	_, target := startBackend(t, "tcp", nil)
	c := newClient(t, target, Options{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			req := pattern(2<<20 + i*1000)
			call, err := invoke(t.Context(), c, mEcho, req)
			if err != nil {
				t.Error(err)
			} else if !bytes.Equal(call.Response, req) {
				t.Errorf("call %d: response of %d bytes, want %d", i, len(call.Response), len(req))
			}
		})
	}
	wg.Wait()
}

// TestMaxRecvMsgSize fails a response larger than MaxRecvMsgSize without
// harm to the connection.
func TestMaxRecvMsgSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		max  int // Options.MaxRecvMsgSize
		size int
		code codes.Code
	}{
		{"at the limit", 1 << 20, 1 << 20, codes.OK},
		{"one byte over", 1 << 20, 1<<20 + 1, codes.ResourceExhausted},
		{"far over", 1000, 3 << 20, codes.ResourceExhausted},
		{"default limit", 0, 4 << 20, codes.OK},
		{"over the default limit", 0, 4<<20 + 1, codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, target := startBackend(t, "tcp", nil)
			c := newClient(t, target, Options{MaxRecvMsgSize: tt.max})
			for range 3 {
				call, err := invoke(t.Context(), c, mSize, []byte(strconv.Itoa(tt.size)))
				wantCode(t, err, tt.code)
				if err == nil && !bytes.Equal(call.Response, pattern(tt.size)) {
					t.Fatal(errMismatch)
				}
				call, err = invoke(t.Context(), c, mEcho, []byte("after"))
				if err != nil || string(call.Response) != "after" {
					t.Fatalf("the next call: %q, %v", call.Response, err)
				}
			}
			if n := connCount(c); n != 1 {
				t.Errorf("%d connections, want the one", n)
			}
		})
	}
}

// TestStatusErrors has the backend fail calls in many ways, before and
// after its response headers.
func TestStatusErrors(t *testing.T) {
	t.Parallel()
	withDetails, err := status.New(codes.InvalidArgument, "bad field ✗ 50%").WithDetails(
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "name", Description: "must not be empty"},
			{Field: "age", Description: "négatif"},
		}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(3 * time.Second)},
		&errdetails.ErrorInfo{Reason: "R", Domain: "d", Metadata: map[string]string{"k": "v"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want *status.Status
	}{
		{"not found", status.Error(codes.NotFound, "no such thing"), status.New(codes.NotFound, "no such thing")},
		{"empty message", status.Error(codes.PermissionDenied, ""), status.New(codes.PermissionDenied, "")},
		{"non-ASCII and percent", status.Error(codes.FailedPrecondition, "héllo wörld ✓ 100% %41 %zz 日本語\ttab"),
			status.New(codes.FailedPrecondition, "héllo wörld ✓ 100% %41 %zz 日本語\ttab")},
		{"newlines", status.Error(codes.Aborted, "line 1\r\nline 2"), status.New(codes.Aborted, "line 1\r\nline 2")},
		{"long message", status.Error(codes.Internal, strings.Repeat("long é ", 5000)), status.New(codes.Internal, strings.Repeat("long é ", 5000))},
		{"details", withDetails.Err(), withDetails},
		{"unavailable from the backend", status.Error(codes.Unavailable, "backend says no"), status.New(codes.Unavailable, "backend says no")},
		{"not a status", errors.New("plain error"), status.New(codes.Unknown, "plain error")},
		{"context error", context.DeadlineExceeded, status.New(codes.DeadlineExceeded, context.DeadlineExceeded.Error())},
	}
	var sendHeader atomic.Bool
	var attempts atomic.Int32
	_, target := startBackend(t, "tcp", func(ctx context.Context, method string, req []byte, ss grpc.ServerStream) ([]byte, error) {
		attempts.Add(1)
		if method == mEcho {
			return req, nil
		}
		i, _ := strconv.Atoi(string(req))
		if sendHeader.Load() {
			if err := ss.SendHeader(metadata.Pairs("x-sent", "1")); err != nil {
				return nil, err
			}
		}
		return nil, tests[i].err
	})
	c := newClient(t, target, Options{})
	for _, mode := range []string{"trailers-only", "after headers"} {
		t.Run(mode, func(t *testing.T) {
			sendHeader.Store(mode == "after headers")
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					attempts.Store(0)
					call := &Call{Method: "/test.Svc/Fail", Request: []byte(strconv.Itoa(i)), Capture: true}
					err := c.Invoke(t.Context(), call)
					if err != call.Err {
						t.Fatalf("Invoke returned %v, call.Err is %v", err, call.Err)
					}
					st, ok := status.FromError(err)
					if !ok {
						t.Fatalf("%v is not a status error", err)
					}
					if st.Code() != tt.want.Code() || st.Message() != tt.want.Message() {
						t.Fatalf("status %v %q, want %v %q", st.Code(), st.Message(), tt.want.Code(), tt.want.Message())
					}
					if !proto.Equal(st.Proto(), tt.want.Proto()) {
						t.Fatalf("status %v, want %v", st.Proto(), tt.want.Proto())
					}
					if got, want := len(st.Details()), len(tt.want.Details()); got != want {
						t.Fatalf("%d details, want %d", got, want)
					}
					for j, d := range st.Details() {
						if !proto.Equal(protoadapt.MessageV2Of(d.(protoadapt.MessageV1)), protoadapt.MessageV2Of(tt.want.Details()[j].(protoadapt.MessageV1))) {
							t.Fatalf("detail %d is %v, want %v", j, d, tt.want.Details()[j])
						}
					}
					if n := attempts.Load(); n != 1 {
						t.Fatalf("the backend saw %d attempts, want 1", n)
					}
					if sendHeader.Load() != (call.Header.Get("x-sent") != nil) {
						t.Fatalf("header %v", call.Header)
					}
				})
			}
		})
	}
	call, err := invoke(t.Context(), c, mEcho, []byte("still fine"))
	if err != nil || string(call.Response) != "still fine" {
		t.Fatalf("after the errors: %q, %v", call.Response, err)
	}
}

// TestCardinality has the backend answer with no message or two.
func TestCardinality(t *testing.T) {
	t.Parallel()
	handler := grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(ss)
		if method == "/test.Svc/FailEarly" { // before reading the request
			return status.Error(codes.FailedPrecondition, "early")
		}
		var req rawMsg
		if err := ss.RecvMsg(&req); err != nil {
			return err
		}
		switch method {
		case "/test.Svc/None":
			return nil
		case "/test.Svc/Two":
			if err := ss.SendMsg(&rawMsg{[]byte("one")}); err != nil {
				return err
			}
			return ss.SendMsg(&rawMsg{[]byte("two")})
		}
		return ss.SendMsg(&req)
	})
	target := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Server: []grpc.ServerOption{grpc.ForceServerCodecV2(passCodec{}), handler},
		Services: testserver.NoServices, Reflection: testserver.ReflectionNone, NoConn: true}).Addr()
	c := newClient(t, target, Options{})
	for _, tt := range []struct {
		method string
		req    []byte
		code   codes.Code
	}{
		{"/test.Svc/None", []byte("x"), codes.Internal},
		{"/test.Svc/Two", []byte("x"), codes.Internal},
		{"/test.Svc/FailEarly", []byte("x"), codes.FailedPrecondition},
		// The client is still sending when the backend ends the call.
		{"/test.Svc/FailEarly", pattern(3 << 20), codes.FailedPrecondition},
		{"/test.Svc/Echo", pattern(3 << 20), codes.OK},
	} {
		for range 3 {
			start := time.Now()
			_, err := invoke(t.Context(), c, tt.method, tt.req)
			wantCode(t, err, tt.code)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("%s took %v", tt.method, d)
			}
		}
	}
	if n := connCount(c); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestMetadata checks request metadata as the backend sees it and the
// response headers and trailers a call captures.
func TestMetadata(t *testing.T) {
	t.Parallel()
	binary := string([]byte{0, 1, 2, 0xff, 0xfe, '\n', '=', 0x80})
	big := strings.Repeat("0123456789", 4000) // a header block in CONTINUATIONs
	type seen struct {
		md        metadata.MD
		authority []string
	}
	var last atomic.Pointer[seen]
	_, target := startBackend(t, "tcp", func(ctx context.Context, method string, req []byte, ss grpc.ServerStream) ([]byte, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		last.Store(&seen{md: md, authority: md.Get(":authority")})
		header := metadata.Pairs("h-one", "1", "h-one", "2", "h-bin", binary, "h-empty-bin", "")
		trailer := metadata.Pairs("t-one", "x", "t-bin", binary)
		if method == "/test.Svc/Big" {
			header.Set("h-big", big)
			trailer.Set("t-big", big)
		}
		if method != "/test.Svc/FailTrailersOnly" { // grpc-go sends header metadata in a HEADERS of its own
			if err := ss.SetHeader(header); err != nil {
				return nil, err
			}
		}
		ss.SetTrailer(trailer)
		switch method {
		case "/test.Svc/FailTrailersOnly":
			return nil, status.Error(codes.NotFound, "gone")
		case "/test.Svc/FailAfterHeaders":
			if err := ss.SendHeader(nil); err != nil {
				return nil, err
			}
			return nil, status.Error(codes.NotFound, "gone")
		}
		return req, nil
	})
	c := newClient(t, target, Options{UserAgent: "unary-test/1"})

	wantHeader := metadata.MD{"h-one": {"1", "2"}, "h-bin": {binary}, "h-empty-bin": {""}}
	wantTrailer := metadata.MD{"t-one": {"x"}, "t-bin": {binary}}
	tests := []struct {
		name        string
		method      string
		md          metadata.MD
		capture     bool
		code        codes.Code
		wantHeader  metadata.MD
		wantTrailer metadata.MD
	}{
		{"no metadata", mEcho, nil, false, codes.OK, nil, nil},
		{"request metadata", mEcho, metadata.MD{
			"x-one":        {"a"},
			"x-multi":      {"1", "2", "3"},
			"x-data-bin":   {binary},
			"x-empty":      {""},
			"x-long":       {strings.Repeat("long ", 40)},
			"x-request-id": {"req-1"},
			"traceparent":  {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		}, false, codes.OK, nil, nil},
		{"capture", mEcho, nil, true, codes.OK, wantHeader, wantTrailer},
		{"capture trailers-only error", "/test.Svc/FailTrailersOnly", nil, true, codes.NotFound, nil, wantTrailer},
		{"capture error after headers", "/test.Svc/FailAfterHeaders", nil, true, codes.NotFound, wantHeader, wantTrailer},
		{"no capture of an error", "/test.Svc/FailTrailersOnly", nil, false, codes.NotFound, nil, nil},
		{"big metadata both ways", "/test.Svc/Big", metadata.MD{"x-big": {big}, "x-big-bin": {big}}, true, codes.OK,
			metadata.Join(wantHeader, metadata.Pairs("h-big", big)), metadata.Join(wantTrailer, metadata.Pairs("t-big", big))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // again, with the HPACK tables the first left
				call := &Call{Method: tt.method, Metadata: tt.md, Request: []byte("m"), Capture: tt.capture}
				err := c.Invoke(t.Context(), call)
				wantCode(t, err, tt.code)
				got := last.Load()
				for k, v := range tt.md {
					if g := got.md.Get(k); !equalStrings(g, v) {
						t.Errorf("the backend saw %s = %.40q, want %.40q", k, g, v)
					}
				}
				if ua := got.md.Get("user-agent"); len(ua) != 1 || !strings.HasPrefix(ua[0], "unary-test/1") {
					t.Errorf("user-agent %q", ua)
				}
				if !equalStrings(got.authority, []string{target}) {
					t.Errorf(":authority %q, want %q", got.authority, target)
				}
				if !equalMD(call.Header, tt.wantHeader) {
					t.Errorf("header %.200v, want %.200v", map[string][]string(call.Header), map[string][]string(tt.wantHeader))
				}
				if !equalMD(call.Trailer, tt.wantTrailer) {
					t.Errorf("trailer %.200v, want %.200v", map[string][]string(call.Trailer), map[string][]string(tt.wantTrailer))
				}
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalMD(a, b metadata.MD) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !equalStrings(v, b[k]) {
			return false
		}
	}
	return true
}

// TestDeadlines checks deadlines and cancellation: the call ends on time,
// the backend learns of it, and the client goes on working.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	type event struct {
		deadline time.Duration // until the server-side deadline, at the start
		hasDL    bool
		err      error // the handler context's error when it ended
	}
	started := make(chan struct{}, 1)
	ended := make(chan event, 1)
	var calls atomic.Int32
	_, target := startBackend(t, "tcp", func(ctx context.Context, method string, req []byte, ss grpc.ServerStream) ([]byte, error) {
		calls.Add(1)
		if method == mEcho {
			return req, nil
		}
		var ev event
		if d, ok := ctx.Deadline(); ok {
			ev.deadline, ev.hasDL = time.Until(d), true
		}
		started <- struct{}{}
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			ev.err = ctx.Err()
		}
		ended <- ev
		if ev.err != nil {
			return nil, status.FromContextError(ev.err).Err()
		}
		return []byte("late"), nil
	})
	c := newClient(t, target, Options{})
	echo := func(t *testing.T) {
		t.Helper()
		call, err := invoke(t.Context(), c, mEcho, []byte("ok"))
		if err != nil || string(call.Response) != "ok" {
			t.Fatalf("a later call: %q, %v", call.Response, err)
		}
	}
	echo(t) // connect first

	t.Run("timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		call, err := invoke(ctx, c, "/test.Svc/Slow", nil)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("%v after %v with response %q, want DeadlineExceeded", err, time.Since(start), call.Response)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("the call took %v", d)
		}
		select {
		case ev := <-ended:
			if !ev.hasDL || ev.deadline <= 0 || ev.deadline > 50*time.Millisecond {
				t.Errorf("the backend's deadline was %v away (%v)", ev.deadline, ev.hasDL)
			}
			if ev.err == nil {
				t.Error("the backend's context did not end")
			}
		case <-time.After(time.Second):
			t.Fatal("the backend's handler did not end")
		}
		<-started
		echo(t)
	})
	t.Run("expired", func(t *testing.T) {
		n := calls.Load()
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := invoke(ctx, c, "/test.Svc/Slow", nil)
		wantCode(t, err, codes.DeadlineExceeded)
		if calls.Load() != n {
			t.Error("an expired call reached the backend")
		}
		echo(t)
	})
	t.Run("canceled before", func(t *testing.T) {
		n := calls.Load()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := invoke(ctx, c, mEcho, []byte("x"))
		wantCode(t, err, codes.Canceled)
		if calls.Load() != n {
			t.Error("a canceled call reached the backend")
		}
		echo(t)
	})
	t.Run("canceled mid-call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-started
			cancel()
		}()
		start := time.Now()
		_, err := invoke(ctx, c, "/test.Svc/Slow", nil)
		wantCode(t, err, codes.Canceled)
		if d := time.Since(start); d > time.Second {
			t.Errorf("the call took %v", d)
		}
		select {
		case ev := <-ended:
			if !errors.Is(ev.err, context.Canceled) {
				t.Errorf("the backend's context ended with %v, want canceled", ev.err)
			}
			if ev.hasDL && ev.deadline < 5*time.Second {
				t.Errorf("the backend's deadline was %v away", ev.deadline)
			}
		case <-time.After(time.Second):
			t.Fatal("the backend's handler did not end")
		}
		echo(t)
	})
	if n := connCount(c); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestConcurrentCalls makes many calls at once on one connection; every
// response must be its own request's.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	_, target := startBackend(t, "tcp", nil)
	c := newClient(t, target, Options{})
	const goroutines, calls = 200, 50
	var wg sync.WaitGroup
	var failed atomic.Int32
	for g := range goroutines {
		wg.Go(func() {
			call := &Call{Method: mEcho} // reused, as the bridge does
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range calls {
				req := fmt.Appendf(nil, "%d/%d/", g, i)
				req = append(req, pattern(rng.IntN(3000))...)
				call.Request = req
				err := c.Invoke(t.Context(), call)
				if err != nil || !bytes.Equal(call.Response, req) {
					if failed.Add(1) < 5 {
						t.Errorf("goroutine %d call %d: %v, response of %d bytes for %d", g, i, err, len(call.Response), len(req))
					}
				}
			}
		})
	}
	wg.Wait()
	if n := connCount(c); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestMaxConcurrentStreams has more calls than the backend takes at once:
// they wait for stream slots instead of failing.
func TestMaxConcurrentStreams(t *testing.T) {
	t.Parallel()
	var active, peak atomic.Int32
	_, target := startBackend(t, "tcp", func(ctx context.Context, method string, req []byte, ss grpc.ServerStream) ([]byte, error) {
		n := active.Add(1)
		defer active.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond) // the call's work, holding its stream: nothing to await
		return req, nil
	}, grpc.MaxConcurrentStreams(4))
	c := newClient(t, target, Options{})
	if _, err := invoke(t.Context(), c, mEcho, nil); err != nil { // the SETTINGS first
		t.Fatal(err)
	}

	t.Run("invoke", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				req := pattern(i * 100)
				call, err := invoke(t.Context(), c, mEcho, req)
				if err != nil || !bytes.Equal(call.Response, req) {
					t.Errorf("call %d: %v", i, err)
				}
			})
		}
		wg.Wait()
	})
	t.Run("group", func(t *testing.T) {
		var g Group
		calls := make([]*Call, 40)
		for i := range calls {
			calls[i] = &Call{Method: mEcho, Request: []byte(strconv.Itoa(i))}
			g.Start(t.Context(), c, calls[i])
		}
		g.Wait(t.Context())
		for i, call := range calls {
			if call.Err != nil || string(call.Response) != strconv.Itoa(i) {
				t.Errorf("call %d: %q, %v", i, call.Response, call.Err)
			}
		}
	})
	t.Run("slot wait ends with the context", func(t *testing.T) {
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		var timedOut atomic.Int32
		for range 60 { // 15 rounds of 4 calls of 5 ms: more than the 30 ms deadline
			wg.Go(func() {
				_, err := invoke(ctx, c, "/test.Svc/Any", nil)
				if status.Code(err) == codes.DeadlineExceeded {
					timedOut.Add(1)
				} else if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if timedOut.Load() == 0 {
			t.Error("no call waited out its deadline for a slot")
		}
		if _, err := invoke(t.Context(), c, mEcho, nil); err != nil {
			t.Fatal(err)
		}
	})
	if p := peak.Load(); p > 4 {
		t.Errorf("the backend ran %d calls at once, more than its limit", p)
	}
}

// TestGroup makes batches of calls, some failing, and reuses the Group.
func TestGroup(t *testing.T) {
	t.Parallel()
	_, target := startBackend(t, "tcp", nil)
	c := newClient(t, target, Options{})
	var g Group
	g.Wait(t.Context()) // an empty group
	calls := make([]*Call, 100)
	for i := range calls {
		calls[i] = new(Call)
	}
	for round := range 5 {
		for i, call := range calls {
			call.Method, call.Request = mEcho, fmt.Appendf(nil, "%d-%d", round, i)
			switch {
			case i%10 == 3:
				call.Method = "/test.Svc/Missing"
			case i%10 == 5:
				call.Method, call.Request = mSize, []byte(strconv.Itoa(i*1000))
			}
			g.Start(t.Context(), c, call)
		}
		within(t, 10*time.Second, "Wait", func() { g.Wait(t.Context()) })
		for i, call := range calls {
			switch {
			case i%10 == 3:
				if status.Code(call.Err) != codes.Unimplemented {
					t.Errorf("round %d call %d: %v, want Unimplemented", round, i, call.Err)
				}
			case i%10 == 5:
				if call.Err != nil || !bytes.Equal(call.Response, pattern(i*1000)) {
					t.Errorf("round %d call %d: %v", round, i, call.Err)
				}
			default:
				if call.Err != nil || string(call.Response) != fmt.Sprintf("%d-%d", round, i) {
					t.Errorf("round %d call %d: %q, %v", round, i, call.Response, call.Err)
				}
			}
		}
	}
	// A call of a Group is a call like any other afterwards.
	if call, err := invoke(t.Context(), c, mEcho, []byte("single")); err != nil || string(call.Response) != "single" {
		t.Fatalf("%q, %v", call.Response, err)
	}
}

// TestGroupDeadline ends a batch with its context: the calls still
// running get its status, the others their own results.
func TestGroupDeadline(t *testing.T) {
	t.Parallel()
	_, target := startBackend(t, "tcp", nil)
	c := newClient(t, target, Options{})
	var g Group

	t.Run("mid-way", func(t *testing.T) {
		calls := make([]*Call, 40)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		for i := range calls {
			calls[i] = &Call{Method: mEcho, Request: []byte(strconv.Itoa(i))}
			if i%2 == 1 {
				calls[i].Method, calls[i].Request = mSleep, []byte("3s")
			}
			g.Start(ctx, c, calls[i])
		}
		start := time.Now()
		within(t, 5*time.Second, "Wait", func() { g.Wait(ctx) })
		if d := time.Since(start); d > time.Second {
			t.Errorf("Wait took %v", d)
		}
		for i, call := range calls {
			if i%2 == 1 {
				wantCode(t, call.Err, codes.DeadlineExceeded)
			} else if call.Err != nil || string(call.Response) != strconv.Itoa(i) {
				t.Errorf("call %d: %q, %v", i, call.Response, call.Err)
			}
		}
	})
	t.Run("reused", func(t *testing.T) {
		calls := make([]*Call, 10)
		for i := range calls {
			calls[i] = &Call{Method: mSleep, Request: []byte("20ms")}
			g.Start(t.Context(), c, calls[i])
		}
		within(t, 5*time.Second, "Wait", func() { g.Wait(t.Context()) })
		for i, call := range calls {
			if call.Err != nil || string(call.Response) != "slept" {
				t.Errorf("call %d: %q, %v", i, call.Response, call.Err)
			}
		}
	})
	t.Run("started after the deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		<-ctx.Done()
		call := &Call{Method: mEcho}
		g.Start(ctx, c, call)
		wantCode(t, call.Err, codes.DeadlineExceeded)
		within(t, 5*time.Second, "Wait", func() { g.Wait(ctx) })
		wantCode(t, call.Err, codes.DeadlineExceeded)
	})
	// The context ends as the calls do, in every order: whatever Wait
	// does, the next round must wait for its own calls.
	t.Run("races", func(t *testing.T) {
		var races int
		for i := range 300 {
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i%5)*200*time.Microsecond)
			race := &Call{Method: mSleep, Request: fmt.Appendf(nil, "%dus", i%7*100)}
			g.Start(ctx, c, race)
			within(t, 5*time.Second, "Wait", func() { g.Wait(ctx) })
			cancel()
			if race.Err == nil {
				races++
			} else if c := status.Code(race.Err); c != codes.DeadlineExceeded {
				t.Fatalf("round %d: %v", i, race.Err)
			}
			next := &Call{Method: mSleep, Request: []byte("1ms")}
			g.Start(t.Context(), c, next)
			within(t, 5*time.Second, "Wait", func() { g.Wait(t.Context()) })
			if next.Err != nil || string(next.Response) != "slept" {
				t.Fatalf("round %d: the next Wait returned with %q, %v", i, next.Response, next.Err)
			}
		}
		t.Logf("%d of 300 racing calls succeeded", races)
	})
}

// TestNotListening fails calls to an address nobody listens on at once,
// and keeps failing them during the backoff without dialing each time.
func TestNotListening(t *testing.T) {
	t.Parallel()
	c := newClient(t, freeAddr(t), Options{DialTimeout: 10 * time.Second})
	for i := range 5 {
		start := time.Now()
		_, err := invoke(t.Context(), c, mEcho, nil)
		wantCode(t, err, codes.Unavailable)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("call %d took %v", i, d)
		}
	}
}

// TestBackendStartsLater reaches a backend that comes up after the first
// calls failed, once the backoff has passed.
func TestBackendStartsLater(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	c := newClient(t, addr, Options{})
	for range 3 {
		_, err := invoke(t.Context(), c, mEcho, nil)
		wantCode(t, err, codes.Unavailable)
		time.Sleep(100 * time.Millisecond) // calls spread over the backoff: a pace, nothing to await
	}
	serve(t, relisten(t, addr), nil)
	d := await.NoError(t, 5*time.Second, "a call to the backend, once it listens", func() error {
		_, err := invoke(t.Context(), c, mEcho, nil)
		return err
	})
	if d > 4*time.Second {
		t.Errorf("reconnected after %v", d)
	}
}

// TestServerStop loses the connection mid-call; a new backend on the same
// address is called next.
func TestServerStop(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 10)
	h := func(ctx context.Context, method string, req []byte, ss grpc.ServerStream) ([]byte, error) {
		if method == mSleep {
			started <- struct{}{}
		}
		return router(ctx, method, req, ss)
	}
	lis, addr := listen(t, "tcp")
	srv := serve(t, lis, h)
	c := newClient(t, addr, Options{})
	for round := range 3 {
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				_, err := invoke(t.Context(), c, mSleep, []byte("5s"))
				if status.Code(err) != codes.Unavailable {
					t.Errorf("round %d: %v, want Unavailable", round, err)
				}
			})
		}
		for range 5 {
			<-started
		}
		start := time.Now()
		srv.Stop()
		wg.Wait()
		if d := time.Since(start); d > time.Second {
			t.Errorf("the calls ended %v after Stop", d)
		}
		srv = serve(t, relisten(t, addr), h)
		await.NoError(t, 5*time.Second, "a call to the new backend", func() error {
			_, err := invoke(t.Context(), c, mEcho, nil)
			return err
		})
	}
}

// TestGracefulStop drains the backend while calls are running: they end
// well, and a new backend is called next.
func TestGracefulStop(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 20)
	h := func(ctx context.Context, method string, req []byte, ss grpc.ServerStream) ([]byte, error) {
		if method == mSleep {
			started <- struct{}{}
		}
		return router(ctx, method, req, ss)
	}
	lis, addr := listen(t, "tcp")
	srv := serve(t, lis, h)
	c := newClient(t, addr, Options{})
	for round := range 3 {
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				call, err := invoke(t.Context(), c, mSleep, []byte("300ms"))
				if err != nil || string(call.Response) != "slept" {
					t.Errorf("round %d call %d: %q, %v", round, i, call.Response, err)
				}
			})
		}
		for range 10 {
			<-started
		}
		stopped := make(chan struct{})
		go func() {
			srv.GracefulStop()
			close(stopped)
		}()
		// Calls made while it drains fail (nobody listens) or, having
		// started before the GOAWAY arrived, succeed: neither hangs.
		for range 5 {
			_, err := invoke(t.Context(), c, mEcho, nil)
			if code := status.Code(err); code != codes.OK && code != codes.Unavailable {
				t.Errorf("round %d: a call while draining: %v", round, err)
			}
			time.Sleep(10 * time.Millisecond) // calls spread over the drain: a pace, nothing to await
		}
		wg.Wait()
		within(t, 5*time.Second, "GracefulStop", func() { <-stopped })
		srv = serve(t, relisten(t, addr), h)
		await.NoError(t, 5*time.Second, "a call to the new backend", func() error {
			_, err := invoke(t.Context(), c, mEcho, nil)
			return err
		})
	}
}

// TestMaxConnectionAge has the backend send GOAWAY every little while
// under load: no call may fail.
func TestMaxConnectionAge(t *testing.T) {
	t.Parallel()
	_, target := startBackend(t, "tcp", nil, grpc.KeepaliveParams(keepalive.ServerParameters{
		MaxConnectionAge:      100 * time.Millisecond,
		MaxConnectionAgeGrace: 5 * time.Second,
	}))
	c := newClient(t, target, Options{})
	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	var n atomic.Int32
	for g := range 16 {
		wg.Go(func() {
			call := new(Call)
			for i := 0; time.Now().Before(deadline); i++ {
				call.Method, call.Request = mEcho, fmt.Appendf(nil, "%d/%d", g, i)
				if g%4 == 0 {
					call.Method, call.Request = mSleep, []byte("30ms")
				}
				if err := c.Invoke(t.Context(), call); err != nil {
					t.Errorf("goroutine %d call %d: %v", g, i, err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls", n.Load())
}

// TestClose fails calls in progress and later ones, and leaves no
// goroutine behind.
func TestClose(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	var started atomic.Int32 // calls of mSleep the backend has begun
	srv, target := startBackend(t, "tcp", func(ctx context.Context, method string, req []byte, ss grpc.ServerStream) ([]byte, error) {
		if method == mSleep {
			started.Add(1)
		}
		return router(ctx, method, req, ss)
	})
	c, err := newAt(target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := invoke(t.Context(), c, mEcho, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_, err := invoke(t.Context(), c, mSleep, []byte("5s"))
			if status.Code(err) != codes.Unavailable {
				t.Errorf("a call in progress: %v, want Unavailable", err)
			}
		})
	}
	var g Group
	calls := make([]*Call, 10)
	for i := range calls {
		calls[i] = &Call{Method: mSleep, Request: []byte("5s")}
		g.Start(t.Context(), c, calls[i])
	}
	// The writer, woken by each of the 10 callers, may write the group's
	// calls with theirs: at least 10 reach the backend.
	await.Until(t, 5*time.Second, "the 20 calls queued, 10 at least in progress at the backend", func() bool {
		return c.InFlight() == 20 && started.Load() >= 10
	})
	within(t, 2*time.Second, "Close", func() { c.Close() })
	wg.Wait()
	within(t, 2*time.Second, "Wait", func() { g.Wait(t.Context()) })
	for _, call := range calls {
		wantCode(t, call.Err, codes.Unavailable)
	}
	_, err = invoke(t.Context(), c, mEcho, nil)
	wantCode(t, err, codes.Unavailable)
	g.Start(t.Context(), c, calls[0])
	wantCode(t, calls[0].Err, codes.Unavailable)
	g.Wait(t.Context())
	c.Close() // again
	if n := connCount(c); n != 0 {
		t.Errorf("%d connections left", n)
	}
	checkClientGoroutines(t)
	srv.Stop()
	goleak.VerifyNone(t, ignore)
}

// checkClientGoroutines fails the test if any of the package's goroutines
// is still running.
func checkClientGoroutines(t *testing.T) {
	t.Helper()
	var buf []byte
	gone := false
	defer func() {
		if !gone {
			t.Logf("goroutines of the package remain:\n%s", buf)
		}
	}()
	await.Until(t, 2*time.Second, "the package's goroutines to end", func() bool {
		buf = make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		return !bytes.Contains(buf, []byte("internal/unary.(*"))
	})
	gone = true
}

// TestCloseWhileDialing closes a client whose dial hangs in a TLS
// handshake with a backend that never answers.
func TestCloseWhileDialing(t *testing.T) {
	lis, target := listen(t, "tcp")
	accepted := make(chan struct{}, 1)
	acceptLoop(t, lis, func(net.Conn) {
		select {
		case accepted <- struct{}{}:
		default:
		}
	})
	pool, _ := selfSigned(t)
	c, err := newAt(target, Options{Creds: tlsCreds(pool), DialTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := invoke(context.Background(), c, mEcho, nil)
		errc <- err
	}()
	await.Receive(t, 5*time.Second, "the dial to reach the backend", accepted)
	within(t, 2*time.Second, "Close", func() { c.Close() })
	select {
	case err := <-errc:
		wantCode(t, err, codes.Unavailable)
	case <-time.After(2 * time.Second):
		t.Fatal("the call did not end")
	}
	checkClientGoroutines(t)
}
