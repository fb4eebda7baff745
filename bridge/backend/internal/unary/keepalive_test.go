//go:build !pre_keepalive

// Tests of the Options the client is to gain: KeepaliveTime,
// KeepaliveTimeout, KeepalivePermitWithoutStream and Authority. They do
// not compile until it has them; until then, go test -tags pre_keepalive
// leaves this file out and runs the others.

package unary

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// TestKeepaliveBlackHole: a backend that stops answering anything, PINGs
// included, once a call has started: the call fails with Unavailable soon
// after KeepaliveTime and KeepaliveTimeout, long before its deadline
// (grpc-go: http2Client.keepalive closes the transport, "keepalive ping
// failed to receive ACK within timeout", and its streams end Unavailable).
func TestKeepaliveBlackHole(t *testing.T) {
	t.Parallel()
	target, p := serveScript(t, func(rc *rawConn) {
		if !rc.handshake() {
			return
		}
		for { // read what comes and never write again, the SETTINGS ack included
			f, err := rc.fr.ReadFrame()
			if err != nil {
				return
			}
			if f, ok := f.(*http2.PingFrame); ok && !f.IsAck() {
				rc.peer.pings.Add(1)
			}
		}
	})
	c := newClient(t, target, Options{KeepaliveTime: 200 * time.Millisecond, KeepaliveTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	select {
	case r := <-invokeAsync(ctx, c, &Call{Method: "/t.S/M", Request: []byte("x")}):
		wantCode(t, r.err, codes.Unavailable)
		t.Logf("the call failed after %v: %v", r.at.Sub(start), r.err)
	case <-time.After(3 * time.Second):
		t.Fatal("the call was still waiting 3s into a black hole, with keepalive pings every 200ms and a timeout of 200ms")
	}
	if n := p.pings.Load(); n < 1 {
		t.Errorf("the peer received %d PINGs", n)
	}
}

// TestKeepaliveHealthy: while a call waits for a slow backend that answers
// PINGs, the client pings it and the call succeeds.
func TestKeepaliveHealthy(t *testing.T) {
	t.Parallel()
	target, p := serveScript(t, func(rc *rawConn) {
		if !rc.handshake() {
			return
		}
		rc.requests(func(r *rawRequest) bool {
			time.AfterFunc(1500*time.Millisecond, func() { rc.ok(r.id, r.body) }) // reading (and acknowledging PINGs) meanwhile
			return true
		})
	})
	c := newClient(t, target, Options{KeepaliveTime: 200 * time.Millisecond, KeepaliveTimeout: time.Second})
	call, err := invoke(t.Context(), c, "/t.S/M", []byte("slow"))
	if err != nil || string(call.Response) != "slow" {
		t.Fatalf("the call: %q, %v", call.Response, err)
	}
	if n := p.pings.Load(); n < 2 {
		t.Errorf("%d PINGs during a call of 1.5s with KeepaliveTime 200ms, want 2 or more", n)
	}
	if n := p.conns.Load(); n != 1 {
		t.Errorf("%d connections", n)
	}
}

// TestKeepaliveWithoutStream: with no call in flight the client pings only
// with KeepalivePermitWithoutStream (grpc-go: keepalive.ClientParameters.
// PermitWithoutStream; http2Client.keepalive goes dormant otherwise).
func TestKeepaliveWithoutStream(t *testing.T) {
	t.Parallel()
	for _, permit := range []bool{false, true} {
		t.Run(map[bool]string{false: "not permitted", true: "permitted"}[permit], func(t *testing.T) {
			t.Parallel()
			target, p := serveScript(t, func(rc *rawConn) {
				if rc.handshake() {
					rc.echo()
				}
			})
			c := newClient(t, target, Options{KeepaliveTime: 200 * time.Millisecond, KeepaliveTimeout: time.Second,
				KeepalivePermitWithoutStream: permit})
			if _, err := invoke(t.Context(), c, "/t.S/M", nil); err != nil {
				t.Fatal(err)
			}
			before := p.pings.Load()
			if permit {
				await.Until(t, 1500*time.Millisecond, "2 PINGs or more without calls, with PermitWithoutStream and KeepaliveTime 200ms", func() bool {
					return p.pings.Load()-before >= 2
				})
			} else {
				await.Holds(t, 1500*time.Millisecond, "no PING without calls, without PermitWithoutStream", func() bool {
					return p.pings.Load() == before
				})
			}
			if _, err := invoke(t.Context(), c, "/t.S/M", nil); err != nil {
				t.Fatalf("a call after: %v", err)
			}
		})
	}
}

// TestAuthorityOption: Options.Authority is the :authority sent, as
// grpc-go's WithAuthority; with TLS credentials that name no server it is
// also the name the backend's certificate must have (ClientConn.
// getServerName: dopts.authority first).
func TestAuthorityOption(t *testing.T) {
	t.Parallel()
	authorities := make(chan string, 10)
	target, _ := serveScript(t, func(rc *rawConn) {
		if !rc.handshake() {
			return
		}
		for {
			f, err := rc.next()
			if err != nil {
				return
			}
			if h, ok := f.(*http2.MetaHeadersFrame); ok {
				authorities <- field(h.Fields, ":authority")
				rc.ok(h.StreamID, nil)
			}
		}
	})
	for _, tt := range []struct{ authority, want string }{
		{"", target},
		{"override.test:443", "override.test:443"},
		{"svc.example", "svc.example"},
	} {
		c := newClient(t, target, Options{Authority: tt.authority})
		if _, err := invoke(t.Context(), c, "/t.S/M", nil); err != nil {
			t.Fatal(err)
		}
		if got := <-authorities; got != tt.want {
			t.Errorf("Authority %q: the peer received :authority %q, want %q", tt.authority, got, tt.want)
		}
		c.Close()
	}

	t.Run("TLS", func(t *testing.T) {
		pool, cert := certFor(t, "x.test")
		_, target := startBackend(t, "tcp", authorityEcho, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
		c := newClient(t, target, Options{Authority: "x.test", Creds: credentials.NewTLS(&tls.Config{RootCAs: pool})})
		call, err := invoke(t.Context(), c, mEcho, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(call.Response) != "x.test" {
			t.Errorf(":authority %q, want %q", call.Response, "x.test")
		}
	})
}
