package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestPanicBecomesInternalError(t *testing.T) {
	var logged bytes.Buffer
	s := New(nil, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	// A handle without a codec panics on first use.
	s.table.Store(&table{methods: map[string]*handle{"x.Y.Z": {name: "x.Y.Z"}}})
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
			got := string(s.Handle(context.Background(), []byte(tt.body), nil))
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if !strings.Contains(logged.String(), "panic") {
				t.Errorf("the panic was not logged: %q", logged.String())
			}
		})
	}
}
