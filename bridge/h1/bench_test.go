package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
)

// BenchmarkServe measures one keep-alive POST / with a 291-byte body and
// a 281-byte reply (the bench's small call), request after request on one
// connection, through net/http and through h1, in front of a handler that
// reads the body and writes the reply as the bridge does (Content-Type,
// Content-Length, X-Request-Id). The client's cost is included.
func BenchmarkServe(b *testing.B) {
	body := make([]byte, 291)
	reply := make([]byte, 281)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Header().Set("X-Request-Id", "ZNAF3G5LSMP2UKCHRHXG7G7Y7K")
		w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
		w.Write(reply)
		http.NewResponseController(w).Flush()
	})
	req := []byte("POST / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 291\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n" + string(body))
	for _, tc := range []struct {
		name string
		fast bool
	}{{"net/http", false}, {"h1", true}} {
		b.Run(tc.name, func(b *testing.B) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			hs := &http.Server{Handler: h}
			if tc.fast {
				s := New(hs)
				go s.Serve(lis)
				defer s.Close()
			} else {
				go hs.Serve(lis)
				defer hs.Close()
			}
			c, err := net.Dial("tcp", lis.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
