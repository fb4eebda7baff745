package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeLeanHTTP1 runs serve with bridge/h1 in front (the default) and
// without it (--lean-http1=false): both answer a plain POST /, a request
// of another shape on the same connection after it (a GET of the OpenRPC
// document), and HTTP/2 with prior knowledge.
func TestServeLeanHTTP1(t *testing.T) {
	backend := startBackend(t, nil)
	for _, lean := range []string{"true", "false"} {
		t.Run("lean_http1="+lean, func(t *testing.T) {
			t.Parallel() // each its own bridge
			_, addr := startBridge(t, "--backend", backend, "--lean-http1="+lean)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			body := call("helloworld.Greeter.SayHello")
			raw := "POST / HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
				itoa(len(body)) + "\r\n\r\n" + body +
				"GET /openrpc.json HTTP/1.1\r\nHost: " + addr + "\r\n\r\n" +
				"POST / HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: " + itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body
			if _, err := c.Write([]byte(raw)); err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(c)
			if n := strings.Count(string(out), "HTTP/1.1 200 OK"); n != 3 {
				t.Fatalf("%d replies of 200, want 3:\n%s", n, out)
			}
			if !bytes.Contains(out, []byte(`"openrpc"`)) || strings.Count(string(out), `{"jsonrpc":"2.0","id":1,"result":`) != 2 {
				t.Errorf("want two results and the document:\n%.2000s", out)
			}
			protocols := new(http.Protocols)
			protocols.SetUnencryptedHTTP2(true)
			h2c := &http.Client{Transport: &http.Transport{Protocols: protocols}}
			resp, err := h2c.Post("http://"+addr+"/", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || !bytes.Contains(b, []byte(`"result"`)) {
				t.Errorf("h2c: %s %s", resp.Proto, b)
			}
		})
	}
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}
