package bridge_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
)

// recorder is a gRPC interceptor that counts the calls reaching the
// backend and keeps the metadata of each.
type recorder struct {
	mu    sync.Mutex
	calls []seen
}

type seen struct {
	method string // "helloworld.Greeter.SayHello"
	md     metadata.MD
}

func (rec *recorder) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if !strings.HasPrefix(info.FullMethod, "/grpc.reflection.") {
		md, _ := metadata.FromIncomingContext(ctx)
		rec.mu.Lock()
		rec.calls = append(rec.calls, seen{method: strings.ReplaceAll(strings.TrimPrefix(info.FullMethod, "/"), "/", "."), md: md})
		rec.mu.Unlock()
	}
	return next(ctx, req)
}

// take returns the calls seen since the last take.
func (rec *recorder) take() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.calls
	rec.calls = nil
	return out
}

// recording makes the backend of newEnv record every call in rec.
func recording(rec *recorder) envOption {
	return withServer(grpc.ChainUnaryInterceptor(rec.intercept))
}

// unaryMethods are the unary methods of the two services of the matrix,
// each with params that succeed.
var unaryMethods = []struct{ name, params string }{
	{"helloworld.Greeter.SayHello", `{"name":"m"}`},
	{"test.v1.TestService.Echo", `{"f_string":"x"}`},
	{"test.v1.TestService.Fail", `{}`},
	{"test.v1.TestService.Sleep", `{}`},
	{"test.v1.TestService.Count", `{"key":"matrix"}`},
	{"test.v1.TestService.Peek", `{"key":"matrix"}`},
	{"test.v1.TestService.Old", `{}`},
}

type caller struct {
	name, token string
	allow       []string
	may         func(method string) bool
}

var callers = []caller{
	{"admin", "admin-token-0123456789", []string{"*"}, func(string) bool { return true }},
	{"greeter", "greeter-token-0123456789", []string{"helloworld.*"},
		func(m string) bool { return strings.HasPrefix(m, "helloworld.") }},
	{"reader", "reader-token-0123456789", []string{"*.Peek", "*.Say*", "test.v1.TestService.Echo"},
		func(m string) bool {
			return slices.Contains([]string{"test.v1.TestService.Peek", "helloworld.Greeter.SayHello", "test.v1.TestService.Echo"}, m)
		}},
	{"nobody", "nobody-token-0123456789", nil, func(string) bool { return false }},
}

func newAuth(t testing.TB, extra ...bridge.Identity) *bridge.Auth {
	t.Helper()
	var ids []bridge.Identity
	for _, c := range callers {
		ids = append(ids, bridge.Identity{Name: c.name, Tokens: []string{hashToken(c.token)}, Allow: c.allow})
	}
	a, err := bridge.NewAuth(append(ids, extra...))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// postAs posts body with the given headers and returns the response and
// its body.
func postAs(t testing.TB, url string, header http.Header, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// errStatus returns the code and data.status of a reply's error, 0 and ""
// for a result.
func errStatus(t testing.TB, r map[string]any) (int64, string) {
	t.Helper()
	e, ok := r["error"].(map[string]any)
	if !ok {
		return 0, ""
	}
	d, _ := e["data"].(map[string]any)
	st, _ := d["status"].(string)
	return errCode(t, r), st
}

// TestAuthorizationMatrix has every identity call every method of a
// two-service backend, singly and in one batch, and checks that exactly
// the allowed calls reach the backend, carrying the caller's identity.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	rec := new(recorder)
	e := newEnv(t, bridge.Options{Auth: newAuth(t)}, recording(rec))
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			rec.take()
			want := map[string]int{}
			var batch []string
			for i, m := range unaryMethods {
				req := fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":%s,"id":%d}`, m.name, m.params, i)
				batch = append(batch, req)
				resp, body := postAs(t, e.url, bearer(c.token), req)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: got HTTP %d %s, want 200", m.name, resp.StatusCode, body)
				}
				obj := decode(t, body).(map[string]any)
				checkEnvelope(t, obj)
				checkAllowed(t, c, m.name, obj)
				if c.may(m.name) {
					want[m.name] += 2 // once alone, once in the batch
				}
			}
			resp, body := postAs(t, e.url, bearer(c.token), "["+strings.Join(batch, ",")+"]")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("batch: got HTTP %d %s, want 200", resp.StatusCode, body)
			}
			replies, ok := decode(t, body).([]any)
			if !ok || len(replies) != len(unaryMethods) {
				t.Fatalf("batch: got %s, want %d replies", body, len(unaryMethods))
			}
			for _, r := range replies {
				obj := r.(map[string]any)
				checkEnvelope(t, obj)
				id, _ := obj["id"].(json.Number).Int64()
				checkAllowed(t, c, unaryMethods[id].name, obj)
			}

			got := map[string]int{}
			for _, call := range rec.take() {
				got[call.method]++
				if ids := call.md.Get(bridge.DefaultIdentityMetadataKey); len(ids) != 1 || ids[0] != c.name {
					t.Errorf("%s reached the backend with identity %v, want [%s]", call.method, ids, c.name)
				}
			}
			for _, m := range unaryMethods {
				if got[m.name] != want[m.name] {
					t.Errorf("%s reached the backend %d times, want %d", m.name, got[m.name], want[m.name])
				}
			}
		})
	}
}

