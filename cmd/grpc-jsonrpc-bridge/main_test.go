package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// waitLimit bounds every wait of these tests.
const waitLimit = 20 * time.Second

// output is a writer for run whose lines the test reads as they come.
type output struct {
	w     *io.PipeWriter
	lines chan string
	done  chan struct{}
}

func newOutput() *output {
	r, w := io.Pipe()
	o := &output{w: w, lines: make(chan string, 10000), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		defer close(o.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			o.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return o
}

// until returns the lines read up to and including the first one match
// accepts.
func (o *output) until(t *testing.T, what string, match func(string) bool) []string {
	t.Helper()
	var got []string
	timeout := time.After(waitLimit)
	for {
		select {
		case line, ok := <-o.lines:
			if !ok {
				t.Fatalf("output ended before %s; got:\n%s", what, strings.Join(got, "\n"))
			}
			got = append(got, line)
			if match(line) {
				return got
			}
		case <-timeout:
			t.Fatalf("no %s within %s; got:\n%s", what, waitLimit, strings.Join(got, "\n"))
		}
	}
}

// rest returns every line not read yet; call it after run has returned.
func (o *output) rest() string {
	var got []string
	for line := range o.lines {
		got = append(got, line)
	}
	return strings.Join(got, "\n")
}

// process is run running in the background.
type process struct {
	cancel         context.CancelFunc
	exit           chan int
	stdout, stderr *output
}

// start runs run(args) in the background; cleanup stops it.
func start(t *testing.T, args ...string) *process {
	t.Helper()
	clearEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	p := &process{cancel: cancel, exit: make(chan int, 1), stdout: newOutput(), stderr: newOutput()}
	go func() {
		code := run(ctx, args, p.stdout.w, p.stderr.w)
		p.stdout.w.Close()
		p.stderr.w.Close()
		p.exit <- code
	}()
	t.Cleanup(func() {
		cancel()
		p.wait(t)
		<-p.stdout.done
		<-p.stderr.done
	})
	return p
}

// stop cancels run's context and returns its exit code.
func (p *process) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	return p.wait(t)
}

func (p *process) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.exit:
		p.exit <- code
		return code
	case <-time.After(waitLimit):
		t.Fatalf("run did not return within %s", waitLimit)
		return -1
	}
}

// runSync runs run(args) to completion and returns its exit code and output.
func runSync(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	clearEnv(t)
	var stdout, stderr strings.Builder
	code := run(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// clearEnv keeps the developer's BRIDGE_* variables out of the test.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "BRIDGE_") {
			t.Setenv(name, "")
		}
	}
}

var curlLine = regexp.MustCompile(`^\s*curl -s -w '\\n'( -i)? (http://\S+)(?: -d '(.*)')?$`)

func TestDemo(t *testing.T) {
	p := start(t, "demo", "--listen", "127.0.0.1:0")
	banner := p.stdout.until(t, "end of banner", func(l string) bool { return strings.HasPrefix(l, "Press Ctrl+C") })

	type call struct{ url, body string }
	var calls []call
	for _, line := range banner {
		if m := curlLine.FindStringSubmatch(line); m != nil {
			calls = append(calls, call{url: m[2], body: m[3]})
		} else if strings.Contains(line, "curl") {
			t.Errorf("cannot parse curl line %q", line)
		}
	}
	if len(calls) != 9 {
		t.Fatalf("got %d curl lines, want 9:\n%s", len(calls), strings.Join(banner, "\n"))
	}
	if u := calls[0].url; !strings.HasPrefix(u, "http://127.0.0.1:") || strings.HasSuffix(u, ":0/") {
		t.Errorf("got URL %s, want the real loopback address", u)
	}

	// Every printed line works, in the order printed.
	want := []struct {
		status int
		check  func(reply) string
	}{
		{200, wantResult(`{"message":"Hello, Ada!"}`)},
		{200, wantField("title", `"Welcome"`)},
		{200, wantField("id", `"n2"`)},
		{200, wantField("total", `"1"`)},
		{204, nil},
		{200, wantResult(`{"value":"5"}`)},
		{200, wantErrorCode(5)},
		{200, nil},
		{200, nil},
	}
	for i, c := range calls {
		status, body := do(t, c.url, c.body)
		if status != want[i].status {
			t.Errorf("%s %s: got HTTP %d, want %d (%s)", c.url, c.body, status, want[i].status, body)
			continue
		}
		if want[i].check != nil {
			var r reply
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Errorf("%s: got %q, not a JSON-RPC reply: %v", c.body, body, err)
				continue
			}
			if msg := want[i].check(r); msg != "" {
				t.Errorf("%s: %s", c.body, msg)
			}
		}
	}
	if _, body := do(t, calls[7].url, calls[7].body); !strings.Contains(body, `"Hello, Grace!"`) || !strings.HasPrefix(body, "[") {
		t.Errorf("batch: got %s, want an array greeting Grace", body)
	}

	if code := p.stop(t); code != exitOK {
		t.Errorf("got exit code %d, want 0; stderr:\n%s", code, p.stderr.rest())
	}
}

