package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// FuzzParseGRPCTimeout checks the Grpc-Timeout parser against its
// definition: 1 to 8 digits and a unit are accepted with exactly their
// value, anything else is refused, and nothing panics.
func FuzzParseGRPCTimeout(f *testing.F) {
	for _, s := range []string{"1S", "500m", "99999999H", "00000000n", "1", "S", "+1S", "-1S", "1.5S", "123456789S", "1s", "1 S", "\x001S", "１S"} {
		f.Add(s)
	}
	units := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second, 'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := bridge.ParseGRPCTimeout(v)
		valid := len(v) >= 2 && len(v) <= 9 && units[v[len(v)-1]] != 0
		for i := 0; valid && i < len(v)-1; i++ {
			valid = v[i] >= '0' && v[i] <= '9'
		}
		switch {
		case valid && err != nil:
			t.Fatalf("ParseGRPCTimeout(%q): %v, want it accepted", v, err)
		case !valid && err == nil:
			t.Fatalf("ParseGRPCTimeout(%q) = %v, want an error", v, d)
		case valid:
			n, _ := strconv.ParseInt(v[:len(v)-1], 10, 64)
			unit := units[v[len(v)-1]]
			want := time.Duration(n) * unit
			if n > int64((1<<63-1)/unit) {
				want = 1<<63 - 1
			}
			if d != want {
				t.Fatalf("ParseGRPCTimeout(%q) = %v, want %v", v, d, want)
			}
		}
	})
}

// FuzzHeaders sends a call with fuzzed values of every header the bridge
// parses: the two timeout headers, Authorization and X-API-Key (with
// authentication on), forwarded Grpc-Metadata-* values, binary ones among
// them, Traceparent, X-Request-Id and Sec-WebSocket-Protocol (which may
// carry a token when no header does). The answer is 200, 400 or 401 with a
// well-formed JSON-RPC reply, and never a panic.
func FuzzHeaders(f *testing.F) {
	f.Add("1S", "", "Bearer admin-token-0123456789", "", "", "", "", "", "")
	f.Add("", "1.5", "", "admin-token-0123456789", "AQID", "text", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "req-1", "jsonrpc")
	f.Add("99999999H", "NaN", "Bearer", "a b", "!!", "\x00", "ff-0-0-0", "\xff", "base64url.bearer.grpc-jsonrpc-bridge.!!")
	f.Add("-1S", "1e400", "Basic abc", "admin-token-0123456789", "AQID==", "caf\u00e9", "00-00000000000000000000000000000000-0000000000000000-00", strings.Repeat("x", 200), "")
	f.Add("1n", "-0", "bearer admin-token-0123456789=", "", "-_-_", "", "", "", "")
	f.Add("", "", "", "", "", "", "", "", "jsonrpc, base64url.bearer.grpc-jsonrpc-bridge.YWRtaW4tdG9rZW4tMDEyMzQ1Njc4OQ")
	e := newEnv(f, bridge.Options{Auth: newAuth(f), Limits: bridge.Limits{CallTimeout: time.Second}, Logger: slog.New(failOnError{t: f})})
	body := req("helloworld.Greeter.SayHello", `{"name":"h"}`, "1")
	f.Fuzz(func(t *testing.T, grpcTimeout, timeout, authz, apiKey, mdBin, mdText, traceparent, requestID, wsProtocol string) {
		hr := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
		for name, v := range map[string]string{
			bridge.GRPCTimeoutHeader: grpcTimeout, bridge.TimeoutHeader: timeout, "Authorization": authz, "X-Api-Key": apiKey,
			"Grpc-Metadata-Fuzz-Bin": mdBin, "Grpc-Metadata-Fuzz": mdText, "Traceparent": traceparent, bridge.RequestIDHeader: requestID,
			"Sec-Websocket-Protocol": wsProtocol,
		} {
			if v != "" {
				hr.Header[name] = []string{v}
			}
		}
		w := httptest.NewRecorder()
		e.bridge.ServeHTTP(w, hr)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized:
		default:
			t.Fatalf("HTTP %d %s, want 200, 400 or 401", w.Code, w.Body)
		}
		r, ok := decode(t, w.Body.Bytes()).(map[string]any)
		if !ok {
			t.Fatalf("reply %s is not an object", w.Body)
		}
		checkEnvelope(t, r)
		if w.Code != http.StatusOK && (r["id"] != nil || errCode(t, r) == 0) {
			t.Fatalf("HTTP %d with reply %s, want an error with id null", w.Code, w.Body)
		}
		id := w.Header().Get(bridge.RequestIDHeader)
		if id == "" || len(id) > 128 || strings.ContainsAny(id, " \x00\r\n") {
			t.Fatalf("X-Request-Id %q, want 1 to 128 visible characters", id)
		}
	})
}

