package main

import (
	"strings"
	"testing"
)

// TestMisspeltEnvironmentVariable: a BRIDGE_* variable that is no setting
// but near one is warned of with a did you mean, and the command runs; one
// near no setting (another program's) is left alone.
func TestMisspeltEnvironmentVariable(t *testing.T) {
	t.Setenv("BRIDGE_LISEN", "127.0.0.1:1")
	t.Setenv("BRIDGE_URL", "http://127.0.0.1:1/")
	for _, args := range [][]string{
		{"list", "--protoset", testProtoset},
		{"openrpc", "--protoset", testProtoset},
	} {
		code, stdout, stderr := runSync(t, args...)
		if code != exitOK || stdout == "" {
			t.Fatalf("%v: exit code %d, stdout %.100q; stderr:\n%s", args, code, stdout, stderr)
		}
		want := "environment variable BRIDGE_LISEN is no setting: did you mean BRIDGE_LISTEN? (it is not read)"
		if !strings.Contains(stderr, want) || strings.Count(stderr, "BRIDGE_LISEN") != 1 {
			t.Errorf("%v: stderr %q, want one warning %q", args, stderr, want)
		}
		if strings.Contains(stderr, "BRIDGE_URL") {
			t.Errorf("%v: stderr %q warns of BRIDGE_URL, which is near no setting", args, stderr)
		}
	}
}
