package interop_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/binary"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// TestNode runs the suite against the grpc-js server.
func TestNode(t *testing.T) {
	t.Parallel()
	suite(t, nodeKind)
}

// TestPython runs the suite against the grpcio (C-core) server.
func TestPython(t *testing.T) {
	t.Parallel()
	suite(t, pythonKind)
}

// The metadata the metadata test sends: two allowlisted headers, two
// Grpc-Metadata-* ones, one that is not forwarded; the servers echo every
// x-* key back as h-<key> (header) and t-<key> (trailer).
var (
	requestHeaders  = []string{"X-Big", "X-Multi"}
	responseHeaders = []string{
		"h-x-big", "t-x-big", "h-x-multi", "t-x-multi", "h-x-tenant", "t-x-tenant",
		"h-x-data-bin", "t-x-data-bin", "h-x-unlisted", "t-x-unlisted", peerHeader,
	}
)

// peerHeader is the servers' header metadata naming the client's address
// and port: which connection the call came on.
const peerHeader = "interop-peer"

func suite(t *testing.T, k kind) {
	require(t, k)
	be := startBackend(t, k, backendOptions{})
	bridges := make(map[string]*bridgeProc)
	for _, p := range paths {
		bridges[p.name] = startBridge(t, be, bridgeConfig{
			direct: p.direct, protoset: !k.reflection,
			requestHeaders: requestHeaders, responseHeaders: responseHeaders,
		})
	}
	// perPath runs f on both paths, against the shared server.
	perPath := func(name string, f func(t *testing.T, b *bridgeProc)) {
		t.Run(name, func(t *testing.T) {
			for _, p := range paths {
				t.Run(p.name, func(t *testing.T) { f(t, bridges[p.name]) })
			}
		})
	}
	// withServer runs f on both paths, each with a server of its own
	// started with opts and a bridge in front of it; the two paths run in
	// parallel (nothing is shared), but for restart, whose load is heavy
	// and whose accounting reads the exact moments of kills.
	withServer := func(name string, opts backendOptions, f func(t *testing.T, be *backend, b *bridgeProc)) {
		t.Run(name, func(t *testing.T) {
			for _, p := range paths {
				t.Run(p.name, func(t *testing.T) {
					if name != "restart" {
						t.Parallel()
					}
					be := startBackend(t, k, opts)
					f(t, be, startBridge(t, be, bridgeConfig{direct: p.direct, protoset: !k.reflection, responseHeaders: []string{peerHeader}}))
				})
			}
		})
	}

	t.Run("reflection", func(t *testing.T) {
		for _, p := range paths {
			t.Run(p.name, func(t *testing.T) { testReflection(t, be, p) })
		}
	})
	if k.reflection {
		t.Run("protoset", func(t *testing.T) {
			for _, p := range paths {
				t.Run(p.name, func(t *testing.T) {
					be := be // a server with reflection is fine: the bridge does not ask it
					if k.reflectionOff {
						be = startBackend(t, k, backendOptions{noReflection: true})
					}
					testEcho(t, startBridge(t, be, bridgeConfig{direct: p.direct, protoset: true}))
				})
			}
		})
	}
	if k.name == nodeKind.name {
		t.Run("reflection-quirks", func(t *testing.T) { testNodeQuirks(t, be) })
	}
	perPath("echo", testEcho)
	perPath("status", testStatus)
	perPath("deadline", testDeadline)
	perPath("metadata", testMetadata)
	perPath("sizes", testSizes)
	perPath("streaming", testStreaming)
	withServer("stream-limit", backendOptions{maxConcurrentStreams: 2}, testStreamLimit)
	withServer("compression", backendOptions{compression: true}, testCompression)
	age := backendOptions{
		maxConnectionAge: 500 * time.Millisecond, maxConnectionGrace: 3 * time.Second,
		keepaliveTime: 250 * time.Millisecond, keepaliveTimeout: time.Second,
	}
	if k.name == nodeKind.name {
		// grpc-js 1.14 destroys a connection whose keepalive ping fails,
		// and pings fail once max_connection_age has sent GOAWAY: calls
		// in flight die before the grace period ends, whoever the client.
		// So max connection age goes without keepalive here, and keepalive
		// is tested on its own below.
		age.keepaliveTime, age.keepaliveTimeout = 0, 0
	}
	withServer("max-connection-age", age, func(t *testing.T, _ *backend, b *bridgeProc) {
		// about one connection every 500ms: at least 3 in 3s
		if n := testLongCalls(t, b); n < 3 {
			t.Errorf("the calls came on %d connections, want at least 3: the server did not end them at their age", n)
		}
	})
	withServer("keepalive", backendOptions{keepaliveTime: 100 * time.Millisecond, keepaliveTimeout: time.Second}, func(t *testing.T, _ *backend, b *bridgeProc) {
		// a connection whose pings go unanswered is closed
		if n := testLongCalls(t, b); n != 1 {
			t.Errorf("the calls came on %d connections, want 1: the server closed connections despite its pings", n)
		}
	})
	withServer("restart", backendOptions{}, testRestart)
}

