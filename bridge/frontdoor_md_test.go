package bridge_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
)

// forBothPaths runs f on the direct path and on grpc-go's (directIf);
// the bridges of this file are served by net/http alone (netHTTP).
func forBothPaths(t *testing.T, f func(t *testing.T, direct bool)) {
	for _, direct := range []bool{true, false} {
		name := "grpc-go"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) { f(t, direct) })
	}
}

// postWith sends body to e with the headers h over real HTTP/1.1 and
// returns the status and the reply.
func postWith(t *testing.T, e *env, body string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const validTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// TestTracestateValidated: a Tracestate the W3C grammar does not allow
// (a tab or bytes above ASCII, which HTTP lets through; too many
// members; too long) never reaches the backend,
// on either path, and the call runs; a valid one is forwarded, its
// header lines joined into one list.
func TestTracestateValidated(t *testing.T) {
	t.Parallel()
	forBothPaths(t, func(t *testing.T, direct bool) {
		var rec mdRecorder
		e := newEnv(t, bridge.Options{}, directIf(direct), withServer(grpc.UnaryInterceptor(rec.intercept)), servedBy(netHTTP))
		tests := []struct {
			name  string
			state []string
			want  []string // what the backend sees; nil: none
		}{
			{"valid", []string{"congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7"}, []string{"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}},
			{"tenant key", []string{"fw529a3039@dt=AgIDBAU"}, []string{"fw529a3039@dt=AgIDBAU"}},
			// What an HTTP server lets through besides printable ASCII.
			{"tab", []string{"a=b\tc"}, nil},
			{"obs-text", []string{"a=caf\xc3\xa9\xff"}, nil},
			{"no equals", []string{"justakey"}, nil},
			{"upper-case key", []string{"Congo=x"}, nil},
			{"33 members", []string{strings.Repeat("k=v,", 32) + "z=1"}, nil},
			{"over 512 bytes", []string{"k=" + strings.Repeat("v", 255) + ",l=" + strings.Repeat("v", 255)}, nil},
		}
		for _, tt := range tests {
			h := http.Header{"Traceparent": {validTraceparent}, "Tracestate": tt.state}
			code, body := postWith(t, e, echoCall, h)
			if code != 200 || !strings.Contains(body, `"result"`) {
				t.Errorf("%s: got HTTP %d %s, want a result", tt.name, code, body)
				continue
			}
			if got := rec.last(t)["tracestate"]; !equalStrings(got, tt.want) {
				t.Errorf("%s: the backend saw tracestate %q, want %q", tt.name, got, tt.want)
			}
		}
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestConnectionNamedHeaderNotForwarded: a header the Connection header
// names is hop-by-hop (RFC 9110 section 7.6.1): neither a listed request
// header nor a Grpc-Metadata-* one that Connection names reaches the
// backend.
func TestConnectionNamedHeaderNotForwarded(t *testing.T) {
	t.Parallel()
	forBothPaths(t, func(t *testing.T, direct bool) {
		var rec mdRecorder
		e := newEnv(t, bridge.Options{Metadata: bridge.Metadata{RequestHeaders: []string{"X-Tenant"}}}, directIf(direct), withServer(grpc.UnaryInterceptor(rec.intercept)), servedBy(netHTTP))
		code, body := postWith(t, e, echoCall, http.Header{
			"Connection":           {"keep-alive, Grpc-Metadata-Secret", "x-tenant"},
			"Grpc-Metadata-Secret": {"s3cret"},
			"X-Tenant":             {"acme"},
			"Grpc-Metadata-Kept":   {"yes"},
		})
		if code != 200 {
			t.Fatalf("got HTTP %d %s", code, body)
		}
		md := rec.last(t)
		for _, key := range []string{"secret", "x-tenant"} {
			if v := md[key]; v != nil {
				t.Errorf("the backend saw %s: %q, which the Connection header names", key, v)
			}
		}
		if v := md["kept"]; !equalStrings(v, []string{"yes"}) {
			t.Errorf("the backend saw kept: %q, want yes", v)
		}
	})
}

// TestConnectionOptionsCheap: a Connection header of many options beside
// many forwarded headers costs one pass over the options, not one per
// header (100,000 options and 1,000 Grpc-Metadata-* headers, 220 KB under
// net/http's 1 MiB of headers, once took over 2 s of CPU to answer, 20 s
// under the race detector); the headers it names are still dropped.
func TestConnectionOptionsCheap(t *testing.T) {
	// Not parallel: it bounds the time of one request (a second).
	var rec mdRecorder
	e := newEnv(t, bridge.Options{}, withServer(grpc.UnaryInterceptor(rec.intercept)), servedBy(netHTTP))
	for _, tc := range []struct {
		name    string
		headers int
		want    int
	}{
		{"too much metadata", 1000, http.StatusRequestHeaderFieldsTooLarge},
		{"forwarded", 100, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Connection": {strings.Repeat("a,", 100_000) + "grpc-metadata-n7"}}
			for i := range tc.headers {
				h.Set(fmt.Sprintf("Grpc-Metadata-N%d", i), "v")
			}
			start := time.Now()
			code, body := postWith(t, e, echoCall, h)
			if d := time.Since(start); d > time.Second {
				t.Errorf("answered after %v, want well under a second", d)
			}
			if code != tc.want {
				t.Fatalf("got HTTP %d %s, want %d", code, body, tc.want)
			}
			if code != http.StatusOK {
				return
			}
			md := rec.last(t)
			if v := md["n7"]; v != nil {
				t.Errorf("the backend saw n7: %q, which the Connection header names", v)
			}
			if v := md["n8"]; !equalStrings(v, []string{"v"}) {
				t.Errorf("the backend saw n8: %q, want v", v)
			}
		})
	}
}

// TestXForwardedFor: the bridge appends the address of the peer it saw to
// x-forwarded-for, after whatever chain the client forwarded, as proxies
// do; with none, the peer's address alone.
func TestXForwardedFor(t *testing.T) {
	t.Parallel()
	forBothPaths(t, func(t *testing.T, direct bool) {
		var rec mdRecorder
		e := newEnv(t, bridge.Options{Metadata: bridge.Metadata{RequestHeaders: []string{"X-Forwarded-For"}}}, directIf(direct), withServer(grpc.UnaryInterceptor(rec.intercept)), servedBy(netHTTP))
		tests := []struct {
			name string
			h    http.Header
			want string
		}{
			{"none", nil, "127.0.0.1"},
			{"client chain", http.Header{"X-Forwarded-For": {"203.0.113.7, 198.51.100.2"}}, "203.0.113.7, 198.51.100.2, 127.0.0.1"},
			{"two header lines", http.Header{"X-Forwarded-For": {"203.0.113.7", "198.51.100.2"}}, "203.0.113.7, 198.51.100.2, 127.0.0.1"},
			{"as metadata", http.Header{"Grpc-Metadata-X-Forwarded-For": {"203.0.113.9"}}, "203.0.113.9, 127.0.0.1"},
		}
		for _, tt := range tests {
			if code, body := postWith(t, e, echoCall, tt.h); code != 200 {
				t.Fatalf("%s: got HTTP %d %s", tt.name, code, body)
			}
			if got := rec.last(t)["x-forwarded-for"]; !equalStrings(got, []string{tt.want}) {
				t.Errorf("%s: the backend saw x-forwarded-for %q, want %q", tt.name, got, tt.want)
			}
		}
	})
}

// TestLocalStatusTextNeverReachesClients: a status the gRPC client made
// itself (here of a backend that is not gRPC at all) is answered with a
// fixed message on both paths, never the client's text; a backend's own
// status keeps its message whatever it says, even words that begin the
// client's messages ("transport", "grpc: ").
func TestLocalStatusTextNeverReachesClients(t *testing.T) {
	t.Parallel()
	t.Run("not gRPC", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		// An HTTP/2 server that is not gRPC: 503 with a text body.
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream connect error or disconnect/reset before headers", http.StatusServiceUnavailable)
		}), Protocols: new(http.Protocols)}
		hs.Protocols.SetUnencryptedHTTP2(true)
		go hs.Serve(lis)
		t.Cleanup(func() { hs.Close() })
		forBothPaths(t, func(t *testing.T, direct bool) {
			// Discovered from a real backend, called at the impostor.
			bad, err := grpc.NewClient(lis.Addr().String(), append(backend.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { bad.Close() })
			var cc grpc.ClientConnInterface = bad
			if direct {
				cc = directConn(t, bad, lis.Addr().String())
			}
			e := newEnv(t, bridge.Options{}, through(cc), servedBy(netHTTP))
			code, body := postWith(t, e, echoCall, nil)
			if code != 200 || !strings.Contains(body, `"code":14`) || !strings.Contains(body, `"message":"the backend is unavailable"`) {
				t.Errorf("got HTTP %d %s, want code 14 with the fixed message", code, body)
			}
			for _, leak := range []string{"unexpected HTTP status", "content-type", "upstream connect", "transport"} {
				if strings.Contains(body, leak) {
					t.Errorf("the reply %s carries the client's text %q", body, leak)
				}
			}
		})
	})
	t.Run("backend status", func(t *testing.T) {
		forBothPaths(t, func(t *testing.T, direct bool) {
			fail := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				if strings.HasSuffix(info.FullMethod, "/Echo") {
					return nil, status.Error(codes.Unavailable, "transport: the ledger is being rebuilt")
				}
				return h(ctx, req)
			}
			e := newEnv(t, bridge.Options{}, directIf(direct), withServer(grpc.UnaryInterceptor(fail)), servedBy(netHTTP))
			code, body := postWith(t, e, echoCall, nil)
			if code != 200 || !strings.Contains(body, `"message":"transport: the ledger is being rebuilt"`) {
				t.Errorf("got HTTP %d %s, want the backend's own message", code, body)
			}
		})
	})
}
