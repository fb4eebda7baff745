package bridge_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// benchParams is a request like the side-by-side benchmark's: a string, an
// int64, a repeated string, a nested message and an enum.
const benchParams = `{"fString":"hello from bench","fInt64":"1234567890123","rString":["alpha","beta","gamma","delta"],"fMessage":{"name":"bench-load","big":"1"},"fEnum":"COLOR_RED"}`

func benchmarkBody(b *testing.B, body string) {
	e := newEnv(b, bridge.Options{})
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
			w := httptest.NewRecorder()
			e.bridge.ServeHTTP(w, req)
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"result"`) {
				b.Fatalf("got HTTP %d %s", w.Code, w.Body)
			}
		}
	})
}

// BenchmarkUnary is one call through the HTTP handler to an in-process
// backend.
func BenchmarkUnary(b *testing.B) {
	benchmarkBody(b, `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Echo","params":`+benchParams+`}`)
}

// BenchmarkBatch100 is a batch of 100 calls through the HTTP handler.
func BenchmarkBatch100(b *testing.B) {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range 100 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"test.v1.TestService.Echo","params":` + benchParams + `}`)
	}
	sb.WriteByte(']')
	benchmarkBody(b, sb.String())
}

// BenchmarkEnvelope is the parse and reply path alone: a call to an
// unknown method never reaches the backend.
func BenchmarkEnvelope(b *testing.B) {
	e := newEnv(b, bridge.Options{})
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"no.Such.Method","params":` + benchParams + `}`)
	b.ReportAllocs()
	var dst []byte
	for b.Loop() {
		dst = e.bridge.Handle(b.Context(), body, dst[:0])
	}
}