// testReflection discovers the server by reflection (whatever the suite
// uses for k) and calls it.
func testReflection(t *testing.T, be *backend, p path) {
	b := startBridgeNoWait(t, be, bridgeConfig{direct: p.direct})
	if err := b.waitReady(3 * time.Second); err != nil {
		t.Fatalf("discovery by reflection of the %s server: %v; the bridge's last discovery error: %s",
			be.kind.name, err, lastDiscoveryError(b.proc))
	}
	testEcho(t, b)
	r := b.mustResult(t, svc+"Count", map[string]any{"key": "reflection-" + p.name}, nil)
	if n, err := count(r); err != nil || n != 1 {
		t.Errorf("Count: got %s (%v), want 1", r.result, err)
	}
}

// lastDiscoveryError is the error of the bridge's last failed discovery.
func lastDiscoveryError(p *binary.Proc) string {
	lines := strings.Split(p.Output(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var rec struct{ Msg, Error string }
		if json.Unmarshal([]byte(lines[i]), &rec) == nil && rec.Error != "" {
			return rec.Msg + ": " + rec.Error
		}
	}
	return "(none logged)"
}

// startBridgeNoWait is startBridge without waiting for discovery.
func startBridgeNoWait(t *testing.T, be *backend, cfg bridgeConfig) *bridgeProc {
	t.Helper()
	noWait := true
	return startBridgeWith(t, be, cfg, noWait)
}

// allTypes sets every field of test.v1.AllTypes, with values at the
// edges: 64-bit integers beyond 2^53 and at their limits, every byte
// value, non-ASCII and NUL in strings, negative map keys, nested and
// recursive messages, proto3 optional set to its zero value, and every
// well-known type.
const allTypes = `{
  "fDouble": 1.5e300, "fFloat": 3.25, "fInt32": -2147483648, "fInt64": "-9223372036854775808",
  "fUint32": 4294967295, "fUint64": "18446744073709551615", "fSint32": -123456789,
  "fSint64": "-9007199254740993", "fFixed32": 4294967295, "fFixed64": "18446744073709551615",
  "fSfixed32": -2147483648, "fSfixed64": "9223372036854775807", "fBool": true,
  "fString": "héllo \u0000 ☃ 😀 \"quoted\" \\ / \n\t", "fBytes": "%s",
  "fEnum": "COLOR_GREEN", "fMessage": {"name": "inner", "big": "9007199254740993"},
  "rInt64": ["1", "-1", "9007199254740993", "-9223372036854775808", "0"],
  "rString": ["a", "", "ü"], "rMessage": [{"name": "a"}, {"big": "-5"}, {}],
  "rEnum": ["COLOR_RED", "COLOR_UNSPECIFIED", "COLOR_GREEN"],
  "mStringInt64": {"a": "9007199254740993", "": "-1", "ключ": "0"},
  "mInt32Message": {"-7": {"name": "neg"}, "2147483647": {"big": "1"}, "0": {}},
  "mBoolString": {"true": "yes", "false": "no"},
  "oMessage": {"name": "one", "big": "-9007199254740993"},
  "tree": {"value": "root", "children": [{"value": "a", "children": [{"value": "a1"}]}, {"value": "b"}]},
  "optInt32": 0,
  "wktTimestamp": "2024-02-29T23:59:59.123456789Z", "wktDuration": "-3.000000001s",
  "wktStruct": {"a": 1, "b": [true, null, "x"], "c": {"d": -2.5}},
  "wktValue": {"k": [1, "two", false]}, "wktList": [1, "a", null, {"z": false}], "wktNull": null,
  "wktInt64": "-9007199254740993", "wktString": "", "wktBool": false,
  "wktFieldMask": "fInt32,fMessage.name",
  "wktAny": {"@type": "type.googleapis.com/test.v1.Inner", "name": "in any", "big": "9223372036854775807"},
  "wktEmpty": {}, "wktDouble": "Infinity", "wktBytes": "AP8="
}`

// allTypesParams returns allTypes with every byte value in fBytes, for
// the server of k.
func allTypesParams(k kind) json.RawMessage {
	b := make([]byte, 512)
	for i := range b {
		b[i] = byte(i)
	}
	s := fmt.Sprintf(allTypes, base64.StdEncoding.EncodeToString(b))
	if k.name == nodeKind.name {
		// protobufjs 7 (which @grpc/proto-loader 0.8 needs) encodes the
		// map key false as true (protobufjs issue 2087, fixed in 8): the
		// grpc-js server cannot send it back.
		s = strings.Replace(s, `"mBoolString": {"true": "yes", "false": "no"}`, `"mBoolString": {"true": "yes"}`, 1)
	}
	return json.RawMessage(s)
}

// asAllTypes reads JSON as test.v1.AllTypes.
func asAllTypes(t *testing.T, what string, b []byte) *testv1.AllTypes {
	t.Helper()
	m := &testv1.AllTypes{}
	if err := protojson.Unmarshal(b, m); err != nil {
		t.Fatalf("%s is not a test.v1.AllTypes: %v\n%s", what, err, b)
	}
	return m
}

// testEcho checks that every field kind makes the round trip.
func testEcho(t *testing.T, b *bridgeProc) {
	params := allTypesParams(b.kind)
	r := b.mustResult(t, svc+"Echo", params, nil)
	want, got := asAllTypes(t, "params", params), asAllTypes(t, "the result", r.result)
	if !proto.Equal(want, got) {
		t.Errorf("Echo of every field kind: the result differs from the params\n got: %s\nwant: %s", prototext.Format(got), prototext.Format(want))
	}
	// 64-bit integers are JSON strings, exactly.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r.result, &fields); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"fInt64": `"-9223372036854775808"`, "fUint64": `"18446744073709551615"`, "fSint64": `"-9007199254740993"`,
		"fFixed64": `"18446744073709551615"`, "fSfixed64": `"9223372036854775807"`, "wktInt64": `"-9007199254740993"`,
		"optInt32": `0`, "wktString": `""`, "wktBool": `false`,
	} {
		if got := string(fields[name]); got != want {
			t.Errorf("result field %s: got %s, want %s", name, got, want)
		}
	}

	// the other member of the oneof, and the empty message
	for _, params := range []string{`{"oString": "the other one"}`, `{}`} {
		r := b.mustResult(t, svc+"Echo", json.RawMessage(params), nil)
		if want, got := asAllTypes(t, "params", []byte(params)), asAllTypes(t, "the result", r.result); !proto.Equal(want, got) {
			t.Errorf("Echo %s: got %s", params, r.result)
		}
	}
}

