package bridge_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/rpcops"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// The stress tests (malformed_test.go, load_test.go, fault_test.go) run
// everything over loopback TCP: a real gRPC server, a real gRPC client
// connection, the bridge behind a real http.Server.

// tcpBackend is a gRPC server on a fixed loopback address that a test can
// stop and start again, with the same or other services.
type tcpBackend struct {
	t    testing.TB
	addr string

	mu sync.Mutex
	gs *grpc.Server
	ts *testv1.Server
	wg sync.WaitGroup // Serve goroutines
}

// register adds services to a gRPC server; reflection is added by start.
type register func(gs *grpc.Server, ts *testv1.Server)

// allServices registers every test and demo service.
func allServices(gs *grpc.Server, ts *testv1.Server) {
	testv1.RegisterTestServiceServer(gs, ts)
	demov1.RegisterNotesServer(gs, demov1.NewServer())
	helloworld.RegisterGreeterServer(gs, helloworld.Server{})
	rpcops.RegisterOpsServer(gs, rpcops.Server{})
}

// startTCPBackend serves reg on a new loopback port until the test ends.
func startTCPBackend(t testing.TB, reg register, opts ...grpc.ServerOption) *tcpBackend {
	t.Helper()
	b := &tcpBackend{t: t, addr: "127.0.0.1:0"}
	b.start(reg, opts...)
	t.Cleanup(b.stop)
	return b
}

// start serves reg on b.addr, which stays the same across restarts.
func (b *tcpBackend) start(reg register, opts ...grpc.ServerOption) {
	b.t.Helper()
	var lis net.Listener
	var err error
	// The old port may linger briefly after a stop; retry a few times.
	for range 50 {
		if lis, err = net.Listen("tcp", b.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		b.t.Fatalf("listen %s: %v", b.addr, err)
	}
	gs := grpc.NewServer(opts...)
	ts := testv1.NewServer()
	reg(gs, ts)
	reflection.Register(gs)
	b.mu.Lock()
	b.addr, b.gs, b.ts = lis.Addr().String(), gs, ts
	b.mu.Unlock()
	b.wg.Go(func() { gs.Serve(lis) })
}

// stop kills the server: open connections are closed, calls fail.
func (b *tcpBackend) stop() {
	b.mu.Lock()
	gs := b.gs
	b.gs = nil
	b.mu.Unlock()
	if gs != nil {
		gs.Stop()
	}
	b.wg.Wait()
}

// server returns the test service of the running (or last) server.
func (b *tcpBackend) server() *testv1.Server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ts
}

// dialLoopback returns a client connection to addr that reconnects quickly
// after the backend comes back; it is closed when the test ends.
func dialLoopback(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append(append(backend.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})), opts...)
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// serveBridge puts srv behind a loopback http.Server configured by
// configure (nil for defaults) and returns its URL.
func serveBridge(t testing.TB, srv http.Handler, configure func(*http.Server)) string {
	t.Helper()
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.ReadHeaderTimeout = 5 * time.Second
	if configure != nil {
		configure(hs.Config)
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return hs.URL
}

// loopEnv is a bridge on loopback HTTP in front of a tcpBackend.
type loopEnv struct {
	*env
	tcp    *tcpBackend
	client *http.Client
}

// newLoopEnv starts a backend with every service and serverOpts,
// discovers it through a connection with dialOpts and serves a bridge with
// opts in front of it.
func newLoopEnv(t testing.TB, opts bridge.Options, serverOpts []grpc.ServerOption, dialOpts ...grpc.DialOption) *loopEnv {
	t.Helper()
	b := startTCPBackend(t, allServices, serverOpts...)
	conn := dialLoopback(t, b.addr, dialOpts...)
	srv := bridge.New(conn, opts)
	srv.Update(discoverOrFail(t, conn))
	url := serveBridge(t, srv, nil)
	return &loopEnv{
		env:    &env{url: url, backend: b.server(), bridge: srv, conn: conn},
		tcp:    b,
		client: newHTTPClient(t),
	}
}

// newHTTPClient returns a client with its own connection pool, closed
// when the test ends so that no connection goroutine outlives it.
func newHTTPClient(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// discoverOrFail discovers the backend behind conn.
func discoverOrFail(t testing.TB, conn grpc.ClientConnInterface) *bridgereflect.Registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := bridgereflect.Discover(ctx, conn)
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	return reg
}
