package h1

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/daemon"
)

// A proxy is a real reverse proxy (a Debian package) started in front of
// two upstreams, net/http's server and h1's of the same handler, with
// keep-alive connections to both, as deployments run the bridge.
type proxy struct {
	name string                                                    // the program, and its Debian package
	file string                                                    // its configuration file's name
	conf func(dir, listenStd, listenFast, std, fast string) string // the file's text
	args func(dir, file string) []string
}

var proxies = []proxy{
	{"nginx", "nginx.conf", func(dir, ls, lf, std, fast string) string {
		return fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
error_log %[1]s/error.log warn;
pid %[1]s/nginx.pid;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	upstream std { server %[4]s; keepalive 16; }
	upstream fast { server %[5]s; keepalive 16; }
	server {
		listen %[2]s;
		location / { proxy_pass http://std; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host $http_host; }
	}
	server {
		listen %[3]s;
		location / { proxy_pass http://fast; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host $http_host; }
	}
}
`, dir, ls, lf, std, fast)
	}, func(dir, file string) []string {
		return []string{"-c", file, "-p", dir, "-e", filepath.Join(dir, "error.log")}
	}},
	{"haproxy", "haproxy.cfg", func(dir, ls, lf, std, fast string) string {
		return fmt.Sprintf(`global
	maxconn 1024
defaults
	mode http
	option http-keep-alive
	http-reuse always
	timeout connect 5s
	timeout client 30s
	timeout server 30s
frontend std
	bind %[1]s
	default_backend std
frontend fast
	bind %[2]s
	default_backend fast
backend std
	server s %[3]s
backend fast
	server s %[4]s
`, ls, lf, std, fast)
	}, func(dir, file string) []string { return []string{"-db", "-f", file} }},
}

// start runs the proxy in front of the pair's servers and returns the
// addresses it listens on for each.
func (px proxy) start(t *testing.T, p *pair) (std, fast string) {
	t.Helper()
	bin := daemon.Need(t, px.name, px.name)
	dir := t.TempDir()
	std, fast = daemon.FreeAddr(t), daemon.FreeAddr(t)
	file := filepath.Join(dir, px.file)
	if err := os.WriteFile(file, []byte(px.conf(dir, std, fast, p.std, p.fast)), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon.Start(t, exec.Command(bin, px.args(dir, file)...), syscall.SIGKILL, std, fast)
	return std, fast
}

// proxied is what the proxy at addr answers raw: it reads until the proxy
// closes the connection or is silent for quiet, and drops the headers a
// proxy sets itself.
func proxied(t *testing.T, addr string, raw []byte, quiet time.Duration) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write(raw)
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		c.SetReadDeadline(time.Now().Add(quiet))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	var lines []string
	for _, l := range strings.Split(normal(out), "\n") {
		if !strings.HasPrefix(l, "Server: ") && !strings.HasPrefix(l, "Date: ") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestProxiedDifferential holds h1 to net/http behind nginx and haproxy
// with keep-alive upstream connections: every case of the differential
// corpus, and the requests that end at h1's buffer boundaries, get the
// same answers through the proxy from both. The upstream connections
// stay open from case to case, as a proxy's pool keeps them.
func TestProxiedDifferential(t *testing.T) {
	t.Parallel()
	for _, px := range proxies {
		t.Run(px.name, func(t *testing.T) {
			p := startPair(t, http.HandlerFunc(echo))
			std, fast := px.start(t, p)
			// The cases run 32 at a time (each waits for the proxy's
			// silence), on the proxy's shared upstream pools.
			cases := append(differential, boundaryCases()...)
			got, want := make([]string, len(cases)), make([]string, len(cases))
			var wg sync.WaitGroup
			sem := make(chan struct{}, 32)
			for i, tc := range cases {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					want[i] = proxied(t, std, []byte(tc.raw), 500*time.Millisecond)
					got[i] = proxied(t, fast, []byte(tc.raw), 500*time.Millisecond)
				})
			}
			wg.Wait()
			for i, tc := range cases {
				if got[i] != want[i] {
					t.Errorf("%s: through %s, h1 answered\n%s\nnet/http answered\n%s", tc.name, px.name, got[i], want[i])
				}
			}
		})
	}
}

// TestProxiedNoCrossTalk sends many clients' requests at once through
// nginx and haproxy to h1, on the proxies' pooled upstream connections:
// plain calls, calls that end at h1's buffer boundaries, and requests of
// the shapes h1 hands to net/http (a GET, a chunked body) between them.
// Every client gets its own reply, whole, and no reply is lost or late.
func TestProxiedNoCrossTalk(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s %d %s", r.Method, r.URL.Path, len(b), r.Header.Get("X-Id"))
	})
	for _, px := range proxies {
		t.Run(px.name, func(t *testing.T) {
			p := startPair(t, h)
			_, fast := px.start(t, p)
			const clients, each = 16, 60
			var wg sync.WaitGroup
			var mu sync.Mutex
			var bad []string
			for i := range clients {
				wg.Go(func() {
					c, err := net.Dial("tcp", fast)
					if err != nil {
						t.Error(err)
						return
					}
					defer c.Close()
					br := bufio.NewReader(c)
					for j := range each {
						id := fmt.Sprintf("%d-%d", i, j)
						var req, want string
						switch j % 6 {
						case 0:
							req, want = "GET /x HTTP/1.1\r\nHost: h\r\nX-Id: "+id+"\r\n\r\n", "GET /x 0 "+id
						case 1:
							req, want = "POST / HTTP/1.1\r\nHost: h\r\nX-Id: "+id+"\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "POST / 3 "+id
						case 2:
							// A body that, with its head, ends near 4096 bytes.
							n := readBufferBytes - 2 - len(post("X-Id: "+id+"\r\n", "")) - 4 - (j % 3)
							req, want = post("X-Id: "+id+"\r\n", strings.Repeat("b", n)), "POST / "+strconv.Itoa(n)+" "+id
						default:
							body := strings.Repeat("a", 100+i*j)
							req, want = post("X-Id: "+id+"\r\n", body), "POST / "+strconv.Itoa(len(body))+" "+id
						}
						c.SetDeadline(time.Now().Add(10 * time.Second))
						if _, err := c.Write([]byte(req)); err != nil {
							t.Error(err)
							return
						}
						resp, err := http.ReadResponse(br, nil)
						if err != nil {
							mu.Lock()
							bad = append(bad, id+": "+err.Error())
							mu.Unlock()
							return
						}
						b, _ := io.ReadAll(resp.Body)
						if resp.StatusCode != 200 || string(b) != want {
							mu.Lock()
							bad = append(bad, fmt.Sprintf("%s: %d %q, want %q", id, resp.StatusCode, b, want))
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			if len(bad) > 0 {
				t.Errorf("through %s, %d of %d requests were not answered as sent, such as %s", px.name, len(bad), clients*each, bad[0])
			}
		})
	}
}