var codeNames = []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// The details Fail sends for error_info, bad_request, custom and unknown,
// as the bridge renders them.
const wantDetails = `[
  {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TEST", "domain": "test.v1"},
  {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "f_string", "description": "bad"}]},
  {"@type": "type.googleapis.com/test.v1.CustomDetail", "reason": "custom", "retryAfterMs": "1500"},
  {"@type": "type.googleapis.com/nobody.knows.This", "value": "AQID"}
]`

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// checkStatus checks that r is the error of a backend status.
func checkStatus(t *testing.T, r reply, code int, message string, details string) {
	t.Helper()
	if r.err == nil {
		t.Errorf("got result %s, want error %d", r.result, code)
		return
	}
	if r.err.Code != code || r.err.Message != message {
		t.Errorf("got error %d %q, want %d %q", r.err.Code, r.err.Message, code, message)
	}
	var data errorData
	if err := json.Unmarshal(r.err.Data, &data); err != nil {
		t.Errorf("error data %s: %v", r.err.Data, err)
		return
	}
	if data.Status != codeNames[code] {
		t.Errorf("code %d: data.status %q, want %q", code, data.Status, codeNames[code])
	}
	got, _ := json.Marshal(data.Details)
	if data.Details == nil || !sameJSON(t, got, []byte(details)) {
		t.Errorf("code %d: data.details\n got: %s\nwant: %s", code, got, details)
	}
}

