package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// failOnError is a slog handler that fails the test on every record at
// error level: the bridge logs recovered panics and internal errors there.
type failOnError struct {
	slog.Handler
	t testing.TB
}

func (h failOnError) Enabled(context.Context, slog.Level) bool { return true }

func (h failOnError) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.t.Errorf("bridge logged an error: %s", r.Message)
	}
	return nil
}

// FuzzHandle feeds arbitrary bodies to the envelope and batch parser and
// through it to a real backend. Every body must get nothing (only
// notifications) or well-formed replies, and never a panic.
func FuzzHandle(f *testing.F) {
	files, _ := filepath.Glob("testdata/transcripts/*.txt")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if req, ok := strings.CutPrefix(line, "--> "); ok {
				f.Add([]byte(strings.TrimSuffix(req, "\n")))
			}
		}
	}
	f.Add([]byte("\xEF\xBB\xBF" + `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`))
	f.Add([]byte(strings.Repeat("[", 2000) + strings.Repeat("]", 2000)))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fInt64":` + strings.Repeat("9", 400) + `},"id":` + strings.Repeat("1", 400) + `}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fString":"\ud800"},"id":1}`))
	e := newEnv(f, bridge.Options{Limits: bridge.Limits{CallTimeout: 50 * time.Millisecond, MaxBatchSize: 20}, Logger: slog.New(failOnError{t: f})})
	f.Fuzz(func(t *testing.T, body []byte) {
		reply := e.bridge.Handle(t.Context(), body, nil)
		if len(reply) == 0 {
			return
		}
		d := json.NewDecoder(bytes.NewReader(reply))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil || d.More() {
			t.Fatalf("body %q: reply %q is not one JSON value", body, reply)
		}
		trimmed := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\xEF\xBB\xBF")), " \t\r\n")
		if _, isArray := v.([]any); isArray && (len(trimmed) == 0 || trimmed[0] != '[') {
			t.Fatalf("body %q: got an array reply %s to a non-batch", body, reply)
		}
		eachReply(t, v, func(r map[string]any) { checkEnvelope(t, r) })
	})
}