func TestServe(t *testing.T) {
	backend := startBackend(t, nil)
	p := start(t, "serve", "--backend", backend, "--listen", "127.0.0.1:0", "--log-format", "json")
	var addr string
	p.stderr.until(t, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
			return true
		}
		return false
	})
	p.stderr.until(t, "discovery log", func(l string) bool { return strings.Contains(l, "discovered") })
	status, body := do(t, "http://"+addr+"/", `{"jsonrpc":"2.0","id":"a","method":"helloworld.Greeter.SayHello","params":{}}`)
	if status != 200 || body != `{"jsonrpc":"2.0","id":"a","result":{"message":"Hello, world!"}}` {
		t.Errorf("got %d %s, want the world greeted", status, body)
	}
	if status, _ := do(t, "http://"+addr+"/readyz", ""); status != 200 {
		t.Errorf("readyz: got %d, want 200", status)
	}
	if code := p.stop(t); code != exitOK {
		t.Errorf("got exit code %d, want 0; stderr:\n%s", code, p.stderr.rest())
	}
}

// TestServeShutdownTimeout: a call still running when the shutdown timeout
// ends makes the exit a failure.
func TestServeShutdownTimeout(t *testing.T) {
	sleeping := make(chan struct{}, 1)
	backend := startBackend(t, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/Sleep") {
			sleeping <- struct{}{}
		}
		return h(ctx, req)
	})
	p := start(t, "serve", "--backend", backend, "--listen", "127.0.0.1:0", "--log-format", "json", "--shutdown-timeout", "100ms")
	var addr string
	p.stderr.until(t, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
			return true
		}
		return false
	})
	p.stderr.until(t, "discovery log", func(l string) bool { return strings.Contains(l, "discovered") })
	called := make(chan struct{})
	go func() {
		defer close(called)
		_, _ = http.Post("http://"+addr+"/", "application/json",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Sleep","params":{"duration":"60s"}}`))
	}()
	t.Cleanup(func() { <-called })
	select {
	case <-sleeping:
	case <-time.After(waitLimit):
		t.Fatal("the Sleep call never reached the backend")
	}
	code := p.stop(t)
	rest := p.stderr.rest()
	if code != exitFailure || !strings.Contains(rest, "shutdown") {
		t.Errorf("got exit code %d, want 1 and a shutdown error; stderr:\n%s", code, rest)
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	unknownKey := filepath.Join(dir, "unknown.yaml")
	if err := os.WriteFile(unknownKey, []byte("backend: localhost:1\nlisen: :8080\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string
		wantStdout string
	}{
		{name: "serve without backend", args: []string{"serve"}, wantCode: exitUsage, wantStderr: []string{"no backend", "--backend"}},
		{name: "unknown config key", args: []string{"serve", "--config", unknownKey}, wantCode: exitUsage, wantStderr: []string{`"lisen"`, unknownKey}},
		{name: "missing config file", args: []string{"serve", "--config", filepath.Join(dir, "none.yaml")}, wantCode: exitUsage, wantStderr: []string{"none.yaml"}},
		{name: "bad value", args: []string{"serve", "--backend", "localhost:1", "--max-batch-size", "0"}, wantCode: exitUsage, wantStderr: []string{"max_batch_size"}},
		{name: "demo bad value", args: []string{"demo", "--log-level", "loud"}, wantCode: exitUsage, wantStderr: []string{"log_level"}},
		{name: "demo has no backend flag", args: []string{"demo", "--backend", "x:1"}, wantCode: exitUsage, wantStderr: []string{"unknown flag: --backend"}},
		{name: "unknown flag", args: []string{"serve", "--nope"}, wantCode: exitUsage, wantStderr: []string{"--nope"}},
		{name: "unknown command", args: []string{"serf"}, wantCode: exitUsage, wantStderr: []string{`unknown command "serf"`}},
		{name: "no command", wantCode: exitUsage, wantStderr: []string{"missing command"}},
		{name: "stray argument", args: []string{"serve", "extra"}, wantCode: exitUsage, wantStderr: []string{"extra"}},
		{name: "listen address in use", args: []string{"serve", "--backend", "localhost:1", "--listen", busy.Addr().String()}, wantCode: exitFailure, wantStderr: []string{busy.Addr().String()}},
		{name: "help", args: []string{"serve", "--help"}, wantCode: exitOK, wantStdout: "--max-body-bytes"},
		{name: "version", args: []string{"version"}, wantCode: exitOK, wantStdout: "grpc-jsonrpc-bridge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("got exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("got stderr %q, want it to contain %q", stderr, want)
				}
			}
			if !strings.Contains(stdout, tt.wantStdout) {
				t.Errorf("got stdout %q, want it to contain %q", stdout, tt.wantStdout)
			}
		})
	}
}

