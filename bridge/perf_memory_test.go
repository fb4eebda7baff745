package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/binary"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

// Goal 4 of the performance issue: 1,000 idle keep-alive connections plus
// a 30-second load cost under 100 MB of RSS, the RSS returns near its idle
// level afterwards, and the goroutines do not grow. It is measured against
// the real binary in its own process, as in production, and only when
// -perf.memory is given:
//
//	go test ./bridge -run TestPerfMemory -perf.memory -v
//	go test ./bridge -run '^$' -bench PerfMemory -perf.memory -benchtime 1x
var (
	perfMemory     = flag.Bool("perf.memory", false, "run the memory scenario of TestPerfMemory and BenchmarkPerfMemory against the built binary")
	perfIdle       = flag.Int("perf.idle", 1000, "idle keep-alive connections held open during the memory scenario")
	perfClients    = flag.Int("perf.clients", 32, "concurrent closed-loop clients of the memory scenario's load")
	perfDuration   = flag.Duration("perf.duration", 30*time.Second, "length of the memory scenario's load")
	perfSettle     = flag.Duration("perf.settle", 10*time.Second, "wait after the load before the last sample")
	perfBridgeArgs = flag.String("perf.bridge-args", "", "extra arguments for the bridge's serve command, space-separated")
	perfBin        = flag.String("perf.bin", "", "bridge binary to measure; empty builds ./cmd/grpc-jsonrpc-bridge")
)

// perfBody is the side-by-side benchmark's request.
const perfBody = `{"jsonrpc":"2.0","id":1,"method":"bench.v1.EchoService.Echo","params":` + benchParams + `}`

// perfSample is the bridge process at one moment.
type perfSample struct {
	rss, rssAnon int64 // VmRSS and RssAnon from /proc/PID/status, bytes
	threads      int64 // OS threads
	goroutines   int64 // go_goroutines from /metrics
	heapInuse    int64 // go_memstats_heap_inuse_bytes
	stackInuse   int64 // go_memstats_stack_inuse_bytes
	sys          int64 // go_memstats_sys_bytes: all the Go runtime got from the OS
}

