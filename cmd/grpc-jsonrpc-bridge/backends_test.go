package main

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

func greeter(s *grpc.Server) { helloworld.RegisterGreeterServer(s, helloworld.Server{}) }
func notes(s *grpc.Server)   { demov1.RegisterNotesServer(s, demov1.NewServer()) }
func tests(s *grpc.Server)   { testv1.RegisterTestServiceServer(s, testv1.NewServer()) }

// TestTwoBackends: each service is served by its own backend; include and
// exclude pick which.
func TestTwoBackends(t *testing.T) {
	a, b := freeAddr(t), freeAddr(t)
	newDynamicBackend(t, "Ping").serveOn(t, a, greeter, tests)
	newDynamicBackend(t).serveOn(t, b, greeter, notes)
	cfg := writeConfig(t, `
backends:
  - name: a
    address: `+a+`
    plaintext: true
    exclude: ["redeploy.*"]
  - name: b
    address: `+b+`
    plaintext: true
    include: ["demo.*", "redeploy.*"]
`)
	_, addr := startBridge(t, "--config", cfg)
	url := "http://" + addr + "/"
	for _, m := range []string{"helloworld.Greeter.SayHello", "test.v1.TestService.Peek", "demo.v1.Notes.GetCounter"} {
		if _, r, _ := rpc(t, http.DefaultClient, url, call(m), nil); code(r) != 0 {
			t.Errorf("%s: got %v, want a result", m, r)
		}
	}
	// redeploy.v1.Svc of a is excluded; b's is included but has no Ping.
	if _, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc.Ping"), nil); code(r) != -32601 {
		t.Errorf("redeploy.v1.Svc.Ping: got %v, want -32601", r)
	}
	status, body := do(t, "http://"+addr+"/readyz", "")
	for _, want := range []string{`"name":"a"`, `"name":"b"`, `"state":"ready"`} {
		if status != 200 || !strings.Contains(body, want) {
			t.Errorf("readyz: got %d %s, want 200 with %s", status, body, want)
		}
	}
}

func TestDuplicateServiceIsAStartUpError(t *testing.T) {
	a, b := freeAddr(t), freeAddr(t)
	newDynamicBackend(t).serveOn(t, a, greeter)
	newDynamicBackend(t).serveOn(t, b, greeter, notes)
	cfg := writeConfig(t, "backends:\n  - {name: one, address: "+a+", plaintext: true, exclude: [redeploy.*]}\n"+
		"  - {name: two, address: "+b+", plaintext: true, exclude: [redeploy.*]}\n")
	p := start(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	code := p.wait(t)
	rest := p.stderr.rest()
	if code != exitFailure {
		t.Errorf("got exit code %d, want %d", code, exitFailure)
	}
	for _, want := range []string{"helloworld.Greeter", `"one"`, `"two"`, "exclude"} {
		if !strings.Contains(rest, want) {
			t.Errorf("stderr does not mention %s:\n%s", want, rest)
		}
	}
}

// TestTLS: an HTTPS listener requiring client certificates, a TLS backend
// and an mTLS backend, all with certificates made here; then a rotated
// listener certificate is served without a restart.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := newCA(t, dir, "server-ca"), newCA(t, dir, "client-ca")
	bridgeCert, bridgeKey, _ := serverCA.issue(t, dir, "bridge")
	backendCert, backendKey, _ := serverCA.issue(t, dir, "backend")
	clientCert, clientKey, _ := clientCA.issue(t, dir, "client")

	// A TLS backend, and an mTLS one requiring certificates of clientCA.
	tlsAddr, mtlsAddr := freeAddr(t), freeAddr(t)
	serveTLS(t, tlsAddr, &tls.Config{Certificates: []tls.Certificate{loadPair(t, backendCert, backendKey)}}, greeter)
	serveTLS(t, mtlsAddr, &tls.Config{Certificates: []tls.Certificate{loadPair(t, backendCert, backendKey)},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.pool()}, notes)

	cfg := writeConfig(t, `
tls:
  cert_file: `+bridgeCert+`
  key_file: `+bridgeKey+`
  client_ca_file: `+clientCA.file+`
backends:
  - name: tls
    address: `+tlsAddr+`
    tls:
      ca_file: `+serverCA.file+`
      server_name: backend.test
    exclude: ["redeploy.*"]
  - name: mtls
    address: `+mtlsAddr+`
    tls:
      ca_file: `+serverCA.file+`
      cert_file: `+clientCert+`
      key_file: `+clientKey+`
    exclude: ["redeploy.*"]
`)
	_, addr := startBridge(t, "--config", cfg)
	url := "https://" + addr + "/"
	client := httpsClient(serverCA, loadPair(t, clientCert, clientKey))
	for _, m := range []string{"helloworld.Greeter.SayHello", "demo.v1.Notes.GetCounter"} {
		if _, r, _ := rpc(t, client, url, call(m), nil); code(r) != 0 {
			t.Errorf("%s over HTTPS: got %v, want a result", m, r)
		}
	}
	// Without a client certificate the listener refuses.
	if _, err := httpsClient(serverCA).Post(url, "application/json", strings.NewReader(call("helloworld.Greeter.SayHello"))); err == nil {
		t.Errorf("a client without certificate was served, want a handshake failure")
	}

	// Rotate the listener's certificate: new connections get the new one.
	_, _, newSerial := serverCA.issue(t, dir, "bridge")
	await.Until(t, 10*time.Second, "the rotated certificate", func() bool {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: serverCA.pool(), ServerName: "localhost",
			Certificates: []tls.Certificate{loadPair(t, clientCert, clientKey)}})
		if err != nil {
			t.Fatalf("dial after rotation: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64() == newSerial
	})
	client.CloseIdleConnections()
	if _, r, _ := rpc(t, client, url, call("helloworld.Greeter.SayHello"), nil); code(r) != 0 {
		t.Errorf("after rotation: got %v, want a result", r)
	}
}