// FuzzWebSocket feeds frames through a real WebSocket connection to the
// bridge. The first byte of the input picks the frame type (odd: binary,
// which closes the connection with 1003); the rest is the frame. Every
// frame that Handle answers gets exactly one well-formed reply on the
// connection, and a call sent after it is answered too.
func FuzzWebSocket(f *testing.F) {
	f.Add([]byte("\x00" + req("helloworld.Greeter.SayHello", "", "1")))
	f.Add([]byte("\x00" + req("helloworld.Greeter.SayHello", "", "")))
	f.Add([]byte("\x00[" + req(countMethod, `{"key":"ws"}`, "") + ",1]"))
	f.Add([]byte("\x00" + req("rpc.stream.cancel", `{"stream":"nope"}`, "1")))
	f.Add([]byte("\x00" + req("test.v1.TestService.ServerStream", `{"count":3}`, "1")))
	f.Add([]byte("\x00" + req("rpc.discover", "", `"d"`)))
	f.Add([]byte("\x00\xff{"))
	f.Add([]byte("\x00"))
	f.Add([]byte("\x01" + req("helloworld.Greeter.SayHello", "", "1")))
	f.Add([]byte("\x00" + strings.Repeat("[", 1001)))
	e := newEnv(f, bridge.Options{Limits: bridge.Limits{CallTimeout: 50 * time.Millisecond, MaxBatchSize: 20}, Streaming: bridge.Streaming{WSMaxMessageBytes: 1 << 16}, Logger: slog.New(failOnError{t: f})})
	var mu sync.Mutex
	var ws *websocket.Conn
	f.Cleanup(func() {
		if ws != nil {
			ws.CloseNow()
		}
	})
	const sentinel = `"fuzz-sentinel"`
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if ws == nil {
			var err error
			if ws, _, err = websocket.Dial(ctx, e.url+"/ws", nil); err != nil {
				t.Fatalf("dial: %v", err)
			}
			ws.SetReadLimit(1 << 24)
		}
		typ, frame := websocket.MessageText, in[1:]
		if in[0]&1 == 1 {
			typ = websocket.MessageBinary
		}
		// Whether the frame gets a reply does not depend on the backend:
		// ask Handle, which parses it the same way.
		wantReply := len(e.bridge.Handle(ctx, frame, nil)) > 0
		if err := ws.Write(ctx, typ, frame); err != nil {
			t.Fatalf("write: %v", err)
		}
		if closes := typ == websocket.MessageBinary || len(frame) > 1<<16; closes {
			// Earlier frames may have left streams running: their
			// notifications and replies can still arrive before the close.
			var data []byte
			var err error
			for err == nil {
				_, data, err = ws.Read(ctx)
			}
			ws.CloseNow()
			ws = nil
			if status := websocket.CloseStatus(err); status != websocket.StatusUnsupportedData && status != websocket.StatusMessageTooBig {
				t.Fatalf("frame %q: got %q, %v, want the connection closed with 1003 or 1009", frame, data, err)
			}
			return
		}
		if err := ws.Write(ctx, websocket.MessageText, []byte(req("helloworld.Greeter.SayHello", "", sentinel))); err != nil {
			t.Fatalf("write: %v", err)
		}
		gotSentinel, gotReply := false, false
		for !gotSentinel || wantReply && !gotReply {
			_, data, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("frame %q: read: %v", frame, err)
			}
			v := decode(t, data)
			var first map[string]any
			eachReply(t, v, func(r map[string]any) {
				if first == nil {
					first = r
				}
				if _, ok := r["method"]; !ok {
					checkEnvelope(t, r)
				}
			})
			switch {
			case first == nil:
				t.Fatalf("frame %q: an empty reply %s", frame, data)
			case first["method"] != nil: // a stream notification
			case mustRaw(first["id"]) == sentinel && !bytes.HasPrefix(data, []byte("[")) && !gotSentinel:
				gotSentinel = true // or the frame's own reply, if it has the same id: they count alike
			case !wantReply:
				t.Fatalf("frame %q: got reply %s, want none", frame, data)
			case gotReply:
				t.Fatalf("frame %q: a second reply %s", frame, data)
			default:
				gotReply = true
			}
		}
	})
}

func mustRaw(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
