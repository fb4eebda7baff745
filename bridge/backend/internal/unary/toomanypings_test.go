package unary

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// TestKeepaliveTooManyPings: a backend that ends a connection with
// GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings"), as grpc-go's and C-core's
// servers do when the client pings more often than their keepalive policy
// allows, makes the client ping new connections half as often: grpc-go's
// addrConn.adjustParams doubles keepalive's Time for the transports it
// creates after such a GOAWAY (clientconn.go; http2Client.handleGoAway
// sets GoAwayTooManyPings). Without it, the client is sent away again and
// again, its calls in flight failing with it. Any other debug data leaves
// the interval as it was.
func TestKeepaliveTooManyPings(t *testing.T) {
	t.Parallel()
	const ka = 200 * time.Millisecond // a ping every 2*ka while a call waits: one to find silence, one to ping
	const hold = 3200 * time.Millisecond
	for _, tt := range []struct {
		debug   string
		doubled bool
	}{
		{"too_many_pings", true},
		{"calm down", false},
	} {
		t.Run(tt.debug, func(t *testing.T) {
			t.Parallel()
			counts := make(chan int32, 1)
			target, p := serveScript(t, func(rc *rawConn) {
				if !rc.handshake() {
					return
				}
				if rc.n == 1 {
					for { // the first PING gets the GOAWAY; the call, refused (last 0), goes to connection 2
						f, err := rc.next()
						if err != nil {
							return
						}
						if f, ok := f.(*http2.PingFrame); ok && !f.IsAck() {
							rc.write(func(fr *http2.Framer) {
								fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte(tt.debug))
							})
							return
						}
					}
				}
				var before atomic.Int32
				rc.requests(func(r *rawRequest) bool {
					before.Store(rc.peer.pings.Load())
					time.AfterFunc(hold, func() {
						counts <- rc.peer.pings.Load() - before.Load()
						rc.ok(r.id, r.body)
					})
					return true
				})
			})
			c := newClient(t, target, Options{KeepaliveTime: ka, KeepaliveTimeout: time.Second})
			call, err := invoke(t.Context(), c, "/t.S/M", []byte("held"))
			if err != nil || string(call.Response) != "held" {
				t.Fatalf("the call: %q, %v", call.Response, err)
			}
			if n := p.conns.Load(); n != 2 {
				t.Fatalf("%d connections, want 2", n)
			}
			n := <-counts
			// Every 2*ka (400ms) is 8 PINGs in 3.2s; every 4*ka (800ms), at most 5
			// (timers are never early).
			t.Logf("%d PINGs on the second connection during a call held %v", n, hold)
			switch {
			case tt.doubled && n > 5:
				t.Errorf("%d PINGs in %v after GOAWAY(too_many_pings): want at most 5, keepalive's interval doubled (grpc-go)", n, hold)
			case !tt.doubled && n < 6:
				t.Errorf("%d PINGs in %v after a GOAWAY(ENHANCE_YOUR_CALM) for another reason: want 6 or more, the interval unchanged", n, hold)
			}
		})
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return nc, err
}

// TestKeepaliveTooManyPingsGRPCServer: against a grpc-go server whose
// keepalive policy wants a second between PINGs, a client pinging every
// 400ms (KeepaliveTime 200ms) during a call of 2.5s is sent GOAWAY
// "too_many_pings" (more than 2 strikes; the server's response resets
// them) and the call fails; the next connection pings every 800ms, 2
// strikes a call, and its calls succeed.
func TestKeepaliveTooManyPingsGRPCServer(t *testing.T) {
	t.Parallel()
	lis, target := listen(t, "tcp")
	cl := &countingListener{Listener: lis}
	serve(t, cl, nil, grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second}))
	c := newClient(t, target, Options{KeepaliveTime: 200 * time.Millisecond, KeepaliveTimeout: time.Second})
	var outcomes []string
	ok := 0 // successes in a row
	for end := time.Now().Add(15 * time.Second); ok < 2 && time.Now().Before(end); {
		if _, err := invoke(t.Context(), c, mSleep, []byte("2500ms")); err != nil {
			outcomes = append(outcomes, err.Error())
			ok = 0
			continue
		}
		outcomes = append(outcomes, "ok")
		ok++
	}
	t.Logf("calls of 2.5s: %q, on %d connections", outcomes, cl.n.Load())
	if ok < 2 {
		t.Fatalf("calls of 2.5s still failing after 15s: %q", outcomes)
	}
	if len(outcomes) == 2 {
		t.Fatal("no call failed: the server did not send GOAWAY too_many_pings, and the test shows nothing")
	}
	if n := cl.n.Load(); n > 2 {
		t.Errorf("%d connections: want 2 (sent away once, pinging every 200ms)", n)
	}
}
