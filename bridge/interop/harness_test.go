package interop_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/binary"
)

// waitLimit bounds every wait for a process: to start, to listen, to be
// ready, to exit.
const waitLimit = 30 * time.Second

// root is the repository's root: tests run in bridge/interop.
var root = func() string {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return dir
}()

// kind is one of the foreign gRPC servers.
type kind struct {
	name string
	// command returns the program and arguments that start the server
	// with the flags given.
	command func(flags ...string) []string
	// missing says what is missing to run the server, or "" when nothing is.
	missing func() string
	// reflection says whether the bridge can discover the server by
	// reflection; when not, its tests describe it with the descriptor
	// set and the reflection subtest shows the failure.
	reflection bool
	// reflectionOff says whether the server takes --reflection off; the
	// protoset subtest runs against such a server when it does.
	reflectionOff bool
}

const python3 = "/usr/bin/python3" // Debian's, which has python3-grpcio; not pyenv's

var (
	nodeKind = kind{
		name: "node",
		command: func(flags ...string) []string {
			return append([]string{"node", filepath.Join(root, "proto", "interop", "node", "server.js")}, flags...)
		},
		missing: func() string {
			if _, err := exec.LookPath("node"); err != nil {
				return "node is not installed"
			}
			if _, err := os.Stat(filepath.Join(root, "proto", "interop", "node", "node_modules", "@grpc", "grpc-js", "package.json")); err != nil {
				return "proto/interop/node has no node_modules (npm ci)"
			}
			return ""
		},
		reflection: true, // @grpc/reflection 1.0.4's files, repaired by discovery (docs/backends.md)
	}
	pythonKind = kind{
		name: "python",
		command: func(flags ...string) []string {
			return append([]string{python3, filepath.Join(root, "proto", "interop", "python", "server.py")}, flags...)
		},
		missing: func() string {
			if out, err := exec.Command(python3, "-c", "import grpc, grpc_tools.protoc").CombinedOutput(); err != nil {
				return fmt.Sprintf("%s cannot import grpc and grpc_tools (python3-grpcio, python3-grpc-tools): %v: %s", python3, err, bytes.TrimSpace(out))
			}
			return ""
		},
		reflection:    true,
		reflectionOff: true,
	}
)

// inCI reports whether the tests run in CI, where missing servers fail
// the tests instead of skipping them.
func inCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// require skips (fails in CI) the test when k's server cannot run here.
func require(t *testing.T, k kind) {
	t.Helper()
	if why := k.missing(); why != "" {
		if inCI() {
			t.Fatalf("the %s interop server cannot run: %s; CI must run proto/interop/setup.sh first", k.name, why)
		}
		t.Skipf("the %s interop server cannot run: %s; run proto/interop/setup.sh (as root) to install it", k.name, why)
	}
}

func TestMain(m *testing.M) { binary.Main(m) }

// bridgeBinary is the bridge's binary, built once for all tests (with
// -race when they run with it).
func bridgeBinary(t *testing.T) string { return binary.BuildAsTests(t) }

// startProc starts argv in the repository's root with env added; cleanup
// kills it (SIGKILL) if it still runs.
func startProc(t *testing.T, name string, argv []string, env ...string) *binary.Proc {
	t.Helper()
	return binary.Start(t, argv, binary.Options{Name: name, Dir: root, Env: env, Stop: syscall.SIGKILL})
}

// backendOptions are the interop servers' options (both take the same).
type backendOptions struct {
	compression          bool
	maxConcurrentStreams int
	maxConnectionAge     time.Duration
	maxConnectionGrace   time.Duration
	keepaliveTime        time.Duration
	keepaliveTimeout     time.Duration
	noReflection         bool // serve without reflection (kind.reflectionOff)
	maxMessageBytes      int  // the largest message the server takes; 0: 16 MiB
	maxMetadataBytes     int  // the server's header list limit (grpcio only); 0: 64 KiB
}

