package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var explorerLine = regexp.MustCompile(`^API explorer \(open it in a browser\): (http://\S+/explorer)$`)

// TestDemoExplorer runs demo with the explorer on (the default) and off
// (--explorer=false): the banner prints its URL only when it is served,
// and GET /explorer is the page or 404.
func TestDemoExplorer(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"default", nil, http.StatusOK},
		{"off", []string{"--explorer=false"}, http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, append([]string{"demo", "--listen", "127.0.0.1:0"}, c.args...)...)
			banner := p.stdout.until(t, "end of banner", func(l string) bool { return strings.HasPrefix(l, "Press Ctrl+C") })
			var page, root string
			for _, l := range banner {
				if m := explorerLine.FindStringSubmatch(l); m != nil {
					page = m[1]
				}
				if _, u, ok := strings.Cut(l, "JSON-RPC 2.0 at "); ok {
					root = u
				}
			}
			if (page != "") != (c.want == http.StatusOK) {
				t.Fatalf("the banner's explorer line is %q; want one only when the explorer is on:\n%s", page, strings.Join(banner, "\n"))
			}
			if page == "" {
				page = root + "explorer"
			}
			resp, err := http.Get(page)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("GET %s: HTTP %d, want %d", page, resp.StatusCode, c.want)
			}
			if c.want == http.StatusOK && (!strings.Contains(string(body), "API explorer") || resp.Header.Get("Content-Security-Policy") == "") {
				t.Errorf("GET %s is not the page with its policy: %.200s", page, body)
			}
			if code := p.stop(t); code != exitOK {
				t.Errorf("exit code %d, want 0", code)
			}
		})
	}
}
