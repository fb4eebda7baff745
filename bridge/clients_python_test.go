package bridge_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// TestPythonClients runs testdata/clients/python_clients.py (Python's
// jsonrpclib-pelix ServerProxy and requests) against a real bridge on
// loopback in front of the demo services. It needs Debian's
// python3-jsonrpclib-pelix and python3-requests: without them it is
// skipped, and fails when CI is set.
func TestPythonClients(t *testing.T) {
	t.Parallel()
	runPython(t, "python_clients.py", "jsonrpclib, requests", "python3-jsonrpclib-pelix python3-requests")
}

// runPython runs the Python script of testdata/clients against a real
// bridge on loopback in front of the demo services (its URL in
// BRIDGE_URL) and fails the test when the script fails. The script needs
// the modules (an import list), which the Debian packages install:
// without them the test is skipped, and fails when CI is set.
func runPython(t *testing.T, script, modules, packages string) {
	t.Helper()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import "+modules).Run(); err != nil {
		msg := "python3 with " + modules + " is missing (apt-get install " + packages + "): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	e := newEnv(t, bridge.Options{}, demoOnly...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script)
	cmd.Dir = nodeClients
	cmd.Env = append(os.Environ(), "BRIDGE_URL="+e.url+"/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	t.Logf("%s:\n%s", script, out)
}
