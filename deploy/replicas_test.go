package deploy

// The harness of the scaling tests (scaling_test.go): replicas are real
// `serve` processes of a binary built once, behind a real nginx running
// nginx/bridge.conf with their addresses filled in, in front of a real
// gRPC backend on loopback; the shared store is a real redis-server.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/binary"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/daemon"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

func TestMain(m *testing.M) { binary.Main(m) }

// bridgeBinary is the bridge's binary, built once for all the tests of the
// package.
func bridgeBinary(t *testing.T) string { return binary.Build(t) }

// freePorts are n loopback TCP ports nothing listens on now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var liss []net.Listener
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		liss = append(liss, lis)
		ports = append(ports, lis.Addr().(*net.TCPAddr).Port)
	}
	for _, lis := range liss {
		lis.Close()
	}
	return ports
}

// startBackend serves every test service on a loopback port.
func startBackend(t *testing.T) string {
	t.Helper()
	return testserver.Start(t, testserver.Options{Addr: testserver.Loopback, NoConn: true}).Addr()
}

// replica is one bridge process on a fixed port, which it keeps across
// restarts (nginx's configuration names it).
type replica struct {
	t    *testing.T
	bin  string
	port int
	args []string

	mu   sync.Mutex
	proc *binary.Proc // the latest start's
}

// startReplicas starts n replicas of serve with args (the backend's
// services from the test protoset: ready at once) and waits until each
// is ready. Cleanup kills those still running.
func startReplicas(t *testing.T, n int, args ...string) []*replica {
	t.Helper()
	bin := bridgeBinary(t)
	var rs []*replica
	for _, port := range freePorts(t, n) {
		rs = append(rs, &replica{t: t, bin: bin, port: port, args: args})
	}
	for _, r := range rs {
		r.start()
	}
	for _, r := range rs {
		r.waitReady()
	}
	return rs
}

func (r *replica) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// start runs the process, killed (SIGKILL) when the test ends if it still
// runs; waitReady waits until /readyz is 200.
func (r *replica) start() {
	r.t.Helper()
	args := append([]string{r.bin, "serve", "--listen", r.addr(), "--log-format", "json",
		"--protoset", filepath.Join("..", "proto", "testpb", "test.protoset")}, r.args...)
	p := binary.Start(r.t, args, binary.Options{Name: "replica " + r.addr(), Stop: syscall.SIGKILL})
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
}

func (r *replica) current() *binary.Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

func (r *replica) waitReady() {
	r.t.Helper()
	r.current().Ready(r.t, r.addr(), 30*time.Second)
}

// log is what the latest process has written.
func (r *replica) log() string { return r.current().Output() }

// sigterm sends SIGTERM, as Kubernetes and systemd stop a process.
func (r *replica) sigterm() { r.current().Signal(syscall.SIGTERM) }

// wait waits for the process to exit and returns its exit code.
func (r *replica) wait(limit time.Duration) int {
	r.t.Helper()
	return r.current().Wait(r.t, limit)
}

