package bridge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/daemon"
	"google.golang.org/grpc"
)

// startNginx runs a real nginx, in the foreground and as one process,
// with a configuration of its own in a temporary directory: one server
// on a free loopback port per location body in servers, in order, each
// proxying to upstream (host:port). It returns the servers' URLs and
// stops nginx when the test ends. Without nginx the test is skipped
// (failed under CI).
func startNginx(t *testing.T, upstream string, servers ...string) []string {
	t.Helper()
	bin := daemon.Need(t, "nginx", "nginx")
	dir := t.TempDir()
	var conf strings.Builder
	fmt.Fprintf(&conf, `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 128; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
`, dir)
	var urls, addrs []string
	for _, loc := range servers {
		addr := daemon.FreeAddr(t)
		urls, addrs = append(urls, "http://"+addr+"/"), append(addrs, addr)
		fmt.Fprintf(&conf, "\tserver {\n\t\tlisten %s;\n\t\tlocation / {\n\t\t\tproxy_pass http://%s;\n\t\t\t%s\n\t\t}\n\t}\n", addr, upstream, loc)
	}
	conf.WriteString("}\n")
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon.Start(t, exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log")), syscall.SIGTERM, addrs...)
	return urls
}

// TestLiveNginx follows WatchNotes through a real nginx in front of the
// bridge, with nginx's proxy buffering on (its default): with nginx's
// defaults otherwise (HTTP/1.0 to the upstream) and as SSE is usually
// proxied (HTTP/1.1, keep-alive), every note arrives within liveLatency
// of the backend's send (see withinLatency),
// because the reply's X-Accel-Buffering: no turns buffering off for it,
// even where nginx would compress it (gzip_types text/event-stream). The
// control: that server told to ignore the header holds the whole reply
// back, head and all, until the stream ends.
func TestLiveNginx(t *testing.T) {
	checkLeaks(t)
	clock := new(sendClock)
	e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{StreamKeepalive: -1}, Limits: bridge.Limits{CallTimeout: 10 * time.Second}}, withServer(grpc.StreamInterceptor(clock.intercept)))
	upstream := strings.TrimPrefix(e.url, "http://")
	urls := startNginx(t, upstream,
		"# nginx's defaults: proxy_buffering on, HTTP/1.0 to the upstream",
		"proxy_http_version 1.1; proxy_set_header Connection \"\";",
		"gzip on; gzip_types text/event-stream; gzip_min_length 0;",
		"gzip on; gzip_types text/event-stream; gzip_min_length 0; proxy_ignore_headers X-Accel-Buffering; # the control: buffering stays on",
	)
	notes := demov1.NewNotesClient(e.conn)
	client := newHTTPClient(t)
	for i, tc := range []struct {
		name           string
		gzip, buffered bool
	}{{"defaults", false, false}, {"HTTP/1.1 upstream", false, false}, {"gzip", true, false}, {"X-Accel-Buffering ignored", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			tag := fmt.Sprintf("nginx-%d", i)
			first, err := notes.CreateNote(t.Context(), &demov1.CreateNoteRequest{Note: &demov1.Note{Title: "before", Tags: []string{tag}}})
			if err != nil {
				t.Fatal(err)
			}
			body := `{"jsonrpc":"2.0","method":"demo.v1.Notes.WatchNotes","params":{"tags":["` + tag + `"],"follow":true},"id":1}`
			if tc.buffered {
				// Held back: not even the head comes while the stream runs.
				ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, urls[i], strings.NewReader(body))
				req.Header.Set("Accept", acceptSSE)
				resp, err := client.Do(req)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if len(b) > 0 {
						t.Fatalf("with X-Accel-Buffering ignored, nginx passed %q within 700ms; want the control to show it buffering", b)
					}
				}
				return
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp := postLiveCtx(t, ctx, client, urls[i], acceptSSE, body, nil)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != acceptSSE || resp.Header.Get("Cache-Control") != "no-cache" {
				t.Fatalf("through nginx: HTTP %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
			}
			if resp.Uncompressed != tc.gzip { // Go's transport asked for gzip, and took nginx's off
				t.Errorf("nginx compressed the reply: %v, want %v", resp.Uncompressed, tc.gzip)
			}
			lr := readLive(t, resp, acceptSSE)
			if got := notificationOf(t, lr.next(waitTimeout).msg, "1")["id"]; got != first.GetId() {
				t.Fatalf("first message is note %v, want %s", got, first.GetId())
			}
			for i := range 3 {
				d := withinLatency(t, fmt.Sprint("through nginx, note ", i), func() time.Duration {
					note, err := notes.CreateNote(t.Context(), &demov1.CreateNoteRequest{Note: &demov1.Note{Title: "after", Tags: []string{tag}}})
					if err != nil {
						t.Fatal(err)
					}
					ev := lr.next(waitTimeout)
					if got := notificationOf(t, ev.msg, "1")["id"]; got != note.GetId() {
						t.Fatalf("got note %v, want %s", got, note.GetId())
					}
					return clock.since(t, note.GetId(), ev.at)
				})
				t.Logf("through nginx, note %d arrived %s after the backend sent it", i, d)
			}
		})
	}
}
