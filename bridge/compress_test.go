package bridge_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// rawClient neither asks for compression by itself nor decodes it, so
// that tests see the bytes the bridge sends.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the reply is not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("the reply is not gzip: %v", err)
	}
	return out
}

func send(t testing.TB, method, url string, body []byte, h http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestCompressedReplies: with Accept-Encoding: gzip, replies of 1 KiB or
// more to POST / and GET /openrpc.json are gzip; smaller ones, and every
// reply to a client that does not ask, are not.
func TestCompressedReplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	big := `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Echo","params":{"fString":"` + strings.Repeat("compressible ", 400) + `"}}`
	small := `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"Ada"}}`
	gz := http.Header{"Accept-Encoding": {"gzip, deflate, br"}}
	tests := []struct {
		name, method, path, body string
		h                        http.Header
		compressed               bool
	}{
		{"big reply", http.MethodPost, "/", big, gz, true},
		{"small reply", http.MethodPost, "/", small, gz, false},
		{"not asked", http.MethodPost, "/", big, nil, false},
		{"batch", http.MethodPost, "/", "[" + big + "," + strings.Replace(big, `"id":1`, `"id":2`, 1) + "]", gz, true},
		{"document", http.MethodGet, "/openrpc.json", "", gz, true},
		{"document not asked", http.MethodGet, "/openrpc.json", "", nil, false},
	}
	for _, tt := range tests {
		resp, b := send(t, tt.method, e.url+tt.path, []byte(tt.body), tt.h)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: HTTP %d %s", tt.name, resp.StatusCode, b)
			continue
		}
		enc := resp.Header.Get("Content-Encoding")
		if (enc == "gzip") != tt.compressed {
			t.Errorf("%s: Content-Encoding %q, want compressed %v", tt.name, enc, tt.compressed)
			continue
		}
		if enc == "gzip" {
			plain := gunzip(t, b)
			if len(b) >= len(plain) {
				t.Errorf("%s: %d bytes compressed from %d", tt.name, len(b), len(plain))
			}
			b = plain
		}
		if tt.path == "/" && !bytes.Contains(b, []byte(`"result"`)) || tt.path != "/" && !bytes.Contains(b, []byte(`"openrpc"`)) {
			t.Errorf("%s: reply %.200s", tt.name, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tt.name, ct)
		}
	}
}

// TestCompressedRequests: a Content-Encoding: gzip body is decompressed;
// its decompressed size counts against max_body_bytes (413), and a gzip
// bomb costs no more memory than that; a body that is not gzip is a parse
// error (400), an encoding other than gzip 415.
func TestCompressedRequests(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{MaxBodyBytes: limit}})
	good := []byte(`{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"Ada"}}`)
	gz := http.Header{"Content-Encoding": {"gzip"}}

	resp, b := send(t, http.MethodPost, e.url, gzipped(t, good), gz)
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"Hello, Ada!"`)) {
		t.Errorf("gzip body: HTTP %d %s", resp.StatusCode, b)
	}
	// At the limit, decompressed, it is read; one byte over, it is not.
	at := append(bytes.Repeat([]byte(" "), limit-len(good)), good...)
	if resp, b := send(t, http.MethodPost, e.url, gzipped(t, at), gz); resp.StatusCode != 200 {
		t.Errorf("gzip body of max_body_bytes decompressed: HTTP %d %.200s", resp.StatusCode, b)
	}
	over := append([]byte(" "), at...)
	if resp, b := send(t, http.MethodPost, e.url, gzipped(t, over), gz); resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(b, []byte("max_body_bytes")) {
		t.Errorf("gzip body one byte over max_body_bytes decompressed: HTTP %d %.200s", resp.StatusCode, b)
	}

	// A bomb: 256 MiB of spaces in about 256 KiB, of which only the first
	// max_body_bytes are ever decompressed. It is 256 gzip members of 1 MiB
	// each, one after the other (RFC 1952, 2.2), which a gzip reader reads
	// as one stream: compressing 256 MiB at once would take a minute under
	// the race detector.
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write(bytes.Repeat([]byte(" "), 1<<20))
	zw.Close()
	bomb := bytes.NewBuffer(bytes.Repeat(member.Bytes(), 256))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, b = send(t, http.MethodPost, e.url, bomb.Bytes(), gz)
	runtime.ReadMemStats(&after)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("gzip bomb: HTTP %d %.200s, want 413", resp.StatusCode, b)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<20 {
		t.Errorf("the gzip bomb of %d bytes made the bridge allocate %d MiB", bomb.Len(), grown>>20)
	}

	for _, tt := range []struct {
		name   string
		body   []byte
		h      http.Header
		status int
		code   string
	}{
		{"not gzip", good, gz, http.StatusBadRequest, `"code":-32700`},
		{"cut short", gzipped(t, good)[:20], gz, http.StatusBadRequest, `"code":-32700`},
		{"br", good, http.Header{"Content-Encoding": {"br"}}, http.StatusUnsupportedMediaType, `"code":-32600`},
		{"identity", good, http.Header{"Content-Encoding": {"identity"}}, http.StatusOK, `"result"`},
	} {
		resp, b := send(t, http.MethodPost, e.url, tt.body, tt.h)
		if resp.StatusCode != tt.status || !bytes.Contains(b, []byte(tt.code)) {
			t.Errorf("%s: HTTP %d %s, want %d with %s", tt.name, resp.StatusCode, b, tt.status, tt.code)
		}
		if tt.status == http.StatusUnsupportedMediaType && resp.Header.Get("Accept-Encoding") == "" {
			t.Errorf("%s: 415 without Accept-Encoding", tt.name)
		}
	}
}
