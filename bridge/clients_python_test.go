package bridge_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestPythonClients runs testdata/clients/python_clients.py (Python's
// jsonrpclib-pelix ServerProxy and requests) against a real bridge on
// loopback in front of the demo services. It needs Debian's
// python3-jsonrpclib-pelix and python3-requests: without them it is
// skipped, and fails when CI is set.
func TestPythonClients(t *testing.T) {
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import jsonrpclib, requests").Run(); err != nil {
		msg := "python3 with jsonrpclib-pelix and requests is missing (apt-get install python3-jsonrpclib-pelix python3-requests): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	e := newDemoEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "python_clients.py")
	cmd.Dir = nodeClients
	cmd.Env = append(os.Environ(), "BRIDGE_URL="+e.url+"/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python_clients.py: %v\n%s", err, out)
	}
	t.Logf("python_clients.py:\n%s", out)
}
