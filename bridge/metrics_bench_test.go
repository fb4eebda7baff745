package bridge_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// BenchmarkFrontDoor measures what authentication, authorisation, rate
// limiting and metrics add to one call.
func BenchmarkFrontDoor(b *testing.B) {
	m, err := bridge.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts bridge.Options
	}{
		{"off", bridge.Options{}},
		{"guarded", bridge.Options{Auth: newAuth(b), Metrics: m, RateLimit: 1e9}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := newEnv(b, bc.opts, onBufconn()).bridge
			body := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"bench"},"id":1}`
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer reader-token-0123456789")
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"result"`) {
					b.Fatalf("got HTTP %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
