// Package testserver starts the repository's test gRPC backends for the
// tests of every package: the services of proto/testpb and proto/demo (or
// any others), with server reflection, on an in-memory bufconn listener or
// on loopback TCP, and a client connection to them. Everything it starts
// stops when the test ends.
//
// The entry point is Start:
//
//	b := testserver.Start(t, testserver.Options{})                           // every service, both reflections, bufconn
//	b := testserver.Start(t, testserver.Options{Addr: testserver.Loopback}) // the same on a new loopback port
//	conn, addr := b.Conn(), b.Addr()
//
// A TCP backend can be stopped and served again on the same address
// (Backend.Stop, Backend.Restart), as a redeployed backend would be.
//
// It imports only gRPC and the generated test services, never the
// packages under test (bridge, reflect, config), so that their internal
// tests can use it.
package testserver

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/test/bufconn"

	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/echo"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/rpcops"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// Loopback is the Addr of a backend on a new loopback TCP port.
const Loopback = "127.0.0.1:0"

// bufconnTarget is the target of the client connection to a bufconn backend.
const bufconnTarget = "passthrough:///bufconn"

// Reflection says which server reflection services a backend offers.
type Reflection int

const (
	ReflectionBoth    Reflection = iota // v1 and v1alpha, as reflection.Register
	ReflectionV1                        // v1 only, as reflection.RegisterV1
	ReflectionV1Alpha                   // v1alpha only (v1 answers Unimplemented)
	ReflectionNone                      // none, or one a Service registers itself
)

// A Service registers services on a backend's gRPC server.
type Service func(s *grpc.Server)

// NoServices registers nothing: for servers that answer every method with
// grpc.UnknownServiceHandler, or to test a backend without services.
var NoServices = []Service{}

// Services that register one of the repository's test and demo services
// with its real implementation.
var (
	Greeter Service = func(s *grpc.Server) { helloworld.RegisterGreeterServer(s, helloworld.Server{}) }
	Notes   Service = func(s *grpc.Server) { demov1.RegisterNotesServer(s, demov1.NewServer()) }
	Ops     Service = func(s *grpc.Server) { rpcops.RegisterOpsServer(s, rpcops.Server{}) }
	Echo    Service = func(s *grpc.Server) { echo.RegisterEchoServiceServer(s, echo.Server{}) }
)

// Test registers ts as test.v1.TestService.
func Test(ts *testv1.Server) Service {
	return func(s *grpc.Server) { testv1.RegisterTestServiceServer(s, ts) }
}

// Options say what a backend serves, where, and how the test reaches it.
// The zero value serves every test and demo service with both reflection
// services on bufconn, and dials it without TLS.
type Options struct {
	// Services register the services. Nil means every test and demo
	// service: test.v1.TestService (a new testv1.Server, see
	// Backend.Test), demo.v1.Notes, helloworld.Greeter and rpc.ops.Ops.
	Services []Service
	// Reflection picks the reflection services added after Services.
	Reflection Reflection
	// Server are options of the gRPC server (interceptors, codecs,
	// windows, keepalive, an UnknownServiceHandler).
	Server []grpc.ServerOption
	// TLS, when set, makes the server speak TLS with this configuration.
	TLS *tls.Config

	// Addr is where the server listens: empty means an in-memory bufconn
	// listener; otherwise a TCP address, Loopback for a new port. A busy
	// address is retried for a second, as a stopped server's port may
	// take a moment to be freed.
	Addr string
	// Listener, when set, is served instead of one made from Addr; the
	// backend cannot be restarted then.
	Listener net.Listener

	// Dial are options of the client connection, after insecure transport
	// credentials (a credentials option here replaces them).
	Dial []grpc.DialOption
	// NoConn skips the client connection, for tests that dial the
	// backend their own way (a bridge process, a client under test).
	NoConn bool
}

// A Backend is a running test gRPC server and a client connection to it.
type Backend struct {
	t    testing.TB
	opts Options
	addr string
	buf  *bufconn.Listener
	conn *grpc.ClientConn

	mu   sync.Mutex
	gs   *grpc.Server
	test *testv1.Server
	wg   sync.WaitGroup // Serve goroutines
}

