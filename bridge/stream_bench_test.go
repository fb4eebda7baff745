package bridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// benchMessages is how many responses a benchmarked stream has.
const benchMessages = 100

// BenchmarkStreamCollected is a server stream of benchMessages responses
// answered in one reply over POST /.
func BenchmarkStreamCollected(b *testing.B) {
	benchmarkStreamPOST(b, "application/json", `"result":[`)
}

// BenchmarkStreamLive is the same stream answered live (NDJSON).
func BenchmarkStreamLive(b *testing.B) {
	benchmarkStreamPOST(b, acceptNDJSON, `{"messages":100}`)
}

func benchmarkStreamPOST(b *testing.B, accept, want string) {
	e := newEnv(b, bridge.Options{})
	body := request(serverStream, `{"count":100}`, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		e.bridge.ServeHTTP(w, req)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), want) {
			b.Fatalf("got HTTP %d %s", w.Code, w.Body)
		}
	}
}

// BenchmarkStreamWS opens the same stream over one WebSocket connection
// and reads its messages and its end.
func BenchmarkStreamWS(b *testing.B) {
	e := newEnv(b, bridge.Options{})
	c, _, err := websocket.Dial(b.Context(), e.url+"/ws", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	frame := []byte(request(serverStream, `{"count":100}`, 1))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		for n := 0; ; n++ {
			_, m, err := c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if strings.Contains(string(m), "rpc.stream.end") {
				if n != benchMessages+1 || strings.Contains(string(m), "error") {
					b.Fatalf("got %d frames before the end %s", n, m)
				}
				break
			}
		}
	}
}
