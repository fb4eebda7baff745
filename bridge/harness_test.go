package bridge_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// testClient is the HTTP client of the tests: a transport of its own,
// because httptest.Server.Close closes the idle connections of
// http.DefaultTransport, which would break the requests of tests running
// in parallel.
var testClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

// env is a bridge started by newEnv: in front of a real gRPC backend, on
// loopback HTTP.
type env struct {
	url     string
	backend *testv1.Server // the backend's test.v1.TestService (nil with withServices)
	bridge  *bridge.Server
	conn    *grpc.ClientConn    // the test's grpc-go connection to the backend
	be      *testserver.Backend // the backend, to stop and restart it
	hs      *httptest.Server    // the front with netHTTP or onTLS, else nil
	client  *http.Client        // with ownClient: an HTTP client of its own (newHTTPClient)
}

// envConfig is what newEnv's options set; the zero value is the
// production shape: every test service on loopback TCP, discovered, the
// bridge dialing it with backend.Dial (direct_calls: true), behind
// bridge/h1 in front of an http.Server.
type envConfig struct {
	server    []grpc.ServerOption
	services  []testserver.Service
	dial      []grpc.DialOption
	path      callPath
	through   grpc.ClientConnInterface
	bufconn   bool
	reconnect bool // the test connection is dialLoopback's
	skip      bool // not discovered
	only      []string
	on        *testserver.Backend // serve in front of this backend, started by another env
	front     front
	tls       *tls.Config
	client    bool
}

// An envOption shapes the bridge newEnv starts.
type envOption func(*envConfig)

// callPath is how the bridge calls the backend.
type callPath int

const (
	direct       callPath = iota // backend.Dial, direct_calls: true, as in production
	dialedGRPCGo                 // backend.Dial, direct_calls: false
	testConn                     // the test's own grpc-go connection (the backend's Dial options)
)

// front is what serves the bridge's HTTP.
type front int

const (
	h1Front front = iota // bridge/h1 in front of an http.Server, as serve does
	netHTTP              // httptest.NewServer: net/http alone
)

// withServer adds options of the backend's gRPC server (interceptors,
// limits, codecs).
func withServer(o ...grpc.ServerOption) envOption {
	return func(c *envConfig) { c.server = append(c.server, o...) }
}

// withServices serves only these services (testserver.Options.Services).
func withServices(s ...testserver.Service) envOption {
	return func(c *envConfig) { c.services = s }
}

// withDial sets the options of the test's connection to the backend
// (default backend.DialOptions()).
func withDial(o ...grpc.DialOption) envOption {
	return func(c *envConfig) { c.dial = append([]grpc.DialOption{}, o...) }
}

// via picks how the bridge calls the backend.
func via(p callPath) envOption { return func(c *envConfig) { c.path = p } }

// directIf is via(direct) when d, else via(testConn): the two paths of
// forBothPaths.
func directIf(d bool) envOption {
	if d {
		return via(direct)
	}
	return via(testConn)
}

// through makes the bridge call cc (a connection to a dead, stalled or
// impostor backend) while it discovers the started backend.
func through(cc grpc.ClientConnInterface) envOption { return func(c *envConfig) { c.through = cc } }

// onBufconn serves the backend on bufconn; the bridge calls through the
// test's connection (there is no address to dial).
func onBufconn() envOption {
	return func(c *envConfig) { c.bufconn, c.path = true, testConn }
}

// reconnecting makes the bridge call through a connection of dialLoopback
// (quick reconnects) with o, for tests that stop and restart the backend.
func reconnecting(o ...grpc.DialOption) envOption {
	return func(c *envConfig) { c.reconnect, c.dial, c.path = true, o, testConn }
}

// undiscovered leaves the bridge without the backend's services.
func undiscovered() envOption { return func(c *envConfig) { c.skip = true } }

// only serves the discovered methods that match patterns (Registry.Filter).
func only(patterns ...string) envOption { return func(c *envConfig) { c.only = patterns } }

// sharing puts the bridge in front of the backend of e, rather than a new one.
func sharing(e *env) envOption { return func(c *envConfig) { c.on = e.be } }

// servedBy picks the front.
func servedBy(f front) envOption { return func(c *envConfig) { c.front = f } }

// onTLS serves the bridge with httptest over TLS configured by cfg (the
// test's certificate is added); env.hs.Client() trusts it.
func onTLS(cfg *tls.Config) envOption {
	return func(c *envConfig) { c.front, c.tls = netHTTP, cfg }
}

// ownClient gives the env an HTTP client of its own (newHTTPClient), for
// the stress tests.
func ownClient() envOption { return func(c *envConfig) { c.client = true } }

// newEnv starts a backend, a bridge with opts in front of it, and an HTTP
// front for the bridge, shaped by with; everything stops when the test
// ends. It is the one place the package's tests start a bridge.
func newEnv(t testing.TB, opts bridge.Options, with ...envOption) *env {
	t.Helper()
	var c envConfig
	for _, o := range with {
		o(&c)
	}
	be := c.on
	if be == nil {
		o := testserver.Options{Addr: testserver.Loopback, Services: c.services, Server: c.server, Dial: backend.DialOptions(), NoConn: c.reconnect}
		if c.bufconn {
			o.Addr = ""
		}
		if c.dial != nil && !c.reconnect {
			o.Dial = c.dial
		}
		be = testserver.Start(t, o)
	}
	conn := be.Conn()
	if c.reconnect {
		conn = dialLoopback(t, be.Addr(), c.dial...)
	}
	var cc grpc.ClientConnInterface = conn
	switch {
	case c.through != nil:
		cc = c.through
	case c.path == direct:
		cc = dialBackend(t, be.Addr(), true)
	case c.path == dialedGRPCGo:
		cc = dialBackend(t, be.Addr(), false)
	}
	srv := bridge.New(cc, opts)
	if !c.skip {
		reg := discoverOrFail(t, conn)
		if c.only != nil {
			var err error
			if reg, err = reg.Filter(c.only, nil); err != nil {
				t.Fatal(err)
			}
		}
		srv.Update(reg)
	}
	e := &env{bridge: srv, conn: conn, be: be, backend: be.Test()}
	if c.client {
		e.client = newHTTPClient(t)
	}
	if c.front == h1Front {
		e.url = serveBridge(t, srv, nil)
		return e
	}
	e.hs = httptest.NewUnstartedServer(srv)
	if c.tls != nil {
		e.hs.TLS = c.tls
		e.hs.StartTLS()
	} else {
		e.hs.Start()
	}
	t.Cleanup(e.hs.Close)
	e.url = e.hs.URL
	return e
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
