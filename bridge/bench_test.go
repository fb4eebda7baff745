package bridge_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

// benchParams is a request like the side-by-side benchmark's: a string, an
// int64, a repeated string, a nested message and an enum.
const benchParams = `{"message":"hello from bench","sequence":"1234567890123","tags":["alpha","beta","gamma","delta"],"metadata":{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","clientName":"bench-load","attempt":1},"priority":"PRIORITY_HIGH"}`

// The benchmarks' bridge is in front of a backend serving only
// bench.v1.EchoService on loopback TCP, dialed as the bridge dials it
// (backend.Dial), calling it through the direct path (direct_calls: true,
// the default) or through grpc-go (via(dialedGRPCGo)), both balanced by
// the backend's picker.
var echoOnly = withServices(testserver.Echo)

func benchmarkBody(b *testing.B, body string, path callPath) {
	e := newEnv(b, bridge.Options{}, echoOnly, via(path))
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

const unaryBody = `{"jsonrpc":"2.0","id":1,"method":"bench.v1.EchoService.Echo","params":` + benchParams + `}`

// BenchmarkUnary is one call through the HTTP handler to a backend in the
// same process, over loopback, on the direct path.
func BenchmarkUnary(b *testing.B) { benchmarkBody(b, unaryBody, direct) }

// BenchmarkUnaryGRPCGo is BenchmarkUnary through grpc-go's client.
func BenchmarkUnaryGRPCGo(b *testing.B) { benchmarkBody(b, unaryBody, dialedGRPCGo) }

func batchBody(n int) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"bench.v1.EchoService.Echo","params":` + benchParams + `}`)
	}
	sb.WriteByte(']')
	return sb.String()
}

// BenchmarkBatch100 is a batch of 100 calls through the HTTP handler.
func BenchmarkBatch100(b *testing.B) { benchmarkBody(b, batchBody(100), direct) }

// BenchmarkBatch100GRPCGo is BenchmarkBatch100 through grpc-go's client.
func BenchmarkBatch100GRPCGo(b *testing.B) { benchmarkBody(b, batchBody(100), dialedGRPCGo) }

// BenchmarkEnvelope is the parse and reply path alone: a call to an
// unknown method never reaches the backend.
func BenchmarkEnvelope(b *testing.B) {
	e := newEnv(b, bridge.Options{}, echoOnly)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"no.Such.Method","params":` + benchParams + `}`)
	b.ReportAllocs()
	var dst []byte
	for b.Loop() {
		dst = e.bridge.Handle(b.Context(), body, dst[:0])
	}
}

// BenchmarkUnaryLoopback is one call over real loopback HTTP/1.1 to the
// bridge and real loopback gRPC to the backend, as in production.
func BenchmarkUnaryLoopback(b *testing.B) {
	hs := newEnv(b, bridge.Options{}, echoOnly, via(testConn), servedBy(netHTTP)).hs
	body := `{"jsonrpc":"2.0","id":1,"method":"bench.v1.EchoService.Echo","params":` + benchParams + `}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(hs.URL, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("got HTTP %d", resp.StatusCode)
			}
		}
	})
}
