package bridge_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
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
	t.Parallel()
	node := nodeWith(t, "@open-rpc/schema-utils-js")
	demo := newEnv(t, bridge.Options{}, demoOnly...)
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

// demoOnly is what grpc-jsonrpc-bridge demo serves: helloworld.Greeter and
// demo.v1.Notes, behind net/http alone.
var demoOnly = []envOption{withServices(testserver.Notes, testserver.Greeter), servedBy(netHTTP)}