// testStatus checks every code from 1 to 16, with status details.
func testStatus(t *testing.T, b *bridgeProc) {
	for code := 1; code <= 16; code++ {
		msg := fmt.Sprintf("status %d: € 100%% done", code)
		r := b.mustCall(t, svc+"Fail", map[string]any{
			"code": code, "message": msg, "details": []string{"error_info", "bad_request", "custom", "unknown"},
		}, nil)
		checkStatus(t, r, code, msg, wantDetails)
	}
	// without details, data.details is an empty array
	checkStatus(t, b.mustCall(t, svc+"Fail", map[string]any{"code": 9, "message": "plain"}, nil), 9, "plain", `[]`)
	// code 0 succeeds
	if r := b.mustResult(t, svc+"Fail", map[string]any{"code": 0}, nil); string(r.result) != "{}" {
		t.Errorf("Fail code 0: got result %s, want {}", r.result)
	}
}

// testDeadline checks that the client's deadline reaches the backend and
// ends the call in time with code 4.
func testDeadline(t *testing.T, b *bridgeProc) {
	for _, h := range []http.Header{{"Grpc-Timeout": {"300m"}}, {"X-Request-Timeout": {"300ms"}}} {
		start := time.Now()
		r := b.mustCall(t, svc+"Sleep", map[string]any{"duration": "10s"}, h)
		took := time.Since(start)
		if r.code() != 4 || took < 250*time.Millisecond || took > 3*time.Second {
			t.Errorf("Sleep 10s with %v: got %s after %s, want code 4 after about 300ms", h, r, took)
		}
	}
	// a deadline that is long enough
	r := b.mustCall(t, svc+"Sleep", map[string]any{"duration": "0.05s"}, http.Header{"Grpc-Timeout": {"5S"}})
	if r.err != nil {
		t.Errorf("Sleep 50ms with Grpc-Timeout 5S: got %s, want a result", r)
	}
}

// testMetadata sends large metadata both ways: allowlisted headers and
// Grpc-Metadata-* reach the server, others do not, and the server's
// headers and trailers come back as HTTP response headers.
func testMetadata(t *testing.T, b *bridgeProc) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	bigText := make([]byte, 8<<10)
	for i := range bigText {
		bigText[i] = alnum[rng.IntN(len(alnum))]
	}
	bigBin := make([]byte, 8<<10)
	for i := range bigBin {
		bigBin[i] = byte(rng.IntN(256))
	}
	bigBin[0], bigBin[1] = 0, 0xff
	h := http.Header{}
	h.Set("X-Big", string(bigText))
	h.Add("X-Multi", "one")
	h.Add("X-Multi", "two")
	h.Set("Grpc-Metadata-X-Tenant", "acme")
	h.Set("Grpc-Metadata-X-Data-Bin", base64.StdEncoding.EncodeToString(bigBin))
	h.Set("X-Unlisted", "not forwarded")

	check := func(t *testing.T, r reply) {
		t.Helper()
		for _, p := range []string{"h-", "t-"} {
			if got := r.header.Get(p + "x-big"); got != string(bigText) {
				t.Errorf("%sx-big: got %d bytes, want the 8 KiB sent", p, len(got))
			}
			var multi []string
			for _, v := range r.header.Values(p + "x-multi") {
				for _, s := range strings.Split(v, ",") {
					multi = append(multi, strings.TrimSpace(s))
				}
			}
			if strings.Join(multi, "|") != "one|two" {
				t.Errorf("%sx-multi: got %q, want one and two", p, r.header.Values(p+"x-multi"))
			}
			if got := r.header.Get(p + "x-tenant"); got != "acme" {
				t.Errorf("%sx-tenant (from Grpc-Metadata-X-Tenant): got %q, want acme", p, got)
			}
			got, err := decodeBase64(r.header.Get(p + "x-data-bin"))
			if err != nil || !bytes.Equal(got, bigBin) {
				t.Errorf("%sx-data-bin: got %d bytes (%v), want the 8 KiB sent", p, len(got), err)
			}
			if got := r.header.Values(p + "x-unlisted"); len(got) != 0 {
				t.Errorf("%sx-unlisted: got %q, want nothing (X-Unlisted is not in metadata.request_headers)", p, got)
			}
		}
	}
	t.Run("result", func(t *testing.T) {
		r := b.mustResult(t, svc+"Count", map[string]any{"key": "metadata"}, h)
		check(t, r)
	})
	t.Run("error", func(t *testing.T) {
		r := b.mustCall(t, svc+"Fail", map[string]any{"code": 7, "message": "denied"}, h)
		if r.code() != 7 {
			t.Fatalf("got %s, want code 7", r)
		}
		check(t, r)
	})
}

