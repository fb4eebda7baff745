package bridge_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// nodeClients is the npm project of the node tests: package.json and its
// lock, and the test files node runs.
const nodeClients = "testdata/clients"

// nodeWith returns the path of node when it and the npm package pkg of
// nodeClients are installed; otherwise the test fails when CI is set and
// is skipped when not.
func nodeWith(t *testing.T, pkg string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(nodeClients, "node_modules", pkg, "package.json"))
	}
	if err != nil {
		msg := "node or the npm packages of " + nodeClients + " are missing (npm ci --prefix bridge/" + nodeClients + "): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

// TestNodeClients runs the node tests in testdata/clients (npm's
// @open-rpc/client-js, json-rpc-2.0 and @open-rpc/schema-utils-js) against
// real bridges on loopback in front of real backends: one serving the demo
// services (BRIDGE_URL), one every test service too (BRIDGE_ALL_URL). They
// need node and the project's packages (npm ci --prefix
// bridge/testdata/clients): where either is missing the test is skipped,
// and fails when CI is set.
func TestNodeClients(t *testing.T) {
	node := nodeWith(t, "@open-rpc/schema-utils-js")
	demo := newDemoEnv(t)
	all := newEnv(t, bridge.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "clients.test.mjs", "openrpc.test.mjs")
	cmd.Dir = nodeClients
	cmd.Env = append(os.Environ(), "BRIDGE_URL="+demo.url+"/", "BRIDGE_ALL_URL="+all.url+"/", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)
}

// newDemoEnv is newEnv with only what grpc-jsonrpc-bridge demo serves:
// helloworld.Greeter and demo.v1.Notes.
func newDemoEnv(t testing.TB) *env {
	t.Helper()
	be := testserver.Start(t, testserver.Options{Addr: testserver.Loopback,
		Services: []testserver.Service{testserver.Notes, testserver.Greeter}, Dial: backend.DialOptions()})
	conn, addr := be.Conn(), be.Addr()
	reg, err := bridgereflect.Discover(context.Background(), conn)
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	srv := bridge.New(directConn(t, conn, addr), bridge.Options{})
	srv.Update(reg)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &env{url: hs.URL, bridge: srv, conn: conn}
}
