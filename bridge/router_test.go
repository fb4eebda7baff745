package bridge_test

import (
	"context"
	"net"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/test/bufconn"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// oneService serves what register adds, with reflection, on bufconn.
func oneService(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	register(gs)
	reflection.Register(gs)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn", append(backend.DialOptions(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestRouterCallsEachMethodOnItsBackend: a Catalog that is a Router sends
// each call to the backend offering it; the Server has no connection of
// its own.
func TestRouterCallsEachMethodOnItsBackend(t *testing.T) {
	ts := testv1.NewServer()
	tests := oneService(t, func(s *grpc.Server) { testv1.RegisterTestServiceServer(s, ts) })
	greeter := oneService(t, func(s *grpc.Server) { helloworld.RegisterGreeterServer(s, helloworld.Server{}) })
	var parts []bridgereflect.Part
	for name, conn := range map[string]*grpc.ClientConn{"tests": tests, "greeter": greeter} {
		reg, err := bridgereflect.Discover(t.Context(), conn)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, bridgereflect.Part{Name: name, Conn: conn, Registry: reg})
	}
	cat, err := bridgereflect.Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	srv := bridge.New(nil, bridge.Options{})
	srv.Update(cat)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e := &env{url: hs.URL, bridge: srv}

	if r := e.call(t, `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"Ada"}}`); errCode(t, r) != 0 {
		t.Errorf("greeter: got %v, want a result", r)
	}
	if r := e.call(t, `{"jsonrpc":"2.0","id":2,"method":"test.v1.TestService.Count","params":{"key":"k"}}`); errCode(t, r) != 0 {
		t.Errorf("tests: got %v, want a result", r)
	}
	if got := ts.Calls("k"); got != 1 {
		t.Errorf("the test backend counted %d calls, want 1", got)
	}
}
