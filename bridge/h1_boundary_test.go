package bridge_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// TestBoundaryRequestUsesNoCPU sends the bridge, served as serve serves it
// (bridge/h1 in front of net/http), a request that ends 2 bytes before
// the end of h1's 4096-byte read buffer, in one write with a CRLF after
// it: once, the wait for the next request read into the buffer's empty
// end, which returns at once, and the connection's goroutine spun on a
// core forever, never closing the connection, the client gone or not.
// Without credentials too: with authentication on, a body-less request's
// 401 on a kept-alive connection did the same.
func TestBoundaryRequestUsesNoCPU(t *testing.T) {
	call := `{"jsonrpc":"2.0","method":"test.v1.TestService.Count","params":{"key":"n"},"id":1}`
	const head = "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
	// The reproducer: head, a call padded with spaces, a CRLF; 4096 bytes.
	bodyLen := 4096 - 2 - len(head+"\r\n\r\n") - 4
	padded := head + strconv.Itoa(bodyLen) + "\r\n\r\n" + call + strings.Repeat(" ", bodyLen-len(call)) + "\r\n"
	// No body, no credentials: a padding header brings its end to 4094.
	bare := "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nX-Pad: "
	bare += strings.Repeat("p", 4096-2-len(bare)-4) + "\r\n\r\n" + "\r\n"
	for _, tc := range []struct {
		name   string
		opts   bridge.Options
		raw    string
		status int
	}{
		{"a call padded to the buffer's end", bridge.Options{}, padded, http.StatusOK},
		{"unauthenticated, no body", bridge.Options{Auth: newAuth(t)}, bare, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.raw) != 4096 {
				t.Fatalf("the request is %d bytes, want 4096", len(tc.raw))
			}
			e := newEnv(t, tc.opts, reconnecting(), ownClient())
			addr := strings.TrimPrefix(e.url, "http://")
			var conns []net.Conn
			for range 4 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write([]byte(tc.raw)); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				io.ReadAll(resp.Body)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
				conns = append(conns, c)
			}
			// Four connections wait for their next request, and the clients leave.
			for _, c := range conns {
				c.(*net.TCPConn).CloseWrite()
			}
			cpu0, wall0 := processCPU(t), time.Now()
			time.Sleep(time.Second) // the window the CPU is measured over: nothing to await
			if used, wall := processCPU(t)-cpu0, time.Since(wall0); used > wall/4 {
				t.Errorf("with 4 connections waiting, the bridge used %v of CPU in %v", used.Round(time.Millisecond), wall.Round(time.Millisecond))
			}
			for i, c := range conns {
				if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
					t.Errorf("connection %d: %d bytes, %v; want the bridge to have closed it", i, n, err)
				}
			}
		})
	}
}

// processCPU is the CPU time this test process has used.
func processCPU(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