func checkAllowed(t *testing.T, c caller, method string, reply map[string]any) {
	t.Helper()
	code, st := errStatus(t, reply)
	switch {
	case c.may(method) && code != 0:
		t.Errorf("%s calling %s: got error %v, want a result", c.name, method, reply["error"])
	case !c.may(method) && (code != 7 || st != "PERMISSION_DENIED"):
		t.Errorf("%s calling %s: got %v, want error 7 PERMISSION_DENIED", c.name, method, reply)
	}
}

// A name that matches no method is refused like a real one, unless the
// caller's patterns allow it: a refusal tells nothing of what exists.
func TestAuthorizationUnknownMethod(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Auth: newAuth(t)})
	for _, tt := range []struct {
		name, token, method string
		want                int64
	}{
		{"allowed unknown", "admin-token-0123456789", "test.v1.TestService.Nope", -32601},
		{"refused unknown", "reader-token-0123456789", "test.v1.TestService.Nope", 7},
		{"refused known", "reader-token-0123456789", "test.v1.TestService.Fail", 7},
		{"refused streaming", "greeter-token-0123456789", "test.v1.TestService.ServerStream", 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := postAs(t, e.url, bearer(tt.token), `{"jsonrpc":"2.0","method":"`+tt.method+`","id":1}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got HTTP %d, want 200", resp.StatusCode)
			}
			if got := errCode(t, decode(t, body).(map[string]any)); got != tt.want {
				t.Errorf("got %s, want code %d", body, tt.want)
			}
		})
	}
}

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	rec := new(recorder)
	e := newEnv(t, bridge.Options{Auth: newAuth(t)}, recording(rec))
	hello := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`
	// RFC 6750 section 3.1: no error code for a request without a
	// credential of the scheme (none, or Basic); invalid_request and 400
	// for a malformed request (two credentials, an empty one);
	// invalid_token and 401 for a token that is malformed or unknown.
	tests := []struct {
		name       string
		header     http.Header
		wantError  string // the error parameter of the challenge, "" for none
		wantStatus int
	}{
		{"no credentials", nil, "", 401},
		{"wrong token", bearer("not-a-known-token"), "invalid_token", 401},
		{"wrong api key", http.Header{"X-Api-Key": {"not-a-known-token"}}, "invalid_token", 401},
		{"basic scheme", http.Header{"Authorization": {"Basic YWRtaW46YWRtaW4="}}, "", 401},
		{"digest scheme", http.Header{"Authorization": {`Digest username="admin", realm="x"`}}, "", 401},
		{"a scheme alone", http.Header{"Authorization": {"admin-token-0123456789"}}, "", 401},
		{"bearer without token", http.Header{"Authorization": {"Bearer"}}, "invalid_request", 400},
		{"bearer with empty token", http.Header{"Authorization": {"Bearer "}}, "invalid_request", 400},
		{"empty api key", http.Header{"X-Api-Key": {""}}, "invalid_request", 400},
		{"token with a space", http.Header{"Authorization": {"Bearer admin-token-0123456789 x"}}, "invalid_token", 401},
		{"token with a quote", http.Header{"Authorization": {`Bearer "admin-token-0123456789"`}}, "invalid_token", 401},
		{"api key with a comma", http.Header{"X-Api-Key": {"admin-token-0123456789,x"}}, "invalid_token", 401},
		{"two authorization headers", http.Header{"Authorization": {"Bearer admin-token-0123456789", "Bearer admin-token-0123456789"}}, "invalid_request", 400},
		{"token and api key", http.Header{"Authorization": {"Bearer admin-token-0123456789"}, "X-Api-Key": {"admin-token-0123456789"}}, "invalid_request", 400},
		{"good token with a typo", bearer("admin-token-012345678"), "invalid_token", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := postAs(t, e.url, tt.header, hello)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got HTTP %d %s, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			ch := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, `Bearer realm="grpc-jsonrpc-bridge"`) {
				t.Errorf("got WWW-Authenticate %q, want a Bearer challenge", ch)
			}
			if tt.wantError != "" && !strings.Contains(ch, `error="`+tt.wantError+`"`) || tt.wantError == "" && strings.Contains(ch, "error=") {
				t.Errorf("got WWW-Authenticate %q, want error %q", ch, tt.wantError)
			}
			obj := decode(t, body).(map[string]any)
			checkEnvelope(t, obj)
			if code, st := errStatus(t, obj); code != 16 || st != "UNAUTHENTICATED" || obj["id"] != nil {
				t.Errorf("got %s, want error 16 UNAUTHENTICATED with id null", body)
			}
		})
	}
	for _, path := range []string{"/openrpc.json", "/ws"} {
		req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: got HTTP %d, want 401", path, resp.StatusCode)
		}
	}
	if n := len(rec.take()); n != 0 {
		t.Errorf("%d calls reached the backend, want none", n)
	}
	// The API key header works like the bearer token.
	resp, body := postAs(t, e.url, http.Header{"X-Api-Key": {"greeter-token-0123456789"}}, hello)
	if resp.StatusCode != http.StatusOK || errCode(t, decode(t, body).(map[string]any)) != 0 {
		t.Errorf("X-API-Key: got HTTP %d %s, want a result", resp.StatusCode, body)
	}
	// "Bearer" 1*SP b64token (RFC 6750 section 2.1), the scheme in any
	// case (RFC 9110 section 11.1).
	for _, v := range []string{"Bearer  greeter-token-0123456789", "bearer greeter-token-0123456789", "BEARER   greeter-token-0123456789"} {
		resp, body := postAs(t, e.url, http.Header{"Authorization": {v}}, hello)
		if resp.StatusCode != http.StatusOK || errCode(t, decode(t, body).(map[string]any)) != 0 {
			t.Errorf("Authorization: %s: got HTTP %d %s, want a result", v, resp.StatusCode, body)
		}
	}
}

