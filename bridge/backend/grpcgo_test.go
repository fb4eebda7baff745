package backend_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
)

// serveH2C serves h with net/http's HTTP/2 server, without TLS, on a
// loopback port until the test ends, and returns its address.
func serveH2C(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protocols, Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestGRPCGoEarlyReplyRequestBuffer: a backend that answers before it has
// read the request (as grpc-js refuses a message over its limit) ends a
// grpc-go call while grpc-go's writer may still be sending the request's
// DATA. The call's request buffer is pooled, and the next call writes its
// request into it at once: grpc-go must not be reading it any more (under
// -race, the race detector fails this test when it still is).
func TestGRPCGoEarlyReplyRequestBuffer(t *testing.T) {
	target := serveH2C(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "8")
		w.Header().Set("Grpc-Message", "too large")
		w.WriteHeader(http.StatusOK) // trailers-only, the request unread
	}))
	cc, err := grpc.NewClient("passthrough:///"+target, append(backend.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	inv := backend.For(cc)
	c := backend.GetCall()
	defer backend.PutCall(c)
	c.Method = "/test.v1.TestService/Echo"
	for i := range 10 {
		c.Request = append(c.Request[:0], make([]byte, 2<<20)...)
		c.Request[0] = 0x0a
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := inv.Invoke(ctx, c)
		cancel()
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != "too large" {
			t.Fatalf("call %d: %v, want the backend's code 8", i, err)
		}
		for j := range c.Request { // the next call's request, in the same buffer
			c.Request[j] = byte(i)
		}
	}
}