func (s perfSample) String() string {
	return fmt.Sprintf("RSS %.1f MB (anon %.1f MB), heap in use %.1f MB, stacks %.1f MB, Go sys %.1f MB, %d goroutines, %d threads",
		mb(s.rss), mb(s.rssAnon), mb(s.heapInuse), mb(s.stackInuse), mb(s.sys), s.goroutines, s.threads)
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// perfResult is what the scenario measured.
type perfResult struct {
	start, idle, peak, loadEnd, after perfSample
	requests, errors                  int64
	loadTime                          time.Duration
	idleAlive                         int // idle connections that still answered at the end
}

// TestPerfMemory runs the memory scenario and logs its figures. Without
// -perf.memory it is skipped, so the default test run stays fast.
func TestPerfMemory(t *testing.T) {
	if !*perfMemory {
		t.Skip("the memory scenario runs only with -perf.memory")
	}
	r := runPerfMemory(t)
	t.Logf("%-22s %v", "start:", r.start)
	t.Logf("%-22s %v", fmt.Sprintf("after %d idle:", *perfIdle), r.idle)
	t.Logf("%-22s %v", "peak during load:", r.peak)
	t.Logf("%-22s %v", "end of load:", r.loadEnd)
	t.Logf("%-22s %v", fmt.Sprintf("%v after load:", *perfSettle), r.after)
	t.Logf("load: %d clients, %v, %d requests (%.0f req/s), %d errors; %d of %d idle connections still answered at the end",
		*perfClients, r.loadTime.Round(time.Millisecond), r.requests, float64(r.requests)/r.loadTime.Seconds(), r.errors, r.idleAlive, *perfIdle)
	t.Logf("goal 4: peak RSS %.1f MB (limit 100 MB), after load %.1f MB vs idle %.1f MB (%+.1f MB), goroutines idle %d, after %d",
		mb(r.peak.rss), mb(r.after.rss), mb(r.idle.rss), mb(r.after.rss-r.idle.rss), r.idle.goroutines, r.after.goroutines)
	if r.errors > 0 {
		t.Errorf("%d requests of the load failed", r.errors)
	}
	if r.idleAlive != *perfIdle {
		t.Errorf("%d of %d idle connections answered at the end", r.idleAlive, *perfIdle)
	}
	// Goroutines are counted, not timed: more after the load than before it
	// is a leak (a few spare for the runtime's and the HTTP server's own).
	if r.after.goroutines > r.idle.goroutines+5 {
		t.Errorf("goroutines grew from %d with the idle connections to %d after the load", r.idle.goroutines, r.after.goroutines)
	}
}

// BenchmarkPerfMemory runs the memory scenario once (use -benchtime 1x)
// and reports its figures as metrics.
func BenchmarkPerfMemory(b *testing.B) {
	if !*perfMemory {
		b.Skip("the memory scenario runs only with -perf.memory")
	}
	var r perfResult
	for b.Loop() {
		r = runPerfMemory(b)
	}
	b.ReportMetric(mb(r.start.rss), "start-RSS-MB")
	b.ReportMetric(mb(r.idle.rss), "idle-RSS-MB")
	b.ReportMetric(mb(r.peak.rss), "peak-RSS-MB")
	b.ReportMetric(mb(r.after.rss), "after-RSS-MB")
	b.ReportMetric(mb(r.peak.heapInuse), "peak-heap-MB")
	b.ReportMetric(float64(r.idle.goroutines), "idle-goroutines")
	b.ReportMetric(float64(r.peak.goroutines), "peak-goroutines")
	b.ReportMetric(float64(r.after.goroutines), "after-goroutines")
	b.ReportMetric(float64(r.requests)/r.loadTime.Seconds(), "req/s")
	b.ReportMetric(float64(r.errors), "errors")
}

func runPerfMemory(tb testing.TB) perfResult {
	tb.Helper()
	bin := buildBridge(tb)
	backend := startEchoBackend(tb)
	p := startBridge(tb, bin, backend)

	var r perfResult
	r.start = p.sample(tb)

	idle := openIdle(tb, p.addr, *perfIdle)
	r.idle = p.sample(tb)

	// The load, with the bridge sampled every 250 ms for the peak.
	ctx, cancel := context.WithTimeout(tb.Context(), *perfDuration)
	defer cancel()
	var peakMu sync.Mutex
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s, err := p.trySample()
			if err != nil {
				continue
			}
			peakMu.Lock()
			r.peak = maxSample(r.peak, s)
			peakMu.Unlock()
		}
	}()
	r.requests, r.errors, r.loadTime = perfLoad(ctx, p.addr, *perfClients)
	<-samplerDone
	r.loadEnd = p.sample(tb)
	r.peak = maxSample(r.peak, r.loadEnd)

	// The wait after the load, logged every 10 s: the runtime forces a GC
	// every 2 minutes of quiet and returns memory to the OS in the
	// background, so a long -perf.settle shows where the RSS goes.
	settleEnd := time.Now().Add(*perfSettle)
	for wait := time.Until(settleEnd); wait > 0; wait = time.Until(settleEnd) {
		select {
		case <-time.After(min(wait, 10*time.Second)):
		case <-tb.Context().Done():
			tb.Fatal("interrupted")
		}
		if time.Until(settleEnd) > 0 {
			tb.Logf("%v after load: %v", (*perfSettle - time.Until(settleEnd)).Round(time.Second), p.sample(tb))
		}
	}
	r.after = p.sample(tb)
	r.idleAlive = idle.ping(p.addr)
	return r
}

// maxSample keeps the largest of each figure.
func maxSample(a, b perfSample) perfSample {
	return perfSample{
		rss: max(a.rss, b.rss), rssAnon: max(a.rssAnon, b.rssAnon), threads: max(a.threads, b.threads),
		goroutines: max(a.goroutines, b.goroutines), heapInuse: max(a.heapInuse, b.heapInuse),
		stackInuse: max(a.stackInuse, b.stackInuse), sys: max(a.sys, b.sys),
	}
}

// buildBridge is the bridge's binary as it ships (binary.Build: built
// once per test process), unless -perf.bin names one.
func buildBridge(tb testing.TB) string {
	tb.Helper()
	if *perfBin != "" {
		return *perfBin
	}
	return binary.Build(tb)
}

// startEchoBackend serves bench.v1.EchoService with reflection on
// loopback until tb ends and returns its address.
func startEchoBackend(tb testing.TB) string {
	tb.Helper()
	return testserver.Start(tb, testserver.Options{Addr: testserver.Loopback, Services: []testserver.Service{testserver.Echo}, NoConn: true}).Addr()
}

// bridgeProc is the bridge's process.
type bridgeProc struct {
	pid  int
	addr string
	http *http.Client
}

