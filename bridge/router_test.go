package bridge_test

import (
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// TestRouterCallsEachMethodOnItsBackend: a Catalog that is a Router sends
// each call to the backend offering it; the Server has no connection of
// its own.
func TestRouterCallsEachMethodOnItsBackend(t *testing.T) {
	t.Parallel()
	ts := testv1.NewServer()
	tests := testserver.Start(t, testserver.Options{Services: []testserver.Service{testserver.Test(ts)}, Dial: backend.DialOptions()}).Conn()
	greeter := testserver.Start(t, testserver.Options{Services: []testserver.Service{testserver.Greeter}, Dial: backend.DialOptions()}).Conn()
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
