package unary

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rawMsg carries a message's wire bytes through passCodec.
type rawMsg struct{ b []byte }

// passCodec passes wire bytes through, on the test servers and on the
// grpc-go client the benchmarks compare with.
type passCodec struct{}

func (passCodec) Name() string { return "proto" }

func (passCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(*rawMsg).b)}, nil
}

func (passCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(*rawMsg).b = data.Materialize()
	return nil
}

// handlerFunc answers one unary call of a test server: it returns the
// response's wire bytes or the call's error.
type handlerFunc func(ctx context.Context, method string, req []byte, ss grpc.ServerStream) ([]byte, error)

// Methods of router, the default handler.
const (
	mEcho  = "/test.Svc/Echo"  // the request back
	mSize  = "/test.Svc/Size"  // pattern(n) for a decimal request n
	mSleep = "/test.Svc/Sleep" // "slept" after the duration in the request, or the context's status
)

func router(ctx context.Context, method string, req []byte, _ grpc.ServerStream) ([]byte, error) {
	switch method {
	case mEcho:
		return req, nil
	case mSize:
		n, err := strconv.Atoi(string(req))
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return pattern(n), nil
	case mSleep:
		d, err := time.ParseDuration(string(req))
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		select {
		case <-time.After(d):
			return []byte("slept"), nil
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return nil, status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// pattern is n bytes that differ from any shifted copy of themselves.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8 + i>>16)
	}
	return b
}

// streamHandler makes h a grpc-go unknown-service handler.
func streamHandler(h handlerFunc) grpc.StreamHandler {
	return func(_ any, ss grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(ss)
		var req rawMsg
		if err := ss.RecvMsg(&req); err != nil {
			return err
		}
		resp, err := h(ss.Context(), method, req.b, ss)
		if err != nil {
			return err
		}
		return ss.SendMsg(&rawMsg{resp})
	}
}

// serve starts a grpc-go server answering every method with h on lis;
// the test's cleanup stops it.
func serve(t testing.TB, lis net.Listener, h handlerFunc, opts ...grpc.ServerOption) *grpc.Server {
	t.Helper()
	if h == nil {
		h = router
	}
	opts = append([]grpc.ServerOption{
		grpc.UnknownServiceHandler(streamHandler(h)),
		grpc.ForceServerCodecV2(passCodec{}),
	}, opts...)
	return testserver.Start(t, testserver.Options{Listener: lis, Server: opts, Services: testserver.NoServices,
		Reflection: testserver.ReflectionNone, NoConn: true}).Server()
}

// listen opens a listener of network "tcp", "unix" or "unix-abstract" and
// returns it with a target that reaches it.
func listen(t testing.TB, network string) (net.Listener, string) {
	t.Helper()
	var lis net.Listener
	var err error
	var target string
	switch network {
	case "tcp":
		lis, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			target = lis.Addr().String()
		}
	case "unix":
		dir, derr := os.MkdirTemp("", "unary")
		if derr != nil {
			t.Fatal(derr)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		path := filepath.Join(dir, "s.sock")
		lis, err = net.Listen("unix", path)
		target = "unix:" + path
	case "unix-abstract":
		name := fmt.Sprintf("unary-test-%d-%d", os.Getpid(), abstractSeq.Add(1))
		lis, err = net.Listen("unix", "@"+name)
		target = "unix:@" + name
	default:
		t.Fatalf("unknown network %q", network)
	}
	if err != nil {
		t.Fatal(err)
	}
	return lis, target
}

var abstractSeq atomic.Int64

// startBackend listens on network and serves h there.
func startBackend(t testing.TB, network string, h handlerFunc, opts ...grpc.ServerOption) (*grpc.Server, string) {
	t.Helper()
	lis, target := listen(t, network)
	return serve(t, lis, h, opts...), target
}

// relisten listens on addr again, retrying while the old listener's port
// is still being released.
func relisten(t testing.TB, addr string) net.Listener {
	t.Helper()
	var lis net.Listener
	await.NoError(t, 5*time.Second, "listening on "+addr+" again", func() (err error) {
		lis, err = net.Listen("tcp", addr)
		return err
	})
	return lis
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// newAt is New for a test's target: HOST:PORT, or "unix:" and a socket's
// path (its :authority "localhost", as package backend gives it).
func newAt(target string, opts Options) (*Client, error) {
	if path, ok := strings.CutPrefix(target, "unix:"); ok {
		if opts.Authority == "" {
			opts.Authority = "localhost"
		}
		return New("unix", path, opts)
	}
	return New("tcp", target, opts)
}

// newClient makes a Client of target that the test's cleanup closes.
func newClient(t testing.TB, target string, opts Options) *Client {
	t.Helper()
	c, err := newAt(target, opts)
	if err != nil {
		t.Fatalf("New(%q): %v", target, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// invoke makes one call with a timeout of 10 s unless ctx has its own.
func invoke(ctx context.Context, c *Client, method string, req []byte) (*Call, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	call := &Call{Method: method, Request: req}
	err := c.Invoke(ctx, call)
	return call, err
}

// wantCode fails the test unless err is a status error of code.
func wantCode(t testing.TB, err error, code codes.Code) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v (%T) is not a status error; want code %v", err, err, code)
	}
	if st.Code() != code {
		t.Fatalf("code %v (%q), want %v", st.Code(), st.Message(), code)
	}
}

// within runs f and fails the test if it takes longer than d: a hang is
// reported rather than waited out.
func within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v", what, d)
	}
}

// connCount is the number of the client's open connections.
func connCount(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// openStreams is the number of streams open on the client's current
// connection.
func openStreams(c *Client) int {
	c.mu.Lock()
	cn := c.cur
	c.mu.Unlock()
	if cn == nil {
		return 0
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return len(cn.streams)
}

var errMismatch = errors.New("response does not match")