func (o backendOptions) flags() []string {
	var f []string
	if o.compression {
		f = append(f, "--compression", "gzip")
	}
	num := func(name string, v int) {
		if v > 0 {
			f = append(f, "--"+name, strconv.Itoa(v))
		}
	}
	num("max-concurrent-streams", o.maxConcurrentStreams)
	num("max-connection-age-ms", int(o.maxConnectionAge/time.Millisecond))
	num("max-connection-age-grace-ms", int(o.maxConnectionGrace/time.Millisecond))
	num("keepalive-time-ms", int(o.keepaliveTime/time.Millisecond))
	num("keepalive-timeout-ms", int(o.keepaliveTimeout/time.Millisecond))
	num("max-message-bytes", o.maxMessageBytes)
	num("max-metadata-bytes", o.maxMetadataBytes)
	if o.noReflection {
		f = append(f, "--reflection", "off")
	}
	return f
}

// backend is a running interop server.
type backend struct {
	kind kind
	opts backendOptions
	addr string // 127.0.0.1:port
	port int

	mu   sync.Mutex
	proc *binary.Proc
	gen  int // how many times it was started
}

// startBackend starts k's server with opts on a free loopback port.
func startBackend(t *testing.T, k kind, opts backendOptions) *backend {
	t.Helper()
	b := &backend{kind: k, opts: opts}
	b.start(t, 0)
	return b
}

// start runs the server on port (0: a free one) and waits until it listens.
func (b *backend) start(t *testing.T, port int) {
	t.Helper()
	b.mu.Lock()
	b.gen++
	name := fmt.Sprintf("%s server #%d", b.kind.name, b.gen)
	b.mu.Unlock()
	p := startProc(t, name, b.kind.command(append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(port)}, b.opts.flags()...)...))
	line := p.Line(t, "listening line", func(l string) bool { return strings.HasPrefix(l, "listening ") })
	addr := strings.TrimPrefix(line, "listening ")
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: listening line %q: %v", name, line, err)
	}
	b.mu.Lock()
	b.proc, b.addr = p, addr
	b.port, _ = strconv.Atoi(portText)
	b.mu.Unlock()
}

// stop sends sig to the server and waits for it to exit.
func (b *backend) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	b.mu.Lock()
	p := b.proc
	b.mu.Unlock()
	if !p.Stop(sig, 15*time.Second) {
		t.Fatalf("%s did not exit within 15s of %v", p.Name(), sig)
	}
	if sig == syscall.SIGTERM && !p.State().Success() {
		t.Errorf("%s exited with %v after SIGTERM, want 0", p.Name(), p.State())
	}
}

// restart starts the server again on the same port.
func (b *backend) restart(t *testing.T) {
	t.Helper()
	b.start(t, b.port)
}

// path is one of the bridge's two ways of making unary calls.
type path struct {
	name   string
	direct bool
}

var paths = []path{{"direct", true}, {"grpc-go", false}}

// bridgeConfig is what a test sets of the bridge's configuration.
type bridgeConfig struct {
	direct          bool
	protoset        bool // describe the backend with proto/testpb/test.protoset instead of reflection
	requestHeaders  []string
	responseHeaders []string
	maxMetadata     int // max_metadata_bytes; 0: maxMetadataBytes
}

// bridgeProc is a running bridge.
type bridgeProc struct {
	kind   kind // of the server behind it
	proc   *binary.Proc
	url    string // http://127.0.0.1:port/
	client *http.Client
	ids    atomic.Int64
}

// Settings every bridge of these tests runs with. max_body_bytes makes
// room for 8 MiB messages (11 MiB of base64 and more); max_response_bytes
// and the 4 MiB limit on a response message stay as they are by default.
const (
	// maxMetadataBytes makes room for the metadata test's 8 KiB values,
	// text and binary (base64), over the default of 16 KiB.
	maxMetadataBytes = 64 << 10
	maxBodyBytes     = 16 << 20
	maxResponseBytes = 8 << 20 // the default
	maxRecvMsgSize   = 4 << 20 // the default of both paths, not configurable
)