func TestDialable(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "loopback", in: "127.0.0.1:80", want: "127.0.0.1:80"},
		{name: "any IPv4", in: "0.0.0.0:80", want: "127.0.0.1:80"},
		{name: "any IPv6", in: "[::]:80", want: "[::1]:80"},
		{name: "host", in: "10.1.2.3:80", want: "10.1.2.3:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, err := net.ResolveTCPAddr("tcp", tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := dialable(addr); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// startBackend serves helloworld.Greeter and test.v1.TestService with
// reflection on a loopback port and returns its address.
func startBackend(t *testing.T, intercept grpc.UnaryServerInterceptor) string {
	t.Helper()
	var opts []grpc.ServerOption
	if intercept != nil {
		opts = append(opts, grpc.UnaryInterceptor(intercept))
	}
	return testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Server: opts, NoConn: true,
		Services: []testserver.Service{testserver.Greeter, testserver.Test(testv1.NewServer())}}).Addr()
}

// reply is a JSON-RPC response.
type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

func wantResult(want string) func(reply) string {
	return func(r reply) string {
		if string(r.Result) != want {
			return fmt.Sprintf("got result %s, want %s", r.Result, want)
		}
		return ""
	}
}

func wantField(name, want string) func(reply) string {
	return func(r reply) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.Result, &m); err != nil || string(m[name]) != want {
			return fmt.Sprintf("got result %s, want %s %s", r.Result, name, want)
		}
		return ""
	}
}

func wantErrorCode(want int) func(reply) string {
	return func(r reply) string {
		if r.Error == nil || r.Error.Code != want {
			return fmt.Sprintf("got error %+v, want code %d", r.Error, want)
		}
		return ""
	}
}

// do POSTs body to url, or GETs url if body is empty, and returns the
// HTTP status and body.
func do(t *testing.T, url, body string) (int, string) {
	t.Helper()
	var resp *http.Response
	var err error
	if body == "" {
		resp, err = http.Get(url)
	} else {
		resp, err = http.Post(url, "application/json", strings.NewReader(body))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
