package main

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The developer's BRIDGE_* variables are kept out of every test once,
	// here, so that clearEnv (t.Setenv) has nothing to do and tests may
	// run in parallel.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "BRIDGE_") {
			os.Unsetenv(name)
		}
	}
	goleak.VerifyTestMain(m)
}