func TestBackendWithWrongCA(t *testing.T) {
	dir := t.TempDir()
	realCA, otherCA := newCA(t, dir, "real-ca"), newCA(t, dir, "other-ca")
	cert, key, _ := realCA.issue(t, dir, "backend")
	addr := freeAddr(t)
	serveTLS(t, addr, &tls.Config{Certificates: []tls.Certificate{loadPair(t, cert, key)}}, greeter)
	cfg := writeConfig(t, "backends:\n  - name: wrong\n    address: "+addr+"\n    tls:\n      ca_file: "+otherCA.file+"\n")
	p := start(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--log-format", "json")
	var listen string
	p.stderr.until(t, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			listen = rec.Addr
			return true
		}
		return false
	})
	want := "not trusted by tls.ca_file " + otherCA.file
	p.stderr.until(t, "a clear CA error", func(l string) bool { return strings.Contains(l, want) })
	status, body := do(t, "http://"+listen+"/readyz", "")
	if status != 503 || !strings.Contains(body, "the TLS handshake with the backend failed: ") || !strings.Contains(body, "its certificate is not trusted by tls.ca_file") || !strings.Contains(body, "unknown authority") || strings.Contains(body, "rpc error") {
		t.Errorf("readyz: got %d %s, want 503 explaining the CA", status, body)
	}
}

// TestMTLSBackendRotatedClientCertificate: the backend starts trusting a
// new client CA; the bridge's rotated client certificate is used without
// a restart.
func TestMTLSBackendRotatedClientCertificate(t *testing.T) {
	dir := t.TempDir()
	serverCA, oldCA, newClientCA := newCA(t, dir, "server-ca"), newCA(t, dir, "old-ca"), newCA(t, dir, "new-ca")
	backendCert, backendKey, _ := serverCA.issue(t, dir, "backend")
	clientCert, clientKey, _ := oldCA.issue(t, dir, "client")
	addr := freeAddr(t)
	stop := serveTLS(t, addr, &tls.Config{Certificates: []tls.Certificate{loadPair(t, backendCert, backendKey)},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: oldCA.pool()}, greeter)
	cfg := writeConfig(t, "backends:\n  - name: m\n    address: "+addr+"\n    tls:\n      ca_file: "+serverCA.file+
		"\n      cert_file: "+clientCert+"\n      key_file: "+clientKey+"\n")
	_, listen := startBridge(t, "--config", cfg)
	url := "http://" + listen + "/"
	if _, r, _ := rpc(t, http.DefaultClient, url, call("helloworld.Greeter.SayHello"), nil); code(r) != 0 {
		t.Fatalf("got %v, want a result", r)
	}
	// The backend now only trusts the new CA, and the files are rotated.
	stop()
	serveTLS(t, addr, &tls.Config{Certificates: []tls.Certificate{loadPair(t, backendCert, backendKey)},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: newClientCA.pool()}, greeter)
	newClientCA.issue(t, dir, "client")
	await.Until(t, 10*time.Second, "a call with the rotated client certificate", func() bool {
		_, r, _ := rpc(t, http.DefaultClient, url, call("helloworld.Greeter.SayHello"), nil)
		return code(r) == 0
	})
}