// decodeBase64 reads any of the base64 forms.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%q is not base64", s[:min(len(s), 40)])
}

// testSizes sends messages from 1 KiB to 8 MiB. Up to the 4 MiB a
// response message may have they make the round trip; larger ones reach
// the server (allowed 16 MiB) but their echo gets code 8. A reply over
// max_response_bytes gets code 8 too, and a body over max_body_bytes HTTP
// 413 with -32600.
func testSizes(t *testing.T, b *bridgeProc) {
	payload := make([]byte, 8<<20)
	_, _ = rand.NewChaCha8([32]byte{3, 4}).Read(payload)
	sizes := []int{1 << 10, 64 << 10, 1 << 20, 3 << 20, maxRecvMsgSize - 64, 5 << 20, 8 << 20}
	if raceEnabled {
		// The race detector makes megabytes of JSON slow, in the test and
		// in the bridge: from 1 KiB to the largest echo that fits, and
		// 8 MiB, over the limit.
		sizes = []int{1 << 10, 64 << 10, 1 << 20, maxRecvMsgSize - 64, 8 << 20}
	}
	for _, size := range sizes {
		t.Run(fmt.Sprintf("%dKiB", size>>10), func(t *testing.T) {
			b64 := base64.StdEncoding.EncodeToString(payload[:size])
			r, err := b.callRaw(t.Context(), svc+"Echo", []byte(`{"fBytes":"`+b64+`"}`), nil, b64)
			if err != nil {
				t.Fatalf("echo of %d bytes: %v", size, err)
			}
			if size > maxRecvMsgSize {
				if r.code() != 8 {
					t.Errorf("echo of %d bytes, over the 4 MiB a response message may have: got %s, want code 8", size, r)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("echo of %d bytes: got %s, want a result", size, r)
			}
			if r.elided {
				if !sameJSON(t, r.result, []byte(`{"fBytes":""}`)) {
					t.Errorf("echo of %d bytes: got result %s around the bytes sent, want only them", size, r.result)
				}
				return
			}
			var res struct {
				FBytes []byte `json:"fBytes"`
			}
			if err := json.Unmarshal(r.result, &res); err != nil || !bytes.Equal(res.FBytes, payload[:size]) {
				t.Errorf("echo of %d bytes: got %d bytes back (%v), not the same", size, len(res.FBytes), err)
			}
		})
	}
	t.Run("over max_response_bytes", func(t *testing.T) {
		// 1.5 MiB of U+0001, which JSON writes as \u0001: 9 MiB of reply
		r, err := b.callRaw(t.Context(), svc+"Echo", []byte(`{"fString":"`+strings.Repeat(`\u0001`, 3<<19)+`"}`), nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if r.code() != 8 || !strings.Contains(r.err.Message, "max_response_bytes") {
			t.Errorf("a 9 MiB reply: got %s, want code 8 naming max_response_bytes", r)
		}
	})
	t.Run("over max_body_bytes", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"` + svc + `Echo","params":{"fString":"` + strings.Repeat("x", maxBodyBytes) + `"}}`
		r, err := b.post(t.Context(), []byte(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error rpcError `json:"error"`
		}
		if r.status != http.StatusRequestEntityTooLarge || json.Unmarshal(r.body, &e) != nil || e.Error.Code != -32600 {
			t.Errorf("a body over max_body_bytes: got %s, want HTTP 413 with -32600", r)
		}
	})
	// the connection to the server still works
	b.mustResult(t, svc+"Count", map[string]any{"key": "sizes"}, nil)
}

// testStreaming calls the streaming methods over HTTP (through grpc-go
// on both paths).
func testStreaming(t *testing.T, b *bridgeProc) {
	for _, tt := range []struct {
		method string
		params string
		want   string // result, or "" for an error
		code   int
	}{
		{"ServerStream", `{"count": 3, "payloadSize": 2}`, `[{"seq":1,"payload":"xx"},{"seq":2,"payload":"xx"},{"seq":3,"payload":"xx"}]`, 0},
		{"ServerStream", `{"count": 3, "failCode": 9, "failAfter": 1}`, "", 9},
		{"ClientStream", `[{"text": "a"}, {"text": "b"}]`, `{"count":2,"texts":["a","b"]}`, 0},
		{"ClientStream", `[{"text": "a"}, {"seq": 2, "failCode": 10}]`, "", 10},
		{"BidiStream", `[{"seq": 1, "text": "a"}, {"seq": 2, "text": "b"}]`, `[{"seq":1,"text":"a"},{"seq":2,"text":"b"}]`, 0},
		{"BidiStream", `[]`, `[]`, 0},
	} {
		r := b.mustCall(t, svc+tt.method, json.RawMessage(tt.params), nil)
		if r.code() != tt.code || (tt.want != "" && !sameJSON(t, r.result, []byte(tt.want))) {
			t.Errorf("%s %s: got %s, want %s (code %d)", tt.method, tt.params, r, tt.want, tt.code)
		}
	}
}

// testStreamLimit makes 50 concurrent calls to a server that allows 2
// streams at a time on a connection: every one succeeds.
func testStreamLimit(t *testing.T, _ *backend, b *bridgeProc) {
	const calls = 50
	const sleep = 100 * time.Millisecond
	var wg sync.WaitGroup
	errs := make(chan string, calls)
	start := time.Now()
	for i := range calls {
		wg.Go(func() {
			r, err := b.call(t.Context(), svc+"Sleep", map[string]any{"duration": fmt.Sprintf("%gs", sleep.Seconds())}, nil)
			switch {
			case err != nil:
				errs <- fmt.Sprintf("call %d: %v", i, err)
			case r.err != nil:
				errs <- fmt.Sprintf("call %d: %s", i, r)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	var failed []string
	for e := range errs {
		failed = append(failed, e)
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		t.Errorf("%d of %d concurrent calls failed, want none; first: %s", len(failed), calls, strings.Join(failed[:min(len(failed), 5)], "; "))
	}
	t.Logf("%d calls of %s with at most 2 streams: %s", calls, sleep, took)
	if min := calls / 2 * sleep * 4 / 5; took < min {
		t.Errorf("%d calls of %s took %s, less than the %s 2 streams at a time need: the server did not limit its streams", calls, sleep, took, min)
	}
}

// testCompression calls a server that compresses its responses with
// gzip: every call must succeed.
func testCompression(t *testing.T, _ *backend, b *bridgeProc) {
	r, err := b.call(t.Context(), svc+"Echo", json.RawMessage(`{"fString": "small"}`), nil)
	if err != nil || r.err != nil || !sameJSON(t, r.result, []byte(`{"fString": "small"}`)) {
		t.Errorf("Echo of a small message from a server compressing with gzip: got %s (%v), want it back", r, err)
	}
	big := strings.Repeat("compressible ", 20<<10)
	r, err = b.call(t.Context(), svc+"Echo", map[string]any{"fString": big}, nil)
	if err != nil || r.err != nil {
		t.Errorf("Echo of 260 KB from a server compressing with gzip: got %s (%v), want it back", r, err)
	} else {
		var res struct{ FString string }
		if json.Unmarshal(r.result, &res); res.FString != big {
			t.Errorf("Echo of 260 KB: got %d bytes back, not the same", len(res.FString))
		}
	}
	r, err = b.call(t.Context(), svc+"Count", map[string]any{"key": "gzip"}, nil)
	if err != nil || r.err != nil {
		t.Errorf("Count from a server compressing with gzip: got %s (%v), want a result", r, err)
	}
	r, err = b.call(t.Context(), svc+"Fail", map[string]any{"code": 5, "message": "nope", "details": []string{"error_info"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkStatus(t, r, 5, "nope", `[{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TEST", "domain": "test.v1"}]`)
	r, err = b.call(t.Context(), svc+"ServerStream", map[string]any{"count": 2}, nil)
	if err != nil || r.err != nil || !sameJSON(t, r.result, []byte(`[{"seq":1},{"seq":2}]`)) {
		t.Errorf("ServerStream from a server compressing with gzip: got %s (%v), want 2 messages", r, err)
	}
}

// load is callers calling the bridge in a loop, recording every outcome.
type load struct {
	b       *bridgeProc
	callers []*caller
	stop    chan struct{}
	wg      sync.WaitGroup
	epoch   atomic.Int64 // advanced by the test at each event (restart)
}

// caller is one goroutine of a load: Count on its own key, in a loop.
type caller struct {
	key      string
	outcomes []outcome
	mu       sync.Mutex
	okEpoch  atomic.Int64 // the latest epoch in which a call of it succeeded, +1
}

type outcome struct {
	epoch int64
	value int64  // the count, for a result
	code  int    // the error code, 0 for a result
	fail  string // a transport or envelope failure
	msg   string // the error's message
	peer  string // the connection it came on, as the server saw it
}

// maxCallsPerCaller bounds every load loop.
const maxCallsPerCaller = 20000

// startLoad starts n callers of Count (or of method with params, when not
// empty) on b, each pausing pause between calls.
func startLoad(t *testing.T, b *bridgeProc, name string, n int, pause time.Duration) *load {
	l := &load{b: b, stop: make(chan struct{})}
	for i := range n {
		c := &caller{key: fmt.Sprintf("%s-%d-%d", name, i, time.Now().UnixNano())}
		l.callers = append(l.callers, c)
		l.wg.Go(func() {
			for range maxCallsPerCaller {
				select {
				case <-l.stop:
					return
				default:
				}
				epoch := l.epoch.Load()
				o := outcome{epoch: epoch}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				r, err := b.call(ctx, svc+"Count", map[string]any{"key": c.key}, nil)
				cancel()
				switch {
				case err != nil:
					o.fail = err.Error()
				case r.err != nil:
					o.code, o.msg = r.err.Code, r.err.Message
				default:
					o.peer = r.header.Get(peerHeader)
					if o.value, err = count(r); err != nil {
						o.fail = err.Error()
					} else {
						c.okEpoch.Store(epoch + 1)
					}
				}
				c.mu.Lock()
				c.outcomes = append(c.outcomes, o)
				c.mu.Unlock()
				time.Sleep(pause) // the load's pace: a rate, not a wait for anything
			}
		})
	}
	t.Cleanup(l.end)
	return l
}

// peers is the number of connections the load's results came on.
func (l *load) peers() int {
	seen := map[string]bool{}
	for _, c := range l.callers {
		c.mu.Lock()
		for _, o := range c.outcomes {
			if o.peer != "" {
				seen[o.peer] = true
			}
		}
		c.mu.Unlock()
	}
	return len(seen)
}

func (l *load) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// waitSuccess waits until every caller has had a call succeed since the
// current epoch began.
func (l *load) waitSuccess(t *testing.T, what string, limit time.Duration) time.Duration {
	t.Helper()
	epoch := l.epoch.Load()
	return await.Until(t, limit, what+": every caller's call succeeding", func() bool {
		for _, c := range l.callers {
			if c.okEpoch.Load() <= epoch {
				return false
			}
		}
		return true
	})
}

// waitCalls waits until every caller has finished n more calls than now,
// succeeded or not: the last of them began after the call, so the load has
// run past whatever the test did before it.
func (l *load) waitCalls(t *testing.T, what string, n int) {
	t.Helper()
	done := make([]int, len(l.callers))
	for i, c := range l.callers {
		c.mu.Lock()
		done[i] = len(c.outcomes)
		c.mu.Unlock()
	}
	await.Until(t, 30*time.Second, fmt.Sprintf("%s: %d more calls of every caller", what, n), func() bool {
		for i, c := range l.callers {
			c.mu.Lock()
			behind := len(c.outcomes) < done[i]+n
			c.mu.Unlock()
			if behind {
				return false
			}
		}
		return true
	})
}

// check ends the load and checks its accounting: every call got exactly
// one reply (a result, or an error with one of the allowed codes), and
// the counts each caller saw are those of a server that ran each call at
// most once: consecutive results of one server process rise by one, or
// by at most one more per failed call between them; they start again
// (fall) only across a restart, at most restarts times. It returns the
// number of results and of errors.
func (l *load) check(t *testing.T, allowed func(outcome) bool, restarts int) (results, errs int) {
	t.Helper()
	l.end()
	byCode := map[string]int{}
	for _, c := range l.callers {
		c.mu.Lock()
		outs := c.outcomes
		c.mu.Unlock()
		var last int64 // the previous result, 0 before the first
		lastEpoch := int64(-1)
		failedSince := 0
		falls := 0
		for i, o := range outs {
			switch {
			case o.fail != "":
				errs++
				byCode["no reply: "+o.fail]++
				failedSince++
				continue
			case o.code != 0:
				errs++
				failedSince++
				if allowed == nil || !allowed(o) {
					byCode[fmt.Sprintf("code %d %q (epoch %d)", o.code, o.msg, o.epoch)]++
				}
				continue
			}
			results++
			switch {
			case o.value >= last+1 && o.value <= last+1+int64(failedSince):
			case o.value < last+1 && falls < restarts && o.epoch > int64(falls) && o.value <= 1+int64(failedSince):
				falls++ // a new server process (the falls-th restart or later): its count starts again
			default:
				t.Errorf("caller %s, call %d: count %d after %d with %d failed calls between (epoch %d, previous %d): a call ran twice or was lost",
					c.key, i, o.value, last, failedSince, o.epoch, lastEpoch)
			}
			last, lastEpoch, failedSince = o.value, o.epoch, 0
		}
		// the server's count is the last result, or more by the failed
		// calls after it
		r := l.b.mustResult(t, svc+"Peek", map[string]any{"key": c.key}, nil)
		n, err := count(r)
		if err != nil || n < last || n > last+int64(failedSince) {
			t.Errorf("caller %s: the server counts %d (%v), want %d to %d", c.key, n, err, last, last+int64(failedSince))
		}
	}
	if len(byCode) > 0 {
		var lines []string
		for k, n := range byCode {
			lines = append(lines, fmt.Sprintf("%d × %s", n, k))
		}
		sort.Strings(lines)
		t.Errorf("calls that failed, other than as allowed:\n%s", strings.Join(lines, "\n"))
	}
	return results, errs
}

// testLongCalls calls the server for 3 seconds, with 4 callers of Count
// and one of Sleep 700ms, longer than the connection age of the
// max-connection-age test (500ms, with 3s of grace) and than the interval
// of the server's keepalive pings: every call succeeds. It returns how
// many connections the calls came on.
func testLongCalls(t *testing.T, b *bridgeProc) int {
	l := startLoad(t, b, "age", 4, 5*time.Millisecond)
	var slowErrs []string
	var slow int
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		r, err := b.call(t.Context(), svc+"Sleep", map[string]any{"duration": "0.7s"}, nil)
		slow++
		if err != nil {
			slowErrs = append(slowErrs, err.Error())
		} else if r.err != nil {
			slowErrs = append(slowErrs, r.String())
		}
	}
	if len(slowErrs) > 0 {
		t.Errorf("%d of %d calls of 700ms failed: %s", len(slowErrs), slow, slowErrs[0])
	}
	results, errs := l.check(t, nil, 0)
	peers := l.peers()
	t.Logf("%d results, %d errors, %d slow calls, on %d connections", results, errs, slow, peers)
	if results == 0 {
		t.Error("no call succeeded")
	}
	return peers
}

// testRestart restarts the server under load, gracefully (SIGTERM) then
// abruptly (SIGKILL), on the same port: every call gets exactly one reply;
// the only errors are code 14 while the server is away and, during the
// graceful stop, code 1 from the server for calls it had received but not
// started (grpcio cancels those); no call runs twice; calls succeed again
// after each restart.
func testRestart(t *testing.T, be *backend, b *bridgeProc) {
	l := startLoad(t, b, "restart", 8, 2*time.Millisecond)
	l.waitSuccess(t, "before the restarts", 10*time.Second)
	const termEpoch = 1 // the epoch of SIGTERM and the restart after it; calls in flight at SIGTERM began in epoch 0
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		l.waitCalls(t, "steady before "+sig.String(), 10)
		l.epoch.Add(1)
		be.stop(t, sig)
		l.waitCalls(t, "the server down after "+sig.String(), 2)
		be.restart(t)
		took := l.waitSuccess(t, fmt.Sprintf("after the restart that followed %v", sig), 15*time.Second)
		t.Logf("after %v and a restart, every caller succeeded again within %s", sig, took)
	}
	l.waitCalls(t, "steady after the restarts", 10)
	results, errs := l.check(t, func(o outcome) bool {
		return o.code == 14 || (o.code == 1 && o.epoch <= termEpoch && be.kind.name == pythonKind.name)
	}, 2)
	t.Logf("%d results, %d errors", results, errs)
}