// Start serves a backend as o says until the test ends, and dials it
// unless o.NoConn. At the end of the test the connection is closed first,
// then the server is stopped and its Serve goroutine awaited.
func Start(t testing.TB, o Options) *Backend {
	t.Helper()
	b := &Backend{t: t, opts: o}
	var lis net.Listener
	switch {
	case o.Listener != nil:
		lis = o.Listener
	case o.Addr == "":
		b.buf = bufconn.Listen(1 << 20)
		lis = b.buf
	default:
		lis = listen(t, o.Addr)
	}
	b.serve(lis, o.Services)
	t.Cleanup(b.Stop)
	if o.NoConn {
		return b
	}
	target := b.addr
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if b.buf != nil {
		target = bufconnTarget
		dial = append(dial, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return b.buf.DialContext(ctx)
		}))
	}
	conn, err := grpc.NewClient(target, append(dial, o.Dial...)...)
	if err != nil {
		t.Fatalf("testserver: dial %s: %v", target, err)
	}
	b.conn = conn
	t.Cleanup(func() { conn.Close() })
	return b
}

// listen listens on the TCP address addr, retrying for a second while it
// is busy.
func listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	var lis net.Listener
	var err error
	for range 50 {
		if lis, err = net.Listen("tcp", addr); err == nil {
			return lis
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("testserver: listen %s: %v", addr, err)
	return nil
}

// serve starts a gRPC server with services on lis.
func (b *Backend) serve(lis net.Listener, services []Service) {
	o := b.opts
	opts := o.Server
	if o.TLS != nil {
		opts = append(opts[:len(opts):len(opts)], grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	gs := grpc.NewServer(opts...)
	var ts *testv1.Server
	if services == nil {
		ts = testv1.NewServer()
		services = []Service{Test(ts), Notes, Greeter, Ops}
	}
	for _, register := range services {
		register(gs)
	}
	switch o.Reflection {
	case ReflectionBoth:
		reflection.Register(gs)
	case ReflectionV1:
		reflection.RegisterV1(gs)
	case ReflectionV1Alpha:
		// reflection.NewServer serves v1alpha (an adapter over the v1
		// implementation); registering only it leaves v1 Unimplemented.
		grpc_reflection_v1alpha.RegisterServerReflectionServer(gs, reflection.NewServer(reflection.ServerOptions{Services: gs}))
	case ReflectionNone:
	}
	b.mu.Lock()
	b.addr, b.gs, b.test = lis.Addr().String(), gs, ts
	b.mu.Unlock()
	b.wg.Go(func() { _ = gs.Serve(lis) })
}

// Addr is the address of a TCP backend ("bufconn" on bufconn).
func (b *Backend) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

// Conn is the client connection to the backend; nil with Options.NoConn.
func (b *Backend) Conn() *grpc.ClientConn { return b.conn }

// Server is the running (or last) gRPC server.
func (b *Backend) Server() *grpc.Server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gs
}

// Test is the test.v1.TestService of the running (or last) server when
// Options.Services is nil, and nil otherwise.
func (b *Backend) Test() *testv1.Server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.test
}

// Stop kills the server (open connections are closed, calls fail) and
// waits for it to end. Stopping a stopped backend does nothing.
func (b *Backend) Stop() {
	b.mu.Lock()
	gs := b.gs
	b.gs = nil
	b.mu.Unlock()
	if gs != nil {
		gs.Stop()
	}
	b.wg.Wait()
}

// Restart stops the backend and serves it again on the same TCP address
// with the same options, as a redeploy would: services, when given,
// replace Options.Services (NoServices... for none); a nil
// Options.Services gives a new Test. The client connection stays and
// reconnects.
func (b *Backend) Restart(services ...Service) {
	b.t.Helper()
	if b.buf != nil || b.opts.Listener != nil {
		b.t.Fatal("testserver: only a backend listening on Addr can be restarted")
	}
	if services == nil {
		services = b.opts.Services
	}
	b.Stop()
	b.serve(listen(b.t, b.Addr()), services)
}