// serveTLS serves what register adds, with reflection, over TLS on addr.
func serveTLS(t *testing.T, addr string, cfg *tls.Config, register ...func(*grpc.Server)) (stop func()) {
	t.Helper()
	d := newDynamicBackend(t)
	return d.serveTLSOn(t, addr, cfg, register...)
}

func httpsClient(roots *ca, certs ...tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots.pool(), Certificates: certs, ServerName: "localhost",
	}}}
}

// TestRediscovery: the backend is redeployed on the same port with one
// method added and one removed; calls in flight during a swap finish; a
// failed refresh keeps the last good registry and says so in /readyz.
func TestRediscovery(t *testing.T) {
	addr := freeAddr(t)
	d := newDynamicBackend(t, "Keep", "Old", "Slow")
	stop := d.serveOn(t, addr)
	_, listen := startBridge(t, "--backend", addr, "--refresh-interval", "0s")
	url := "http://" + listen + "/"
	for m, want := range map[string]int{"Keep": 0, "Old": 0, "New": -32601} {
		if _, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc."+m), nil); code(r) != want {
			t.Errorf("%s before the redeploy: got %v, want code %d", m, r, want)
		}
	}

	// Redeploy on the same port: Old removed, New added. The reconnection
	// triggers the refresh.
	stop()
	d2 := newDynamicBackend(t, "Keep", "New", "Slow")
	stop = d2.serveOn(t, addr)
	await.Until(t, 10*time.Second, "New callable after the redeploy", func() bool {
		_, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc.New"), nil)
		return code(r) == 0
	})
	if _, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc.Old"), nil); code(r) != -32601 {
		t.Errorf("Old after the redeploy: got %v, want -32601", r)
	}

	// Calls in flight while SIGHUP swaps the registry all complete.
	const inFlight = 5
	var wg sync.WaitGroup
	replies := make(chan map[string]any, inFlight)
	for range inFlight {
		wg.Go(func() {
			_, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc.Slow"), nil)
			replies <- r
		})
	}
	for range inFlight {
		<-d2.slow
	}
	d2.set(t, "Keep", "New", "Slow", "Newer")
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	await.Until(t, 10*time.Second, "Newer callable after SIGHUP", func() bool {
		_, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc.Newer"), nil)
		return code(r) == 0
	})
	close(d2.release)
	wg.Wait()
	close(replies)
	for r := range replies {
		if code(r) != 0 {
			t.Errorf("a call in flight during the swap: got %v, want a result", r)
		}
	}

	// A failed refresh keeps the last good registry and is visible.
	stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	await.Until(t, 15*time.Second, "a stale backend in /readyz", func() bool {
		_, body := do(t, "http://"+listen+"/readyz", "")
		return strings.Contains(body, `"state":"stale"`) && strings.Contains(body, `"last_error"`)
	})
	if status, _ := do(t, "http://"+listen+"/readyz", ""); status != 200 {
		t.Errorf("readyz with a stale backend: got %d, want 200 (the last good registry serves)", status)
	}
	if _, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc.Newer"), nil); code(r) != 14 {
		t.Errorf("Newer with the backend down: got %v, want code 14 (still known, unavailable)", r)
	}
}

