package interop_test

import (
	"bufio"
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

// The bridge's binary, built once for all tests (with -race when they
// run with it).
var (
	buildOnce sync.Once
	bridgeBin string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func bridgeBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("no go tool to build the bridge: %w", err)
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "interop-bridge-")
		if buildErr != nil {
			return
		}
		bin := filepath.Join(buildDir, "grpc-jsonrpc-bridge")
		args := []string{"build", "-o", bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command(goTool, append(args, "./cmd/grpc-jsonrpc-bridge")...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		bridgeBin = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bridgeBin
}

// proc is a subprocess whose output the test keeps and reads.
type proc struct {
	name  string
	cmd   *exec.Cmd
	lines chan string   // every output line, while someone may wait for one
	done  chan struct{} // closed once the process has exited and its output is read
	state *os.ProcessState

	mu  sync.Mutex
	log []string // every output line, prefixed with its stream
}

// startProc starts argv; cleanup kills it if it still runs.
func startProc(t *testing.T, name string, argv []string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	dieWithTest(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, lines: make(chan string, 4096), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var wg sync.WaitGroup
	for _, s := range []struct {
		r      io.Reader
		prefix string
	}{{stdout, "out"}, {stderr, "err"}} {
		wg.Go(func() {
			sc := bufio.NewScanner(s.r)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				line := sc.Text()
				p.mu.Lock()
				p.log = append(p.log, s.prefix+": "+line)
				p.mu.Unlock()
				select {
				case p.lines <- line:
				default: // nobody waits for lines this late
				}
			}
			_, _ = io.Copy(io.Discard, s.r)
		})
	}
	go func() {
		wg.Wait()
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("output of %s (last lines):\n%s", name, p.tail(40))
		}
	})
	return p
}

// until returns the first output line that match accepts, failing the test
// if the process exits or waitLimit passes first.
func (p *proc) until(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case line := <-p.lines:
			if match(line) {
				return line
			}
		case <-p.done:
			// drain what is left
			for {
				select {
				case line := <-p.lines:
					if match(line) {
						return line
					}
				default:
					t.Fatalf("%s exited (%v) before %s; output:\n%s", p.name, p.state, what, p.tail(40))
				}
			}
		case <-timeout:
			t.Fatalf("%s: no %s within %s; output:\n%s", p.name, what, waitLimit, p.tail(40))
		}
	}
}

func (p *proc) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.log
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// output returns every line the process has written.
func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig and waits up to limit for the process to exit; it
// reports whether it did.
func (p *proc) signal(sig syscall.Signal, limit time.Duration) bool {
	if p.exited() {
		return true
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return true
	case <-time.After(limit):
		return false
	}
}

func (p *proc) kill() {
	if !p.signal(syscall.SIGKILL, waitLimit) {
		panic(p.name + " did not exit after SIGKILL")
	}
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
	proc *proc
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
	line := p.until(t, "listening line", func(l string) bool { return strings.HasPrefix(l, "listening ") })
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
	if !p.signal(sig, 15*time.Second) {
		t.Fatalf("%s did not exit within 15s of %v", p.name, sig)
	}
	if sig == syscall.SIGTERM && !p.state.Success() {
		t.Errorf("%s exited with %v after SIGTERM, want 0", p.name, p.state)
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
	proc   *proc
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
	var addr string
	p.until(t, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
			return true
		}
		return false
	})
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
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		resp, err := b.client.Get(b.url + "readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("/readyz not 200 within %s; last: %s", limit, last)
}

// checkBridgeExit stops the bridge with SIGTERM and checks that it exits
// cleanly, with no data race or panic in its output.
func checkBridgeExit(t *testing.T, p *proc) {
	if !p.signal(syscall.SIGTERM, 15*time.Second) {
		t.Errorf("%s did not exit within 15s of SIGTERM", p.name)
		return
	}
	out := p.output()
	for _, bad := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s wrote %q:\n%s", p.name, bad, out)
		}
	}
	if !p.state.Success() {
		t.Errorf("%s exited with %v after SIGTERM, want status 0", p.name, p.state)
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
