package bridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// TestNodeMCPClients runs testdata/clients/mcp.test.mjs: the official MCP
// TypeScript SDK's Client over Streamable HTTP against real bridges on
// loopback in front of a real backend (one open, one with auth, one whose
// services the script has rediscovered through a control endpoint of this
// test), and over stdio against the mcp command of the built binary. It
// needs node and the npm packages (npm ci --prefix bridge/testdata/clients):
// where either is missing it is skipped, and fails when CI is set.
func TestNodeMCPClients(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@modelcontextprotocol/sdk")
	// Three bridges in front of one backend: open, with authentication, and
	// one serving helloworld only until /rediscover.
	first := newEnv(t, bridge.Options{}, servedBy(netHTTP))
	open := first.url
	authed := newEnv(t, bridge.Options{Auth: newAuth(t)}, sharing(first), servedBy(netHTTP)).url
	third := newEnv(t, bridge.Options{}, sharing(first), only("helloworld.*"), servedBy(netHTTP))
	changing, changeURL := third.bridge, third.url
	reg := discoverOrFail(t, first.conn)
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/rediscover" {
			http.NotFound(w, r)
			return
		}
		changing.Update(reg) // a re-discovery that finds every service
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(control.Close)

	bin := buildBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "mcp.test.mjs")
	cmd.Dir = nodeClients
	cmd.Env = append(os.Environ(), "NO_COLOR=1",
		"MCP_URL="+open+"/mcp", "MCP_AUTH_URL="+authed+"/mcp", "MCP_CHANGE_URL="+changeURL+"/mcp",
		"MCP_CONTROL_URL="+control.URL, "MCP_BIN="+bin, "MCP_BACKEND="+first.be.Addr())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test mcp.test.mjs: %v\n%s", err, out)
	}
	t.Logf("node --test mcp.test.mjs:\n%s", out)
}
