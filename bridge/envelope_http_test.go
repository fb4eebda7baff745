package bridge_test

import (
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// TestContentTypesAreNotChecked: whatever Content-Type a client declares,
// the body is read as JSON and the reply is application/json.
func TestContentTypesAreNotChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	hello := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"Ada"},"id":"c"}`
	for _, ct := range []string{
		"application/json; charset=utf-8",
		"application/json-rpc",
		"application/jsonrequest",
		"APPLICATION/JSON",
		"text/plain;charset=UTF-8",
		"multipart/form-data; boundary=x",
		"application/octet-stream",
		"not a media type",
	} {
		t.Run(ct, func(t *testing.T) {
			code, body := e.do(t, http.MethodPost, "/", ct, hello)
			if code != http.StatusOK {
				t.Fatalf("got HTTP %d %s, want 200", code, body)
			}
			r := decode(t, body).(map[string]any)
			checkEnvelope(t, r)
			if res, _ := r["result"].(map[string]any); r["id"] != "c" || res["message"] != "Hello, Ada!" {
				t.Errorf("got %s, want Ada greeted with id \"c\"", body)
			}
		})
	}
}

// TestBodyEncodings: JSON-RPC bodies are UTF-8 (RFC 8259 section 8.1). A
// UTF-8 byte order mark is skipped; UTF-16 text, with or without its
// mark, is not JSON in UTF-8 and is a parse error with id null.
func TestBodyEncodings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	hello := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`
	utf16Body := func(bigEndian, mark bool) string {
		var order binary.AppendByteOrder = binary.LittleEndian
		if bigEndian {
			order = binary.BigEndian
		}
		var b []byte
		units := utf16.Encode([]rune(hello))
		if mark {
			units = append([]uint16{0xFEFF}, units...)
		}
		for _, u := range units {
			b = order.AppendUint16(b, u)
		}
		return string(b)
	}
	tests := []struct {
		name, body string
		wantCode   int64 // 0: a result
	}{
		{"UTF-8", hello, 0},
		{"UTF-8 with a byte order mark", "\uFEFF" + hello, 0},
		{"UTF-8 with a byte order mark and whitespace", "\uFEFF \r\n\t" + hello + "\r\n", 0},
		{"a byte order mark alone", "\uFEFF", -32700},
		{"two byte order marks", "\uFEFF\uFEFF" + hello, -32700},
		{"UTF-16LE with a byte order mark", utf16Body(false, true), -32700},
		{"UTF-16BE with a byte order mark", utf16Body(true, true), -32700},
		{"UTF-16LE without a mark", utf16Body(false, false), -32700},
		{"Latin-1 in a string", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"caf` + "\xe9" + `"},"id":1}`, -32700},
		{"a NUL byte after the value", hello + "\x00", -32700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := e.post(t, tt.body)
			if code != http.StatusOK {
				t.Fatalf("got HTTP %d %s, want 200", code, body)
			}
			r := decode(t, body).(map[string]any)
			checkEnvelope(t, r)
			if got := errCode(t, r); got != tt.wantCode {
				t.Fatalf("got %s, want code %d", body, tt.wantCode)
			}
			if tt.wantCode != 0 && r["id"] != nil {
				t.Errorf("got id %v, want null", r["id"])
			}
		})
	}
}

// TestOtherHTTPMethodsOnRoot: only POST carries JSON-RPC; HEAD and OPTIONS
// get 405 with Allow like any other method, HEAD without a body.
func TestOtherHTTPMethodsOnRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	for _, method := range []string{http.MethodHead, http.MethodOptions, http.MethodGet, http.MethodPatch} {
		t.Run(method, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), method, e.url+"/", strings.NewReader(""))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
				t.Errorf("got HTTP %d Allow %q, want 405 with Allow: POST", resp.StatusCode, resp.Header.Get("Allow"))
			}
			if method == http.MethodHead {
				if len(body) != 0 {
					t.Errorf("HEAD got a body %q", body)
				}
				return
			}
			r := decode(t, body).(map[string]any)
			checkEnvelope(t, r)
			if got := errCode(t, r); got != -32600 || r["id"] != nil {
				t.Errorf("got %s, want -32600 with id null", body)
			}
		})
	}
}
