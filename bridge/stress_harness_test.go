package bridge_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/h1"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// The stress tests (malformed_test.go, load_test.go, fault_test.go) run
// everything over loopback TCP: a real gRPC server, a real gRPC client
// connection, the bridge behind a real http.Server.

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

// serveBridge puts srv behind a loopback server configured by configure
// (nil for defaults), as serve does (bridge/h1 in front of an
// http.Server), and returns its URL.
func serveBridge(t testing.TB, srv http.Handler, configure func(*http.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	if configure != nil {
		configure(hs)
	}
	front := h1.New(hs)
	go front.Serve(lis)
	t.Cleanup(func() {
		// As httptest.Server.Close: the requests being served end first.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		front.SetKeepAlivesEnabled(false)
		_ = front.Shutdown(ctx)
		front.Close()
	})
	return "http://" + lis.Addr().String()
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