// TestBackendFaults: the backend is killed during a steady stream of
// calls. Every call gets exactly one reply, a result or code 14; the other
// backend keeps serving; calls succeed again within 10s of the return.
func TestBackendFaults(t *testing.T) {
	flaky, steady := freeAddr(t), freeAddr(t)
	d := newDynamicBackend(t, "Keep")
	stop := d.serveOn(t, flaky)
	newDynamicBackend(t).serveOn(t, steady, greeter)
	cfg := writeConfig(t, "backends:\n  - {name: flaky, address: "+flaky+", plaintext: true}\n"+
		"  - {name: steady, address: "+steady+", plaintext: true, exclude: [redeploy.*]}\n")
	_, listen := startBridge(t, "--config", cfg, "--call-timeout", "20s")
	url := "http://" + listen + "/"

	var mu sync.Mutex
	var bad []string
	results := map[int]int{}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-quit:
					return
				default:
				}
				status, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc.Keep"), nil)
				c := code(r)
				mu.Lock()
				results[c]++
				if status != 200 || r["id"] != 1.0 || (c != 0 && c != 14) {
					bad = append(bad, strings.TrimSpace(string(must(json.Marshal(r)))))
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // the stream's pace: a rate, not a wait for anything
			}
		})
	}
	tally := func(c int) int {
		mu.Lock()
		defer mu.Unlock()
		if c < 0 {
			n := 0
			for _, k := range results {
				n += k
			}
			return n
		}
		return results[c]
	}
	await.Until(t, 10*time.Second, "the steady stream's first calls", func() bool { return tally(-1) >= 8 })
	stop()
	await.Until(t, 10*time.Second, "a call of the stream failing with 14 with the backend down", func() bool { return tally(14) > 0 })
	// While the flaky backend is down, the other one serves; calls to the
	// flaky one fail promptly with 14.
	if _, r, _ := rpc(t, http.DefaultClient, url, call("helloworld.Greeter.SayHello"), nil); code(r) != 0 {
		t.Errorf("the steady backend while the other is down: got %v, want a result", r)
	}
	start := time.Now()
	if _, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc.Keep"), nil); code(r) != 14 || time.Since(start) > 5*time.Second {
		t.Errorf("a call to the down backend: got %v after %s, want code 14 promptly", r, time.Since(start))
	}
	d.serveOn(t, flaky)
	took := await.Until(t, 10*time.Second, "calls succeeding after the backend's return", func() bool {
		_, r, _ := rpc(t, http.DefaultClient, url, call("redeploy.v1.Svc.Keep"), nil)
		return code(r) == 0
	})
	close(quit)
	wg.Wait()
	t.Logf("recovered %s after the return; replies by code: %v", took, results)
	if len(bad) > 0 {
		t.Errorf("%d bad replies, first: %s", len(bad), bad[0])
	}
	if results[14] == 0 || results[0] == 0 {
		t.Errorf("got replies by code %v, want both successes and code 14", results)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestPrintConfig(t *testing.T) {
	dir := t.TempDir()
	c := newCA(t, dir, "ca")
	cert, key, _ := c.issue(t, dir, "bridge")
	cfg := writeConfig(t, "backends:\n  - name: a\n    address: a:1\n    tls:\n      ca_file: "+c.file+"\n"+
		"tls:\n  cert_file: "+cert+"\n  key_file: "+key+"\n")
	code, stdout, stderr := runSync(t, "serve", "--config", cfg, "--print-config", "--call-timeout", "5s")
	if code != exitOK {
		t.Fatalf("got exit code %d, want 0; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"call_timeout: 5s", "name: a", "ca_file: " + c.file, "cert_file: " + cert, "refresh_interval: 5m0s", "request_headers: []"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

func TestConfigErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{name: "unknown key", yaml: "backends:\n  - {address: a:1, plaintext: true, tls_ca: x}\n", want: []string{`"backends[0].tls_ca"`}},
		{name: "bad duration", yaml: "backend: a:1\nrefresh_interval: often\n", want: []string{`"refresh_interval"`}},
		{name: "missing certificate file", yaml: "backend: a:1\ntls:\n  cert_file: " + dir + "/none.pem\n  key_file: " + dir + "/none-key.pem\n", want: []string{`"tls.cert_file"`, "none.pem"}},
		{name: "bad address", yaml: "backends:\n  - {address: 'a:b:c', plaintext: true}\n", want: []string{`"backends[0].address"`}},
		{name: "hop-by-hop header", yaml: "backend: a:1\nmetadata:\n  request_headers: [Connection]\n", want: []string{`"metadata.request_headers"`, "hop-by-hop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeConfig(t, tt.yaml)
			code, _, stderr := runSync(t, "serve", "--config", cfg)
			if code != exitUsage {
				t.Errorf("got exit code %d, want 2; stderr:\n%s", code, stderr)
			}
			// Every message names the key and the file the value came from.
			for _, want := range append(tt.want, cfg+": ") {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q lacks %q", stderr, want)
				}
			}
		})
	}
}
