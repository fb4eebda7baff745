package dispatch

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

func TestPanicBecomesInternalError(t *testing.T) {
	var logged bytes.Buffer
	e := New(nil, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil)), BatchParallelism: 10,
		CallTimeout: time.Second, MaxResponseBytes: 1 << 20})
	// A method without a codec panics on first use.
	e.table.Store(&Table{byName: map[string]*Method{"x.Y.Z": {Name: "x.Y.Z"}}})
	tests := []struct{ name, body, want string }{
		{"single", `{"jsonrpc":"2.0","method":"x.Y.Z","id":7}`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"Internal error"}}`},
		{"batch member", `[{"jsonrpc":"2.0","method":"x.Y.Z","id":1},{"jsonrpc":"2.0","method":"x.Y.Z"}]`,
			`[{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}]`},
		{"notification", `{"jsonrpc":"2.0","method":"x.Y.Z"}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logged.Reset()
			var msg wire.Message
			if err := wire.Parse([]byte(tt.body), 100, &msg); err != nil {
				t.Fatal(err.Message)
			}
			reply, _ := e.Run(context.Background(), &msg, &Exchange{}, nil, false)
			got := string(reply)
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if !strings.Contains(logged.String(), "panic") {
				t.Errorf("the panic was not logged: %q", logged.String())
			}
		})
	}
}