// metric is the value of the series name (labels included, as the
// exposition writes them) in the replica's /metrics, 0 if absent.
func (r *replica) metric(name string) float64 {
	r.t.Helper()
	resp, err := http.Get("http://" + r.addr() + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// nginx is an nginx process running nginx/bridge.conf.
type nginx struct {
	addr string
	dir  string
	log  *daemon.Log
}

// nginxBinary is nginx's path; the test is skipped, naming the Debian
// package, when it is missing (failed under CI).
func nginxBinary(t *testing.T) string { return daemon.Need(t, "nginx", "nginx") }

var (
	listenLine   = regexp.MustCompile(`(?m)^(\s*listen\s+)\S+?(\s*;|\s+[^;]*;)`)
	upstreamHead = regexp.MustCompile(`(?m)^\s*upstream\s+\S+\s*\{`)
	serverLine   = regexp.MustCompile(`(?m)^(\s*server\s+)(\S+?)(\s*;|\s+[^;]*;)[ \t]*\n`)
)

// fillIn puts listen into the listen line of conf and one server line per
// address into its one upstream block, each keeping the parameters of the
// line it replaces (the last one's past their number).
func fillIn(conf, listen string, servers []string) (string, error) {
	if n := len(listenLine.FindAllString(conf, -1)); n != 1 {
		return "", fmt.Errorf("%d listen lines, want 1", n)
	}
	conf = listenLine.ReplaceAllString(conf, "${1}"+listen+"${2}")
	heads := upstreamHead.FindAllStringIndex(conf, -1)
	if len(heads) != 1 {
		return "", fmt.Errorf("%d upstream blocks, want 1", len(heads))
	}
	start := heads[0][1]
	end := start + strings.IndexByte(conf[start:], '}')
	block := conf[start:end]
	lines := serverLine.FindAllStringSubmatchIndex(block, -1)
	if len(lines) == 0 {
		return "", errors.New("no server line in the upstream block")
	}
	var out strings.Builder
	for i, addr := range servers {
		m := lines[min(i, len(lines)-1)]
		out.WriteString(block[m[2]:m[3]] + addr + block[m[6]:m[7]] + "\n")
	}
	first, last := lines[0][0], lines[len(lines)-1][1]
	block = block[:first] + out.String() + block[last:]
	return conf[:start] + block + conf[end:], nil
}

// startNginx runs nginx/bridge.conf on a free loopback port in front of
// the replicas, and waits until it accepts connections. Cleanup stops it.
func startNginx(t *testing.T, replicas []*replica) *nginx {
	t.Helper()
	bin := nginxBinary(t)
	conf, err := os.ReadFile(filepath.Join("nginx", "bridge.conf"))
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	var servers []string
	for _, r := range replicas {
		servers = append(servers, r.addr())
	}
	filled, err := fillIn(string(conf), addr, servers)
	if err != nil {
		t.Fatalf("nginx/bridge.conf: %v", err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // nginx's workers may run as another user
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bridge.conf")
	if err := os.WriteFile(path, []byte(filled), 0o644); err != nil {
		t.Fatal(err)
	}
	// SIGQUIT at the end: graceful, its workers finish.
	log := daemon.Start(t, exec.Command(bin, "-p", dir, "-c", path, "-e", "stderr"), syscall.SIGQUIT, addr)
	return &nginx{addr: addr, dir: dir, log: log}
}

// accessLog is what nginx has logged of its requests so far.
func (n *nginx) accessLog(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.dir, "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// identities writes an authentication file of one identity, "team",
// whose bearer token is token, and returns its path.
func identities(t *testing.T, token string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(token))
	path := filepath.Join(t.TempDir(), "identities.yaml")
	data := "identities:\n  - name: team\n    tokens: [\"sha256:" + hex.EncodeToString(sum[:]) + "\"]\n    allow: [\"*\"]\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// outcome is what became of one call of a load run.
type outcome struct {
	sent    time.Duration // since the run began
	latency time.Duration
	status  int   // HTTP status, 0 when err
	err     error // a connection error
	body    string
}

// drive sends calls at rate calls a second for d (or until ctx ends, the
// calls sent then let finish), open loop, each a POST
// of body to url with header, and returns every outcome in the order
// they were sent. At most 512 calls wait at once; one more counts as a
// failure.
func drive(ctx context.Context, url, body string, header http.Header, rate float64, d time.Duration) []outcome {
	tr := &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second}
	total := int(rate * d.Seconds())
	out := make([]outcome, total)
	sem := make(chan struct{}, 512)
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for sent := 0; sent < total; {
		select {
		case <-ctx.Done():
			total = sent
		case <-tick.C:
		}
		due := min(total, int(time.Since(start).Seconds()*rate))
		for ; sent < due; sent++ {
			o := &out[sent]
			o.sent = time.Since(start)
			select {
			case sem <- struct{}{}:
			default:
				o.err = errors.New("512 calls waiting: the load generator fell behind")
				continue
			}
			wg.Go(func() {
				defer func() { <-sem }()
				// A call sent is let finish when ctx ends the sending.
				req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, url, strings.NewReader(body))
				if err != nil {
					o.err = err
					return
				}
				if header != nil {
					req.Header = header.Clone()
				}
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					o.err = err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				o.latency, o.status = time.Since(t0), resp.StatusCode
				if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
					o.body = string(b)
				} else if resp.StatusCode == http.StatusOK && !bytes.Contains(b, []byte(`"result"`)) {
					o.body, o.status = string(b), -1 // 200 without a result
				}
			})
		}
	}
	wg.Wait()
	return out[:total]
}

// perSecond counts, for each whole second of the run (by when calls
// were sent), the calls whose outcome matches.
func perSecond(out []outcome, match func(outcome) bool) []int {
	var counts []int
	if len(out) == 0 {
		return nil
	}
	whole := int(out[len(out)-1].sent/time.Second) + 1
	if out[len(out)-1].sent%time.Second < 900*time.Millisecond {
		whole-- // the last second is not whole
	}
	for _, o := range out {
		s := int(o.sent / time.Second)
		if s >= whole {
			break
		}
		for len(counts) <= s {
			counts = append(counts, 0)
		}
		if match(o) {
			counts[s]++
		}
	}
	return counts
}

func admitted(o outcome) bool { return o.status == http.StatusOK }

// failures lists the outcomes that are neither a result nor a 429, with
// the first few described.
func failures(out []outcome) (int, string) {
	n := 0
	var b strings.Builder
	for _, o := range out {
		if o.err == nil && (o.status == http.StatusOK || o.status == http.StatusTooManyRequests) {
			continue
		}
		n++
		if n <= 5 {
			fmt.Fprintf(&b, "  at %s: status %d, error %v, body %.200s\n", o.sent.Round(time.Millisecond), o.status, o.err, o.body)
		}
	}
	return n, b.String()
}

// p99 is the 99th percentile latency of the successful calls among out
// sent within [from, to).
func p99(out []outcome, from, to time.Duration) (time.Duration, int) {
	var ls []time.Duration
	for _, o := range out {
		if o.sent >= from && o.sent < to && o.status == http.StatusOK {
			ls = append(ls, o.latency)
		}
	}
	if len(ls) == 0 {
		return 0, 0
	}
	slices.Sort(ls)
	return ls[min(len(ls)-1, len(ls)*99/100)], len(ls)
}
