package bridge_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// env is a bridge in front of a real gRPC backend on loopback TCP, whose
// unary calls take the direct path (backend.Dial, direct_calls: true), as
// in production.
// testClient is the HTTP client of the tests: a transport of its own,
// because httptest.Server.Close closes the idle connections of
// http.DefaultTransport, which would break the requests of tests running
// in parallel.
var testClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

type env struct {
	url     string
	backend *testv1.Server
	bridge  *bridge.Server
	conn    *grpc.ClientConn // grpc-go's connection to the backend
}

// startBackend serves every test and demo service with reflection on a
// bufconn listener and returns a client connection to it.
func startBackend(t testing.TB, opts ...grpc.ServerOption) (*testv1.Server, *grpc.ClientConn) {
	t.Helper()
	b := testserver.Start(t, testserver.Options{Server: opts, Dial: backend.DialOptions()})
	return b.Test(), b.Conn()
}

// startBackendTCP is startBackend on a loopback TCP listener, and returns
// the backend's address too.
func startBackendTCP(t testing.TB, opts ...grpc.ServerOption) (*testv1.Server, *grpc.ClientConn, string) {
	t.Helper()
	b := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Server: opts, Dial: backend.DialOptions()})
	return b.Test(), b.Conn(), b.Addr()
}

// directConn dials addr as the bridge does (backend.Dial, direct_calls:
// true): unary calls take the direct path, streams and reflection
// grpc-go's, both balanced by the backend's one picker. The test's own
// connection to addr (the unnamed argument) serves discovery.
func directConn(t testing.TB, _ *grpc.ClientConn, addr string) *backend.Conn {
	t.Helper()
	return dialBackend(t, addr, true)
}

// dialBackend dials addr as the bridge does, with the direct path or
// without (direct_calls: false).
func dialBackend(t testing.TB, addr string, direct bool) *backend.Conn {
	t.Helper()
	d, err := backend.Dial(addr, backend.Options{Direct: direct})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// newEnvGRPCGo is newEnv with every call going through grpc-go's client
// (direct_calls: false), on bufconn.
func newEnvGRPCGo(t testing.TB, opts bridge.Options) *env {
	t.Helper()
	ts, conn := startBackend(t)
	reg, err := bridgereflect.Discover(context.Background(), conn)
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	srv := bridge.New(conn, opts)
	srv.Update(reg)
	url := serveBridge(t, srv, nil)
	return &env{url: url, backend: ts, bridge: srv, conn: conn}
}

func newEnv(t testing.TB, opts bridge.Options) *env {
	t.Helper()
	return newEnvWith(t, opts)
}

// newEnvWith is newEnv with options for the backend's gRPC server.
func newEnvWith(t testing.TB, opts bridge.Options, serverOpts ...grpc.ServerOption) *env {
	t.Helper()
	ts, conn, addr := startBackendTCP(t, serverOpts...)
	reg, err := bridgereflect.Discover(context.Background(), conn)
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	srv := bridge.New(directConn(t, conn, addr), opts)
	srv.Update(reg)
	url := serveBridge(t, srv, nil)
	return &env{url: url, backend: ts, bridge: srv, conn: conn}
}

// post sends body to POST / and returns the status and the reply body.
func (e *env) post(t testing.TB, body string) (int, []byte) {
	t.Helper()
	return e.do(t, http.MethodPost, "/", "application/json", body)
}

func (e *env) do(t testing.TB, method, path, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, b
}

// call posts body, expects HTTP 200 and one reply object, and checks the
// envelope rules every reply must follow.
func (e *env) call(t testing.TB, body string) map[string]any {
	t.Helper()
	code, b := e.post(t, body)
	if code != http.StatusOK {
		t.Fatalf("POST %s: HTTP %d %s, want 200", body, code, b)
	}
	v := decode(t, b)
	obj, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("reply %s is not an object", b)
	}
	checkEnvelope(t, obj)
	return obj
}

func decode(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("reply %q is not JSON: %v", b, err)
	}
	if d.More() {
		t.Fatalf("reply %q has data after the JSON value", b)
	}
	return v
}

// checkEnvelope asserts the rules of section 5 on one reply object.
func checkEnvelope(t testing.TB, r map[string]any) {
	t.Helper()
	if r["jsonrpc"] != "2.0" {
		t.Errorf("reply %v: jsonrpc = %v, want \"2.0\"", r, r["jsonrpc"])
	}
	if _, ok := r["id"]; !ok {
		t.Errorf("reply %v has no id", r)
	}
	_, hasResult := r["result"]
	errObj, hasError := r["error"]
	if hasResult == hasError {
		t.Errorf("reply %v: want exactly one of result and error", r)
	}
	for k := range r {
		switch k {
		case "jsonrpc", "id", "result", "error":
		default:
			t.Errorf("reply %v has unexpected member %q", r, k)
		}
	}
	if !hasError {
		return
	}
	eo, ok := errObj.(map[string]any)
	if !ok {
		t.Fatalf("reply %v: error is not an object", r)
	}
	code, ok := eo["code"].(json.Number)
	if !ok {
		t.Errorf("reply %v: error.code is not a number", r)
	} else if _, err := code.Int64(); err != nil {
		t.Errorf("reply %v: error.code is not an integer", r)
	}
	if _, ok := eo["message"].(string); !ok {
		t.Errorf("reply %v: error.message is not a string", r)
	}
	for k := range eo {
		if k != "code" && k != "message" && k != "data" {
			t.Errorf("reply %v: error has unexpected member %q", r, k)
		}
	}
	for _, leak := range []string{"goroutine ", "panic", ".go:", "proto: ", "rpc error: "} {
		if strings.Contains(eo["message"].(string), leak) {
			t.Errorf("reply %v: error message leaks internals (%q)", r, leak)
		}
	}
}

// errCode returns the error code of a reply, or 0 for a success.
func errCode(t testing.TB, r map[string]any) int64 {
	t.Helper()
	eo, ok := r["error"].(map[string]any)
	if !ok {
		return 0
	}
	n, _ := eo["code"].(json.Number).Int64()
	return n
}

// hashToken is the digest of token in the form Identity.Tokens takes.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}
