package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"strconv"

	"crypto/sha256"

	"encoding/hex"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// TestGracefulShutdown: calls in flight when the signal arrives complete
// with their results, /readyz answers 503 during the drain, new connections
// are refused after shutdown_delay, and the exit is 0.
func TestGracefulShutdown(t *testing.T) {
	const slow = 3
	entered := make(chan struct{}, slow)
	release := make(chan struct{})
	backend := startBackend(t, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/Sleep") {
			entered <- struct{}{}
			<-release
		}
		return h(ctx, req)
	})
	p, addr := startBridge(t, "--backend", backend, "--shutdown-delay", "1s", "--shutdown-timeout", "15s")
	client := &http.Client{Transport: &http.Transport{}, Timeout: waitLimit}
	t.Cleanup(client.CloseIdleConnections)
	url := "http://" + addr

	var wg sync.WaitGroup
	results := make([]string, slow)
	for i := range slow {
		wg.Go(func() {
			status, r, _ := rpc(t, client, url+"/", `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Sleep","params":{}}`, nil)
			if _, ok := r["result"]; status == http.StatusOK && ok {
				results[i] = "result"
			} else {
				results[i] = "failed"
			}
		})
	}
	for range slow {
		<-entered
	}
	p.cancel() // as SIGTERM does

	readyz := func() int {
		resp, err := client.Get(url + "/readyz")
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	took := await.Until(t, 5*time.Second, "/readyz 503", func() bool { return readyz() == http.StatusServiceUnavailable })
	t.Logf("/readyz turned 503 within %s of the signal", took)
	// After the delay the listener closes while the slow calls still run.
	await.Until(t, 5*time.Second, "connections refused", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	close(release)
	wg.Wait()
	for i, r := range results {
		if r != "result" {
			t.Errorf("slow call %d: %s, want its result", i, r)
		}
	}
	if code := p.wait(t); code != exitOK {
		t.Errorf("got exit code %d, want 0; stderr:\n%s", code, p.stderr.rest())
	}
}

// TestSlowHeaders: a client that sends its headers a byte at a time is cut
// off after read_header_timeout.
func TestSlowHeaders(t *testing.T) {
	backend := startBackend(t, nil)
	_, addr := startBridge(t, "--backend", backend, "--read-header-timeout", "300ms")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes the connection
		closed <- time.Now()
	}()
	start := time.Now()
	req := "POST / HTTP/1.1\r\nHost: bridge\r\nX-Padding: " + strings.Repeat("a", 1000) + "\r\n\r\n"
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < len(req); i++ {
		select {
		case at := <-closed:
			took := at.Sub(start)
			t.Logf("cut off after %s, %d header bytes sent", took, i)
			if took < 250*time.Millisecond {
				t.Errorf("cut off after %s, want about read_header_timeout (300ms)", took)
			}
			return
		case <-tick.C:
			if _, err := conn.Write([]byte{req[i]}); err != nil {
				t.Logf("write failed after %s: %v", time.Since(start), err)
				return
			}
		}
		if time.Since(start) > 5*time.Second {
			break
		}
	}
	t.Fatalf("the connection was still open after %s of slow headers", time.Since(start))
}

