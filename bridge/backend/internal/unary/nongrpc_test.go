package unary

import (
	"encoding/binary"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// serveHTTP serves h on lis with net/http, over unencrypted HTTP/2 with
// prior knowledge (h2c) when h2 is set, else over HTTP/1.1 only.
func serveHTTP(t testing.TB, lis net.Listener, h http.Handler, h2 bool) {
	t.Helper()
	hs := &http.Server{Handler: h}
	if h2 {
		hs.Protocols = new(http.Protocols)
		hs.Protocols.SetUnencryptedHTTP2(true)
	}
	go hs.Serve(lis)
	t.Cleanup(func() { hs.Close() })
}

// grpcBody is a gRPC message frame of msg.
func grpcBody(msg string) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// TestNonGRPCServer calls an HTTP/2 server that is not (quite) gRPC's:
// its HTTP statuses map to codes as grpc-go maps them, and nothing hangs.
func TestNonGRPCServer(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	for path, code := range map[string]int{
		"/test.Svc/BadRequest": http.StatusBadRequest, "/test.Svc/Unauthorized": http.StatusUnauthorized,
		"/test.Svc/Forbidden": http.StatusForbidden, "/test.Svc/Unavailable": http.StatusServiceUnavailable,
		"/test.Svc/TooMany": http.StatusTooManyRequests, "/test.Svc/Teapot": http.StatusTeapot,
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", code) })
	}
	mux.HandleFunc("/test.Svc/HTML", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html></html>"))
	})
	// nginx's own answers in front of a gRPC backend (grpc_pass): 502 when
	// the backend is down, 504 past grpc_read_timeout, 413 past
	// client_max_body_size, each an HTML page.
	for path, code := range map[string]int{
		"/test.Svc/NginxBadGateway": http.StatusBadGateway, "/test.Svc/NginxGatewayTimeout": http.StatusGatewayTimeout,
		"/test.Svc/NginxTooLarge": http.StatusRequestEntityTooLarge,
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Server", "nginx/1.22.1")
			w.WriteHeader(code)
			w.Write([]byte("<html>\r\n<head><title>" + http.StatusText(code) + "</title></head>\r\n<body>\r\n<center><h1>" +
				http.StatusText(code) + "</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n"))
		})
	}
	mux.HandleFunc("/test.Svc/Empty200", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
	})
	mux.HandleFunc("/test.Svc/NoTrailers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Write(grpcBody("hi"))
	})
	mux.HandleFunc("/test.Svc/Grpc", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/grpc" || r.Header.Get("Te") != "trailers" {
			http.Error(w, "not gRPC", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/grpc+proto")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.Write(grpcBody("hello"))
		w.Header().Set("Grpc-Status", "0")
	})
	mux.HandleFunc("/test.Svc/GrpcError", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "5")
		w.Header().Set("Grpc-Message", "no %E2%9C%93 here 100%25")
		w.WriteHeader(http.StatusOK)
	})
	// Anything else: 404 from the mux.

	tests := []struct {
		method string
		code   codes.Code
		msg    string
	}{
		{"/test.Svc/Missing", codes.Unimplemented, "404"},
		{"/test.Svc/BadRequest", codes.Internal, "400"},
		{"/test.Svc/Unauthorized", codes.Unauthenticated, "401"},
		{"/test.Svc/Forbidden", codes.PermissionDenied, "403"},
		{"/test.Svc/Unavailable", codes.Unavailable, "503"},
		{"/test.Svc/TooMany", codes.Unavailable, "429"},
		{"/test.Svc/Teapot", codes.Unknown, "418"},
		{"/test.Svc/HTML", codes.Unknown, "content-type"}, // as grpc-go
		{"/test.Svc/NginxBadGateway", codes.Unavailable, "502"},
		{"/test.Svc/NginxGatewayTimeout", codes.Unavailable, "504"},
		{"/test.Svc/NginxTooLarge", codes.Unknown, "413"},
		{"/test.Svc/Empty200", codes.Unknown, ""}, // as grpc-go: no grpc-status leaves operateHeaders' default code
		{"/test.Svc/NoTrailers", codes.Internal, "trailers"},
		{"/test.Svc/Grpc", codes.OK, ""},
		{"/test.Svc/GrpcError", codes.NotFound, "no ✓ here 100%"},
	}
	lis, target := listen(t, "tcp")
	serveHTTP(t, lis, mux, true)
	c := newClient(t, target, Options{DialTimeout: 2 * time.Second})
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			for range 2 {
				start := time.Now()
				call, err := invoke(t.Context(), c, tt.method, []byte("req"))
				wantCode(t, err, tt.code)
				if d := time.Since(start); d > time.Second {
					t.Errorf("the call took %v", d)
				}
				if err == nil {
					if string(call.Response) != "hello" {
						t.Errorf("response %q", call.Response)
					}
				} else if msg := status.Convert(err).Message(); !strings.Contains(msg, tt.msg) {
					t.Errorf("message %q does not contain %q", msg, tt.msg)
				} else if strings.Contains(msg, "<") {
					t.Errorf("message %q holds the body of the response", msg) // grpc-go's holds its start
				}
			}
		})
	}
	if n := connCount(c); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestNotHTTP2 dials backends that do not speak HTTP/2: the calls fail
// with Unavailable, at once or by the dial timeout, never hanging.
func TestNotHTTP2(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		serve func(t *testing.T, lis net.Listener)
		max   time.Duration
	}{
		{"HTTP/1.1 server", func(t *testing.T, lis net.Listener) {
			serveHTTP(t, lis, http.NotFoundHandler(), false)
		}, time.Second},
		{"HTTP/1.1 server that answers 200", func(t *testing.T, lis net.Listener) {
			serveHTTP(t, lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(strings.Repeat("x", 1<<20)))
			}), false)
		}, time.Second},
		{"HTTP/1.1 answer, connection kept open", func(t *testing.T, lis net.Listener) {
			acceptLoop(t, lis, func(nc net.Conn) {
				nc.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			})
		}, 300 * time.Millisecond},
		{"silent", func(t *testing.T, lis net.Listener) {
			acceptLoop(t, lis, func(net.Conn) {})
		}, 1500 * time.Millisecond},
		{"closes at once", func(t *testing.T, lis net.Listener) {
			acceptLoop(t, lis, func(nc net.Conn) { nc.Close() })
		}, time.Second},
		{"garbage", func(t *testing.T, lis net.Listener) {
			acceptLoop(t, lis, func(nc net.Conn) {
				nc.Write([]byte("\x00\x00\x04\x01\x04\x00\x00\x00\x01garbagegarbage")) // HEADERS before SETTINGS
			})
		}, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lis, target := listen(t, "tcp")
			t.Cleanup(func() { lis.Close() })
			tt.serve(t, lis)
			c := newClient(t, target, Options{DialTimeout: 500 * time.Millisecond})
			for range 2 {
				start := time.Now()
				_, err := invoke(t.Context(), c, mEcho, nil)
				wantCode(t, err, codes.Unavailable)
				if d := time.Since(start); d > tt.max {
					t.Errorf("the call took %v", d)
				}
				time.Sleep(300 * time.Millisecond) // past the first backoff
			}
		})
	}
}

// acceptLoop calls f with each connection lis accepts, until the test's
// cleanup closes lis and the connections.
func acceptLoop(t testing.TB, lis net.Listener, f func(net.Conn)) {
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			f(nc)
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range conns {
			nc.Close()
		}
	})
}