// startBridge starts the binary against backend on a free loopback port
// (binary.Start: stopped with SIGTERM, then SIGKILL 20 s later, when tb
// ends) and waits until it is ready.
func startBridge(tb testing.TB, bin, backend string) *bridgeProc {
	tb.Helper()
	args := []string{bin, "serve", "--backend", backend, "--listen", "127.0.0.1:0", "--metrics", "--log-format", "text"}
	args = append(args, strings.Fields(*perfBridgeArgs)...)
	proc := binary.Start(tb, args, binary.Options{Name: "bridge", Grace: 20 * time.Second})
	p := &bridgeProc{pid: proc.Pid(), addr: proc.Listening(tb), http: &http.Client{Timeout: 10 * time.Second}}
	proc.Ready(tb, p.addr, 30*time.Second)
	return p
}

// sample reads the process's memory from /proc and its goroutines from
// /metrics.
func (p *bridgeProc) sample(tb testing.TB) perfSample {
	tb.Helper()
	s, err := p.trySample()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func (p *bridgeProc) trySample() (perfSample, error) {
	var s perfSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return s, err
	}
	for line := range strings.Lines(string(status)) {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch key {
		case "VmRSS":
			s.rss = n << 10
		case "RssAnon":
			s.rssAnon = n << 10
		case "Threads":
			s.threads = n
		}
	}
	resp, err := p.http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	found := false
	for line := range strings.Lines(string(body)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			s.goroutines, found = int64(v), true
		case "go_memstats_heap_inuse_bytes":
			s.heapInuse = int64(v)
		case "go_memstats_stack_inuse_bytes":
			s.stackInuse = int64(v)
		case "go_memstats_sys_bytes":
			s.sys = int64(v)
		}
	}
	if !found {
		return s, errors.New("GET /metrics has no go_goroutines")
	}
	return s, nil
}

// idleConns are raw keep-alive connections that sent one request each.
type idleConns struct {
	conns   []net.Conn
	readers []*bufio.Reader
}

// openIdle opens n connections to addr, 50 at a time, each sending one
// call and reading its reply, and leaves them open until tb ends.
func openIdle(tb testing.TB, addr string, n int) *idleConns {
	tb.Helper()
	ic := &idleConns{conns: make([]net.Conn, n), readers: make([]*bufio.Reader, n)}
	tb.Cleanup(func() {
		for _, c := range ic.conns {
			if c != nil {
				c.Close()
			}
		}
	})
	req := []byte("POST / HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(perfBody)) + "\r\n\r\n" + perfBody)
	errs := make([]error, n)
	sem := make(chan struct{}, 50)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				errs[i] = err
				return
			}
			ic.conns[i], ic.readers[i] = c, bufio.NewReader(c)
			errs[i] = roundTrip(c, ic.readers[i], req)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("idle connections: %v", err)
	}
	return ic
}

// ping sends one more call on every idle connection and counts those that
// answered: they were kept open all along.
func (ic *idleConns) ping(addr string) int {
	// The listener is loopback: Host must be a loopback name (allowed_hosts).
	req := []byte("POST / HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(perfBody)) + "\r\n\r\n" + perfBody)
	var ok atomic.Int64
	sem := make(chan struct{}, 50)
	var wg sync.WaitGroup
	for i, c := range ic.conns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if roundTrip(c, ic.readers[i], req) == nil {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	return int(ok.Load())
}

// roundTrip writes req on c and reads one successful JSON-RPC reply.
func roundTrip(c net.Conn, br *bufio.Reader, req []byte) error {
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"result"`)) || resp.Close {
		return fmt.Errorf("HTTP %d, close %v: %s", resp.StatusCode, resp.Close, body)
	}
	return nil
}

// perfLoad runs clients closed-loop workers against addr, each on its own
// keep-alive connection, until ctx is done, and closes their connections.
func perfLoad(ctx context.Context, addr string, clients int) (requests, failures int64, took time.Duration) {
	tr := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "http://" + addr + "/"
	var nreq, nerr atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := client.Post(url, "application/json", strings.NewReader(perfBody))
				if err != nil {
					if ctx.Err() == nil {
						nerr.Add(1)
					}
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"result"`)) {
					nerr.Add(1)
					continue
				}
				nreq.Add(1)
			}
		})
	}
	wg.Wait()
	return nreq.Load(), nerr.Load(), time.Since(start)
}