// TestServeGuarded: serve wires authentication from auth.file, the access
// log and /metrics.
func TestServeGuarded(t *testing.T) {
	backend := startBackend(t, nil)
	auth := writeConfig(t, "identities:\n  - name: ops\n    tokens: [\""+hashToken("ops-secret-token")+"\"]\n    allow: [\"helloworld.*\"]\n")
	p, addr := startBridge(t, "--backend", backend, "--auth-file", auth)
	client := &http.Client{Transport: &http.Transport{}, Timeout: waitLimit}
	t.Cleanup(client.CloseIdleConnections)
	url := "http://" + addr

	if status, _, h := rpc(t, client, url+"/", call("helloworld.Greeter.SayHello"), nil); status != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
		t.Errorf("without a token: got HTTP %d, want 401 with a challenge", status)
	}
	token := http.Header{"Authorization": {"Bearer ops-secret-token"}, "X-Request-Id": {"guarded-1"}}
	if status, r, _ := rpc(t, client, url+"/", call("helloworld.Greeter.SayHello"), token); status != http.StatusOK || code(r) != 0 {
		t.Errorf("with the token: got HTTP %d %v, want a result", status, r)
	}
	if status, r, _ := rpc(t, client, url+"/", call("test.v1.TestService.Peek"), token); status != http.StatusOK || code(r) != 7 {
		t.Errorf("a method outside the patterns: got HTTP %d %v, want error 7", status, r)
	}
	p.stderr.until(t, "access log line", func(l string) bool {
		var rec struct {
			Msg, Method, Identity string
			RequestID             string `json:"request_id"`
		}
		return json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "call" && rec.Identity == "ops" &&
			rec.Method == "helloworld.Greeter.SayHello" && rec.RequestID == "guarded-1"
	})

	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := map[string]bool{
		`jsonrpc_bridge_calls_total{code="0",method="helloworld.Greeter.SayHello"} 1`: false,
		`jsonrpc_bridge_calls_total{code="7",method="test.v1.TestService.Peek"} 1`:    false,
		`jsonrpc_bridge_requests_refused_total{reason="unauthenticated"} 1`:           false,
		`jsonrpc_bridge_discovery_ready{backend="default"} 1`:                         false,
		`jsonrpc_bridge_backend_connection_state{backend="default",state="READY"} 1`:  false,
		`go_goroutines `:                 false,
		`process_resident_memory_bytes `: false,
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for w := range want {
			if strings.HasPrefix(sc.Text(), w) {
				want[w] = true
			}
		}
	}
	for w, seen := range want {
		if !seen {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

// hashToken is the digest of token in the form identities' tokens take.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestDrainKeepsIdleConnections: during shutdown_delay a keep-alive
// connection that was idle at the signal is still served: its next
// request is answered, with Connection: close, and then closed. Both
// HTTP/1 servers (bridge/h1, net/http) do so.
func TestDrainKeepsIdleConnections(t *testing.T) {
	backend := startBackend(t, nil)
	for _, lean := range []string{"true", "false"} {
		t.Run("lean_http1="+lean, func(t *testing.T) {
			t.Parallel() // each its own bridge
			p, addr := startBridge(t, "--backend", backend, "--shutdown-delay", "2s", "--lean-http1="+lean)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			body := `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"a"}}`
			post := func() *http.Response {
				t.Helper()
				req := "POST / HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
					strconv.Itoa(len(body)) + "\r\n\r\n" + body
				if _, err := conn.Write([]byte(req)); err != nil {
					t.Fatalf("write on the kept connection: %v", err)
				}
				_ = conn.SetReadDeadline(time.Now().Add(waitLimit))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("read on the kept connection: %v", err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp
			}
			if resp := post(); resp.StatusCode != http.StatusOK || resp.Close {
				t.Fatalf("before the signal: HTTP %d, close %v; want 200 keep-alive", resp.StatusCode, resp.Close)
			}
			p.cancel() // as SIGTERM does
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: waitLimit}
			await.Until(t, 5*time.Second, "/readyz 503", func() bool {
				resp, err := client.Get("http://" + addr + "/readyz")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusServiceUnavailable
			})
			// Sleep: idle for a while into the delay; what is asserted is
			// that nothing closes the idle connection meanwhile, and a
			// "never" has no condition to await.
			time.Sleep(200 * time.Millisecond)
			if resp := post(); resp.StatusCode != http.StatusOK || !resp.Close {
				t.Errorf("during the delay: HTTP %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
			}
			_ = conn.SetReadDeadline(time.Now().Add(waitLimit))
			if n, err := br.Read(make([]byte, 1)); err == nil {
				t.Errorf("read %d bytes after the Connection: close reply, want the connection closed", n)
			}
			if code := p.wait(t); code != exitOK {
				t.Errorf("exit %d, want 0", code)
			}
		})
	}
}