// startBridge runs the bridge's binary in front of be and waits until it
// serves be's methods.
func startBridge(t *testing.T, be *backend, cfg bridgeConfig) *bridgeProc {
	t.Helper()
	return startBridgeWith(t, be, cfg, false)
}

// startBridgeWith is startBridge; with noWait, it returns once the bridge
// listens, before discovery.
func startBridgeWith(t *testing.T, be *backend, cfg bridgeConfig, noWait bool) *bridgeProc {
	t.Helper()
	bin := bridgeBinary(t)
	list := func(l []string) string {
		q := make([]string, len(l))
		for i, s := range l {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	yaml := fmt.Sprintf(`backends:
  - name: interop
    address: %s
    plaintext: true
listen: 127.0.0.1:0
direct_calls: %t
max_body_bytes: %d
max_response_bytes: %d
max_metadata_bytes: %d
call_timeout: 20s
refresh_interval: 0s
access_log: false
log_format: json
shutdown_timeout: 10s
metadata:
  request_headers: %s
  response_headers: %s
`, be.addr, cfg.direct, maxBodyBytes, maxResponseBytes, cmp.Or(cfg.maxMetadata, maxMetadataBytes), list(cfg.requestHeaders), list(cfg.responseHeaders))
	if cfg.protoset {
		yaml += "protoset: " + strconv.Quote(filepath.Join(root, "proto", "testpb", "test.protoset")) + "\n"
	}
	file := filepath.Join(t.TempDir(), "bridge.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("bridge (direct_calls: %t) in front of the %s server", cfg.direct, be.kind.name)
	p := startProc(t, name, []string{bin, "serve", "--config", file}, "GOMAXPROCS=2")
	addr := p.Listening(t)
	b := &bridgeProc{kind: be.kind, proc: p, url: "http://" + addr + "/", client: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true},
		Timeout:   60 * time.Second,
	}}
	t.Cleanup(func() {
		// Connections the transport dialed but never used count as
		// active for net/http's Shutdown during their first 5 seconds.
		b.client.CloseIdleConnections()
		checkBridgeExit(t, p)
	})
	if noWait {
		return b
	}
	if err := b.waitReady(10 * time.Second); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

// waitReady polls /readyz until it answers 200.
func (b *bridgeProc) waitReady(limit time.Duration) error {
	err := await.Try(limit, func() error {
		resp, err := b.client.Get(b.url + "readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d %s", resp.StatusCode, body)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("/readyz not 200 within %s; last: %v", limit, err)
	}
	return nil
}

// checkBridgeExit stops the bridge with SIGTERM and checks that it exits
// cleanly, with no data race or panic in its output.
func checkBridgeExit(t *testing.T, p *binary.Proc) {
	if !p.Stop(syscall.SIGTERM, 15*time.Second) {
		t.Errorf("%s did not exit within 15s of SIGTERM", p.Name())
		return
	}
	out := p.Output()
	for _, bad := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s wrote %q:\n%s", p.Name(), bad, out)
		}
	}
	if !p.State().Success() {
		t.Errorf("%s exited with %v after SIGTERM, want status 0", p.Name(), p.State())
	}
}

// reply is one JSON-RPC reply as the bridge sent it.
type reply struct {
	status int
	header http.Header
	body   []byte
	id     json.RawMessage
	result json.RawMessage
	err    *rpcError
	elided bool // a large string was cut out of body before parsing it (see callRaw)
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// errorData is the data of a backend status error.
type errorData struct {
	Status  string            `json:"status"`
	Details []json.RawMessage `json:"details"`
}

func (r reply) String() string {
	b := r.body
	if len(b) > 600 {
		b = append(b[:600:600], "..."...)
	}
	return fmt.Sprintf("HTTP %d %s", r.status, b)
}

// code is the reply's error code, 0 for a result.
func (r reply) code() int {
	if r.err == nil {
		return 0
	}
	return r.err.Code
}

// post sends body to the bridge and returns the HTTP reply without
// reading it as JSON-RPC.
func (b *bridgeProc) post(ctx context.Context, body []byte, header http.Header) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("reading the reply: %w", err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// call makes one JSON-RPC call with a fresh id and checks the envelope of
// the reply: HTTP 200, one object with jsonrpc "2.0", the same id and
// exactly one of result and error.
func (b *bridgeProc) call(ctx context.Context, method string, params any, header http.Header) (reply, error) {
	id := b.ids.Add(1)
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	body, err := json.Marshal(req)
	if err != nil {
		return reply{}, err
	}
	r, err := b.post(ctx, body, header)
	if err != nil {
		return r, err
	}
	if err := r.parse(strconv.FormatInt(id, 10)); err != nil {
		return r, err
	}
	return r, nil
}

// callRaw is call with params already JSON. When the reply holds
// elide, a string of the params, as a JSON string, it is cut out (left
// "") before the reply is parsed, and r.elided is set: parsing megabytes
// of JSON under the race detector takes seconds.
func (b *bridgeProc) callRaw(ctx context.Context, method string, params []byte, header http.Header, elide string) (reply, error) {
	id := strconv.FormatInt(b.ids.Add(1), 10)
	body := make([]byte, 0, len(params)+100)
	body = append(body, `{"jsonrpc":"2.0","id":`+id+`,"method":`+strconv.Quote(method)+`,"params":`...)
	body = append(append(body, params...), '}')
	r, err := b.post(ctx, body, header)
	if err != nil {
		return r, err
	}
	if elide != "" {
		if i := bytes.Index(r.body, []byte(`"`+elide+`"`)); i >= 0 {
			whole := r.body
			r.body = append(append(append([]byte(nil), whole[:i]...), `""`...), whole[i+len(elide)+2:]...)
			r.elided = true
		}
	}
	return r, r.parse(id)
}

// parse checks r's envelope and fills in id, result and err.
func (r *reply) parse(wantID string) error {
	if r.status != http.StatusOK {
		return fmt.Errorf("got %s, want HTTP 200", r)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("Content-Type %q, want application/json: %s", ct, r)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &env); err != nil {
		return fmt.Errorf("the reply is not one JSON object: %v: %s", err, r)
	}
	for k := range env {
		switch k {
		case "jsonrpc", "id", "result", "error":
		default:
			return fmt.Errorf("the reply has member %q: %s", k, r)
		}
	}
	if string(env["jsonrpc"]) != `"2.0"` {
		return fmt.Errorf("jsonrpc is %s, want \"2.0\": %s", env["jsonrpc"], r)
	}
	r.id = env["id"]
	if string(r.id) != wantID {
		return fmt.Errorf("id %s, want %s: %s", r.id, wantID, r)
	}
	res, hasResult := env["result"]
	e, hasError := env["error"]
	if hasResult == hasError {
		return fmt.Errorf("want exactly one of result and error: %s", r)
	}
	r.result = res
	if hasError {
		r.err = &rpcError{}
		if err := json.Unmarshal(e, r.err); err != nil {
			return fmt.Errorf("error object: %v: %s", err, r)
		}
	}
	return nil
}

// mustCall is call failing the test on a transport or envelope error.
func (b *bridgeProc) mustCall(t *testing.T, method string, params any, header http.Header) reply {
	t.Helper()
	r, err := b.call(t.Context(), method, params, header)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

// mustResult is mustCall expecting a result.
func (b *bridgeProc) mustResult(t *testing.T, method string, params any, header http.Header) reply {
	t.Helper()
	r := b.mustCall(t, method, params, header)
	if r.err != nil {
		t.Fatalf("%s: got error %d %q (%s), want a result", method, r.err.Code, r.err.Message, r.err.Data)
	}
	return r
}

const svc = "test.v1.TestService."

// count is the value of a CountReply result.
func count(r reply) (int64, error) {
	var res struct {
		Count string `json:"count"`
	}
	if err := json.Unmarshal(r.result, &res); err != nil {
		return 0, fmt.Errorf("CountReply %s: %w", r.result, err)
	}
	if res.Count == "" {
		return 0, nil // 0 is left out
	}
	return strconv.ParseInt(res.Count, 10, 64)
}
