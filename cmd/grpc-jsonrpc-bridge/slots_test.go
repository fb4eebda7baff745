package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// The attacks of issue 13, points 1 and 2, over the HTTPS listener, where
// clients speak HTTP/2 and many requests share one connection.

// h2Client is a client with a connection pool of its own, speaking HTTP/2
// to a bridge whose certificate roots signed; conf tunes its HTTP/2.
func h2Client(t *testing.T, roots *ca, conf *http.HTTP2Config) *http.Client {
	t.Helper()
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots.pool(), ServerName: "localhost"},
		ForceAttemptHTTP2: true,
		HTTP2:             conf,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitLimit}
}

// connect makes client open its connection, with one request answered
// over HTTP/2, so that the requests that follow share it.
func connect(t *testing.T, client *http.Client, base string) {
	t.Helper()
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("got %s, want HTTP/2", resp.Proto)
	}
}

// maxConcurrentStreams is the SETTINGS_MAX_CONCURRENT_STREAMS the HTTP/2
// server at addr announces.
func maxConcurrentStreams(t *testing.T, addr string, roots *ca) uint32 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots.pool(), ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, bufio.NewReader(c))
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			v, ok := sf.Value(http2.SettingMaxConcurrentStreams)
			if !ok {
				t.Fatal("the server announces no SETTINGS_MAX_CONCURRENT_STREAMS")
			}
			return v
		}
	}
}

// h2Answer is what one request got.
type h2Answer struct {
	status int
	body   string
	at     time.Time
}

// TestHTTP2SlowBodies is point 1 over HTTP/2: 4 TCP connections, each
// with as many streams as it may open and a body that never ends, held
// every max_in_flight slot. Now the listener announces
// http2_max_concurrent_streams, each connection has at most
// max_body_reads_per_connection bodies read at once (the other streams get
// 429 at once), no slot is held, legitimate callers are answered, and
// body_timeout ends the bodies with 408.
func TestHTTP2SlowBodies(t *testing.T) {
	t.Parallel() // its own backend and bridge; it waits on body_timeout
	const conns, streams, reads = 4, 10, 4
	const bodyTimeout = 2 * time.Second
	dir := t.TempDir()
	roots := newCA(t, dir, "server-ca")
	cert, key, _ := roots.issue(t, dir, "bridge")
	_, addr := startBridge(t, "--backend", startBackend(t, nil), "--tls-cert-file", cert, "--tls-key-file", key,
		"--max-in-flight", "4", "--body-timeout", bodyTimeout.String(), "--http2-max-concurrent-streams", fmt.Sprint(streams),
		"--max-body-reads-per-connection", fmt.Sprint(reads), "--max-body-reads-per-client", "1000")
	base := "https://" + addr
	if got := maxConcurrentStreams(t, addr, roots); got != streams {
		t.Errorf("the server announces %d concurrent streams per connection, want http2_max_concurrent_streams (%d)", got, streams)
	}

	answers := make(chan h2Answer, conns*streams)
	start := time.Now()
	for range conns {
		client := h2Client(t, roots, nil)
		connect(t, client, base)
		for range streams {
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.Close() })
			req, err := http.NewRequest(http.MethodPost, base+"/", pr)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				a := h2Answer{}
				if resp, err := client.Do(req); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					a.status, a.body = resp.StatusCode, string(b)
				}
				a.at = time.Now()
				answers <- a
			}()
			go pw.Write([]byte("{")) // and nothing more
		}
	}
	var refused []h2Answer
	settled := time.After(bodyTimeout / 2)
collect:
	for len(refused) < conns*(streams-reads) {
		select {
		case a := <-answers:
			refused = append(refused, a)
		case <-settled:
			break collect
		}
	}
	legit := h2Client(t, roots, nil)
	for i := range 8 {
		if status, r, _ := rpc(t, legit, base+"/", call("helloworld.Greeter.SayHello"), nil); status != http.StatusOK || code(r) != 0 {
			t.Fatalf("legitimate call %d during the attack: got HTTP %d %v, want a result", i, status, r)
		}
	}
	if len(refused) != conns*(streams-reads) {
		t.Fatalf("%d of the %d slow streams were refused at once, want %d (all but max_body_reads_per_connection per connection)",
			len(refused), conns*streams, conns*(streams-reads))
	}
	for _, a := range refused {
		if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, "max_body_reads_per_connection") {
			t.Fatalf("a slow stream: got HTTP %d %s, want 429 naming max_body_reads_per_connection", a.status, a.body)
		}
	}
	for range conns * reads {
		select {
		case a := <-answers:
			if took := a.at.Sub(start); a.status != http.StatusRequestTimeout || took < bodyTimeout-50*time.Millisecond {
				t.Errorf("a slow stream being read: got HTTP %d %s after %s, want 408 after body_timeout (%s)", a.status, a.body, took, bodyTimeout)
			}
		case <-time.After(bodyTimeout + 10*time.Second):
			t.Fatal("the bodies being read were not ended after body_timeout")
		}
	}
}

// TestHTTP2UnreadReplies is point 2 over HTTP/2: clients that never read
// a large reply held their slots. Now reply_timeout resets their streams
// and frees the slots while the clients stay connected.
func TestHTTP2UnreadReplies(t *testing.T) {
	t.Parallel() // its own backend and bridge; it waits on reply_timeout
	const attackers = 4
	const replyTimeout = 2 * time.Second
	dir := t.TempDir()
	roots := newCA(t, dir, "server-ca")
	cert, key, _ := roots.issue(t, dir, "bridge")
	_, addr := startBridge(t, "--backend", startBackend(t, nil), "--tls-cert-file", cert, "--tls-key-file", key,
		"--max-in-flight", fmt.Sprint(attackers), "--reply-timeout", replyTimeout.String())
	base := "https://" + addr
	big := `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fString":"` + strings.Repeat("x", 1<<20) + `"},"id":1}`
	start := time.Now() // before any reply deadline starts
	var wg sync.WaitGroup
	for range attackers {
		// A stream window of 64 KiB, never read: the reply stops there.
		client := h2Client(t, roots, &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10})
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(big))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept-Encoding", "identity") // the whole megabyte, not its gzip
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { resp.Body.Close() })
			if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
				t.Errorf("got %s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	legit := h2Client(t, roots, nil)
	status, r, _ := rpc(t, legit, base+"/", call("helloworld.Greeter.SayHello"), nil)
	if held := time.Since(start) < replyTimeout; held && status != http.StatusTooManyRequests {
		t.Fatalf("while the unread replies hold every slot: got HTTP %d %v, want 429", status, r)
	} else if !held {
		t.Logf("the attackers took longer than reply_timeout to set up; not checking that they held the slots")
	}
	took := await.Until(t, 10*time.Second, "a legitimate call answered", func() bool {
		status, _, _ := rpc(t, legit, base+"/", call("helloworld.Greeter.SayHello"), nil)
		return status == http.StatusOK
	})
	t.Logf("a legitimate call was answered %s after the unread replies began", took)
	for i := range 8 {
		if status, r, _ := rpc(t, legit, base+"/", call("helloworld.Greeter.SayHello"), nil); status != http.StatusOK || code(r) != 0 {
			t.Fatalf("legitimate call %d: got HTTP %d %v, want a result", i, status, r)
		}
	}
}
