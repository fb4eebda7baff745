package explorer_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/explorer"
)

// TestHandler serves the explorer through a bridge: the page and its
// assets with their types and headers, and 404, 405 and redirects for
// the rest.
func TestHandler(t *testing.T) {
	e := newEnv(t, bridge.Options{Explorer: explorer.Handler()})
	off := newEnv(t, bridge.Options{})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		name, base, method, path string
		code                     int
		contentType, location    string
		body                     string // a part of it
	}{
		{"page", e.url, "GET", "/explorer", 200, "text/html; charset=utf-8", "", `data-role="params"`},
		{"script", e.url, "GET", "/explorer/explorer.js", 200, "text/javascript; charset=utf-8", "", "class Explorer"},
		{"style", e.url, "GET", "/explorer/explorer.css", 200, "text/css; charset=utf-8", "", ":root"},
		{"icon", e.url, "GET", "/explorer/icon.svg", 200, "image/svg+xml", "", "<svg"},
		{"head", e.url, "HEAD", "/explorer", 200, "text/html; charset=utf-8", "", ""},
		{"slash", e.url, "GET", "/explorer/", 301, "", "../explorer", ""},
		{"unknown asset", e.url, "GET", "/explorer/nope.js", 404, "application/json", "", "not found"},
		{"no directories", e.url, "GET", "/explorer/assets/explorer.js", 404, "application/json", "", "not found"},
		{"other prefix", e.url, "GET", "/explorers", 404, "application/json", "", "JSON-RPC is served at POST /"},
		{"post", e.url, "POST", "/explorer", 405, "application/json", "", "method not allowed"},
		{"off", off.url, "GET", "/explorer", 404, "application/json", "", "JSON-RPC is served at POST /"},
		{"off, asset", off.url, "GET", "/explorer/explorer.js", 404, "application/json", "", "JSON-RPC is served at POST /"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, c.base+c.path, nil)
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.code || (c.contentType != "" && resp.Header.Get("Content-Type") != c.contentType) {
				t.Fatalf("%s %s: HTTP %d %s, want %d %s (%s)", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.code, c.contentType, b)
			}
			if c.location != "" && resp.Header.Get("Location") != c.location {
				t.Errorf("Location = %q, want %q", resp.Header.Get("Location"), c.location)
			}
			if !strings.Contains(string(b), c.body) {
				t.Errorf("the body %.200q lacks %q", b, c.body)
			}
			if c.code == 200 {
				for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "ETag"} {
					if resp.Header.Get(h) == "" {
						t.Errorf("no %s", h)
					}
				}
				if c.method == "HEAD" && len(b) != 0 {
					t.Errorf("HEAD has a body of %d bytes", len(b))
				}
			}
		})
	}

	t.Run("etag", func(t *testing.T) {
		resp, err := http.Get(e.url + "/explorer/explorer.js")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		req, _ := http.NewRequest("GET", e.url+"/explorer/explorer.js", nil)
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("a request with the ETag got HTTP %d, want 304", resp.StatusCode)
		}
	})
}

// TestGzip: the assets are served gzipped to a client that takes gzip,
// with an ETag of their own, and as they are otherwise.
func TestGzip(t *testing.T) {
	e := newEnv(t, bridge.Options{Explorer: explorer.Handler()})
	get := func(path, accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url+path, nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept) // set by hand: the transport does not decode
		}
		tr := &http.Transport{DisableCompression: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	for _, path := range []string{"/explorer", "/explorer/explorer.js", "/explorer/explorer.css"} {
		plainResp, plain := get(path, "")
		for _, c := range []struct {
			accept string
			gzip   bool
		}{{"gzip", true}, {"br, gzip;q=0.5", true}, {"*", true}, {"gzip;q=0", false}, {"gzip;q=0.00", false}, {"identity", false}, {"", false}} {
			resp, b := get(path, c.accept)
			got := resp.Header.Get("Content-Encoding") == "gzip"
			if got != c.gzip {
				t.Errorf("%s with Accept-Encoding %q: gzipped %v, want %v", path, c.accept, got, c.gzip)
				continue
			}
			if resp.Header.Get("Vary") != "Accept-Encoding" {
				t.Errorf("%s: Vary = %q", path, resp.Header.Get("Vary"))
			}
			if !got {
				if !bytes.Equal(b, plain) {
					t.Errorf("%s with %q: a body other than the plain one", path, c.accept)
				}
				continue
			}
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			un, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(un, plain) {
				t.Errorf("%s gzipped does not decode to the plain body (%v)", path, err)
			}
			if resp.Header.Get("ETag") == plainResp.Header.Get("ETag") {
				t.Errorf("%s: the gzipped and plain bodies share the ETag %s", path, resp.Header.Get("ETag"))
			}
		}
	}
}

// TestCSP checks the policy, and that a Host with characters a host
// cannot have is left out of it rather than copied into the header.
func TestCSP(t *testing.T) {
	cases := []struct{ host, connect string }{
		{"127.0.0.1:8080", "connect-src 'self' ws://127.0.0.1:8080 wss://127.0.0.1:8080;"},
		{"[::1]:8080", "connect-src 'self' ws://[::1]:8080 wss://[::1]:8080;"},
		{"api.example.com", "connect-src 'self' ws://api.example.com wss://api.example.com;"},
		{"evil.com; script-src *", "connect-src 'self';"},
		{"", "connect-src 'self';"},
	}
	for _, c := range cases {
		got := explorer.CSP(c.host)
		if !strings.Contains(got, c.connect) {
			t.Errorf("CSP(%q) = %q, want %q", c.host, got, c.connect)
		}
		for _, d := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "frame-ancestors 'none'"} {
			if !strings.Contains(got, d+";") && !strings.HasSuffix(got, d) {
				t.Errorf("CSP(%q) = %q lacks %s", c.host, got, d)
			}
		}
		if strings.Contains(got, "unsafe") {
			t.Errorf("CSP(%q) = %q allows unsafe code", c.host, got)
		}
	}
}

// TestAssetSize keeps the page small: docs/explorer.md states its
// gzipped size, which must stay under this budget.
func TestAssetSize(t *testing.T) {
	e := newEnv(t, bridge.Options{Explorer: explorer.Handler()})
	total, gz := 0, 0
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	for _, p := range []string{"/explorer", "/explorer/explorer.js", "/explorer/explorer.css", "/explorer/icon.svg"} {
		for _, accept := range []string{"identity", "gzip"} {
			req, _ := http.NewRequest("GET", e.url+p, nil)
			req.Header.Set("Accept-Encoding", accept)
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if accept == "gzip" {
				gz += len(b)
			} else {
				total += len(b)
			}
		}
	}
	t.Logf("the explorer's assets: %d bytes, %d served gzipped", total, gz)
	if gz > 24<<10 {
		t.Errorf("the explorer's assets are %d bytes gzipped, over the 24 KiB budget", gz)
	}
}