// documentMethods returns the method names an OpenRPC document lists.
func documentMethods(t *testing.T, doc any) []string {
	t.Helper()
	obj, ok := doc.(map[string]any)
	if !ok {
		t.Fatalf("document %v is not an object", doc)
	}
	var names []string
	ms, _ := obj["methods"].([]any)
	for _, m := range ms {
		names = append(names, m.(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	return names
}

// rpc.discover and GET /openrpc.json list only what the caller may call.
func TestDiscoveryPerIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Auth: newAuth(t)})
	all := map[string]bool{}
	for _, c := range callers {
		resp, body := postAs(t, e.url, bearer(c.token), `{"jsonrpc":"2.0","method":"rpc.discover","id":1}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: rpc.discover got HTTP %d", c.name, resp.StatusCode)
		}
		obj := decode(t, body).(map[string]any)
		got := documentMethods(t, obj["result"])

		req, _ := http.NewRequest(http.MethodGet, e.url+"/openrpc.json", nil)
		req.Header = bearer(c.token)
		r, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("%s: GET /openrpc.json got HTTP %d %s", c.name, r.StatusCode, doc)
		}
		if fromGet := documentMethods(t, decode(t, doc)); !slices.Equal(got, fromGet) {
			t.Errorf("%s: rpc.discover lists %v but /openrpc.json %v", c.name, got, fromGet)
		}
		for _, name := range got {
			all[name] = true
			if !c.may(name) {
				t.Errorf("%s: the document lists %s, which it may not call", c.name, name)
			}
		}
		for _, m := range unaryMethods {
			if c.may(m.name) && !slices.Contains(got, m.name) {
				t.Errorf("%s: the document lacks %s, which it may call", c.name, m.name)
			}
		}
		if c.name == "nobody" && len(got) != 0 {
			t.Errorf("nobody: got methods %v, want none", got)
		}
	}
	if len(all) < len(unaryMethods) {
		t.Errorf("admin sees only %v", all)
	}
}

// Client certificates, verified by the TLS layer, map to identities by
// subject common name or alternative name.
func TestClientCertificates(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "test CA")
	other := newCA(t, "other CA")
	auth := newAuth(t,
		bridge.Identity{Name: "cert-svc", ClientCerts: []string{"cn:svc.example"}, Allow: []string{"test.v1.TestService.*"}},
		bridge.Identity{Name: "spiffe-svc", ClientCerts: []string{"uri:spiffe://example.org/greeter"}, Allow: []string{"helloworld.*"}},
	)
	hs := newEnv(t, bridge.Options{Auth: auth}, onBufconn(), onTLS(&tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.pool})).hs

	client := func(cert *tls.Certificate) *http.Client {
		tr := hs.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			// Always send it, even when its issuer is not one the server
			// names as acceptable.
			tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
		}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	tests := []struct {
		name       string
		cert       *tls.Certificate
		header     http.Header
		method     string
		wantStatus int
		wantCode   int64
	}{
		{"cn allowed", ca.leaf(t, "svc.example", ""), nil, "test.v1.TestService.Peek", 200, 0},
		{"cn refused", ca.leaf(t, "svc.example", ""), nil, "helloworld.Greeter.SayHello", 200, 7},
		{"uri allowed", ca.leaf(t, "anything", "spiffe://example.org/greeter"), nil, "helloworld.Greeter.SayHello", 200, 0},
		{"uri refused", ca.leaf(t, "anything", "spiffe://example.org/greeter"), nil, "test.v1.TestService.Peek", 200, 7},
		{"unknown subject", ca.leaf(t, "stranger", ""), nil, "helloworld.Greeter.SayHello", 401, 16},
		{"no certificate", nil, nil, "helloworld.Greeter.SayHello", 401, 16},
		{"token wins over certificate", ca.leaf(t, "svc.example", ""), bearer("greeter-token-0123456789"), "helloworld.Greeter.SayHello", 200, 0},
		{"wrong token with a good certificate", ca.leaf(t, "svc.example", ""), bearer("nope"), "test.v1.TestService.Peek", 401, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(`{"jsonrpc":"2.0","method":"`+tt.method+`","params":{},"id":1}`))
			for k, v := range tt.header {
				req.Header[k] = v
			}
			resp, err := client(tt.cert).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got HTTP %d %s, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if got := errCode(t, decode(t, body).(map[string]any)); got != tt.wantCode {
				t.Errorf("got %s, want code %d", body, tt.wantCode)
			}
		})
	}
	t.Run("certificate of another CA", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(`{}`))
		resp, err := client(other.leaf(t, "svc.example", "")).Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("got HTTP %d, want the TLS handshake to fail", resp.StatusCode)
		}
	})
}

// ca is a throwaway certificate authority for mTLS tests.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &ca{cert: cert, key: key, pool: pool}
}

// leaf issues a client certificate with common name cn and, if not empty,
// a URI alternative name.
func (c *ca) leaf(t *testing.T, cn, uri string) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if uri != "" {
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestWebSocketTokenSubprotocol: a browser, which cannot send headers
// with a WebSocket, offers its token as a subprotocol
// (auth.WSTokenProtocol + base64url(token)) beside "jsonrpc", which the
// bridge selects; the token then authenticates the connection as the
// Authorization header would. A wrong or doubled token is 401, and a
// header, when sent, decides alone.
func TestWebSocketTokenSubprotocol(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Auth: newAuth(t)})
	proto := func(token string) string {
		return auth.WSTokenProtocol + base64.RawURLEncoding.EncodeToString([]byte(token))
	}
	dial := func(h http.Header, protocols ...string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		return websocket.Dial(ctx, e.url+"/ws", &websocket.DialOptions{Subprotocols: protocols, HTTPHeader: h})
	}
	t.Run("token", func(t *testing.T) {
		c, _, err := dial(nil, "jsonrpc", proto("greeter-token-0123456789"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if got := c.Subprotocol(); got != "jsonrpc" {
			t.Errorf("selected subprotocol %q, want jsonrpc", got)
		}
		w := &wsClient{t: t, c: c}
		w.send(req("helloworld.Greeter.SayHello", `{"name":"ws"}`, "1"))
		if r := w.read(); r["error"] != nil {
			t.Errorf("allowed call: %v", r["error"])
		}
		w.send(req("test.v1.TestService.Echo", `{}`, "2"))
		if code, st := errStatus(t, w.read()); code != 7 || st != "PERMISSION_DENIED" {
			t.Errorf("forbidden call: code %d %s, want 7 PERMISSION_DENIED", code, st)
		}
	})
	for _, tt := range []struct {
		name      string
		header    http.Header
		protocols []string
		status    int // 400 for a malformed request (invalid_request)
	}{
		{"wrong token", nil, []string{"jsonrpc", proto("not-a-token-of-anyone")}, 401},
		{"two tokens", nil, []string{"jsonrpc", proto("greeter-token-0123456789"), proto("reader-token-0123456789")}, 400},
		{"not base64url", nil, []string{"jsonrpc", auth.WSTokenProtocol + "a+b"}, 400},
		{"header decides", bearer("not-a-token-of-anyone"), []string{"jsonrpc", proto("greeter-token-0123456789")}, 401},
		{"no token", nil, []string{"jsonrpc"}, 401},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, resp, err := dial(tt.header, tt.protocols...)
			if err == nil {
				c.CloseNow()
				t.Fatal("the upgrade succeeded, want 401")
			}
			if resp == nil || resp.StatusCode != tt.status {
				t.Fatalf("got %v, %v; want HTTP %d", resp, err, tt.status)
			}
		})
	}
}
