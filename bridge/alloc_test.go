package bridge_test

import (
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// TestHotPathAllocationBudget guards the allocations of the per-call path.
// testing.AllocsPerRun counts every allocation in the process, so the
// budgets of calls that reach the backend include the in-process grpc-go
// server.s own (about 60 a call).
func TestHotPathAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates too")
	}
	e := newEnv(t, bridge.Options{}, echoOnly)
	tests := []struct {
		name   string
		body   string
		want   string // in the reply
		budget float64
	}{
		{"envelope and error reply", `{"jsonrpc":"2.0","id":1,"method":"no.Such.Method","params":` + benchParams + `}`, `"code":-32601`, 10},
		{"unary call on the direct path", unaryBody, `"result"`, 90},
		{"batch of 10 on the direct path", batchBody(10), `"id":10,"result"`, 880},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			var dst []byte
			run := func() { dst = e.bridge.Handle(t.Context(), body, dst[:0]) }
			run()
			if !strings.Contains(string(dst), tt.want) {
				t.Fatalf("got %s, want %s in it", dst, tt.want)
			}
			if got := testing.AllocsPerRun(100, run); got > tt.budget {
				t.Errorf("got %.0f allocations per request, want at most %.0f", got, tt.budget)
			}
		})
	}
}
