package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
)

// The package's tests of identities, selectors of methods, credentials
// and refusal reasons: what Authenticate and Allows decide for one
// request. What the bridge answers on the wire (401 and 400 replies, the
// challenges, the metrics) is tested through the bridge, in package
// bridge's auth_test.go and jwt_test.go.

// digest is the form Identity.Tokens takes of token.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

const (
	adminToken   = "admin-token-0123456789"
	greeterToken = "greeter-token-0123456789"
)

// testIdentities are a caller that may call anything, one of a service,
// one of some methods, one that may call nothing and two by certificate.
func testIdentities() []Identity {
	return []Identity{
		{Name: "admin", Tokens: []string{digest(adminToken)}, Allow: []string{"*"}},
		{Name: "greeter", Tokens: []string{digest(greeterToken)}, Allow: []string{"helloworld.*"}},
		{Name: "reader", Tokens: []string{digest("reader-token-0123456789")}, Allow: []string{"*.Peek", "*.Say*", "test.v1.TestService.Echo"}},
		{Name: "nobody", Tokens: []string{digest("nobody-token-0123456789")}},
		{Name: "cert-svc", ClientCerts: []string{"cn:svc.example"}, Allow: []string{"test.v1.TestService.*"}},
		{Name: "spiffe-svc", ClientCerts: []string{"uri:spiffe://example.org/greeter"}, Allow: []string{"helloworld.*"}},
	}
}

func newTestAuth(t *testing.T) *Auth {
	t.Helper()
	a, err := New(testIdentities())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestNewRefuses: identities New refuses, each with ErrConfig (moved
// from package bridge's TestNewAuthRefuses, which called it as
// bridge.NewAuth).
func TestNewRefuses(t *testing.T) {
	good := digest("t")
	tests := []struct {
		name string
		ids  []Identity
	}{
		{"no name", []Identity{{Tokens: []string{good}}}},
		{"duplicate name", []Identity{{Name: "a"}, {Name: "a"}}},
		{"plain token", []Identity{{Name: "a", Tokens: []string{"secret"}}}},
		{"short digest", []Identity{{Name: "a", Tokens: []string{"sha256:abcd"}}}},
		{"not hex", []Identity{{Name: "a", Tokens: []string{"sha256:" + strings.Repeat("z", 64)}}}},
		{"shared token", []Identity{{Name: "a", Tokens: []string{good}}, {Name: "b", Tokens: []string{good}}}},
		{"bad certificate kind", []Identity{{Name: "a", ClientCerts: []string{"subject:x"}}}},
		{"shared certificate", []Identity{{Name: "a", ClientCerts: []string{"cn:x"}}, {Name: "b", ClientCerts: []string{"cn:x"}}}},
		{"empty pattern", []Identity{{Name: "a", Allow: []string{""}}}},
		{"the reserved name", []Identity{{Name: Unmatched}}},
		{"a selector of no provider's issuer", []Identity{{Name: "a", JWT: &Selector{Issuer: "https://nobody.example"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.ids); !errors.Is(err, ErrConfig) {
				t.Errorf("got %v, want ErrConfig", err)
			}
		})
	}
}

// request is a POST with the given header lines.
func request(h ...string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	for i := 0; i+1 < len(h); i += 2 {
		r.Header.Add(h[i], h[i+1])
	}
	return r
}

// wsOffer is the subprotocol that carries token on a WebSocket upgrade.
func wsOffer(token string) string {
	return WSTokenProtocol + base64.RawURLEncoding.EncodeToString([]byte(token))
}

// TestAuthenticateCredentials: which identity each credential
// authenticates as, or why none.
func TestAuthenticateCredentials(t *testing.T) {
	a := newTestAuth(t)
	tests := []struct {
		name    string
		r       *http.Request
		caller  string // "" when refused
		failure Failure
	}{
		{"no credentials", request(), "", Missing},
		{"bearer token", request("Authorization", "Bearer "+adminToken), "admin", OK},
		{"scheme in any case", request("Authorization", "bEaReR "+greeterToken), "greeter", OK},
		{"spaces around", request("Authorization", "  Bearer   "+greeterToken+" "), "greeter", OK},
		{"API key", request("X-API-Key", greeterToken), "greeter", OK},
		{"unknown token", request("Authorization", "Bearer not-a-known-token"), "", Invalid},
		{"another scheme", request("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("a:b"))), "", Missing},
		{"empty bearer", request("Authorization", "Bearer "), "", Malformed},
		{"empty API key", request("X-API-Key", ""), "", Malformed},
		{"two credentials", request("Authorization", "Bearer "+adminToken, "X-API-Key", greeterToken), "", Malformed},
		{"two Authorization headers", request("Authorization", "Bearer "+adminToken, "Authorization", "Bearer "+adminToken), "", Malformed},
		{"not a b64token", request("Authorization", "Bearer a{b}"), "", badToken},
		{"only padding", request("X-API-Key", "=="), "", badToken},
		{"over 8 KiB", request("Authorization", "Bearer "+strings.Repeat("a", idp.MaxTokenBytes+1)), "", TooLarge},
		{"WebSocket subprotocol", request("Sec-WebSocket-Protocol", "jsonrpc, "+wsOffer(greeterToken)), "greeter", OK},
		{"two subprotocol tokens", request("Sec-WebSocket-Protocol", wsOffer(greeterToken)+", "+wsOffer(adminToken)), "", Malformed},
		{"subprotocol not base64url", request("Sec-WebSocket-Protocol", WSTokenProtocol+"***"), "", Malformed},
		{"empty subprotocol token", request("Sec-WebSocket-Protocol", WSTokenProtocol), "", Malformed},
		{"subprotocol token not a b64token", request("Sec-WebSocket-Protocol", wsOffer("a b")), "", badToken},
		{"subprotocol over 8 KiB", request("Sec-WebSocket-Protocol", wsOffer(strings.Repeat("a", idp.MaxTokenBytes+1))), "", TooLarge},
		{"a header decides alone", request("Authorization", "Bearer "+greeterToken, "Sec-WebSocket-Protocol", WSTokenProtocol+"***"), "greeter", OK},
		{"JWT-shaped without providers", request("Authorization", "Bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln"), "", Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f := a.Authenticate(tt.r)
			if f != tt.failure {
				t.Fatalf("failure %d (%s), want %d (%s)", f, f.Reason(), tt.failure, tt.failure.Reason())
			}
			if tt.caller == "" {
				if c != nil {
					t.Errorf("caller %s, want none", c.Name())
				}
				return
			}
			if c == nil || c.Name() != tt.caller {
				t.Fatalf("caller %v, want %s", c, tt.caller)
			}
			if c.Principal() != tt.caller || !c.Expires().IsZero() || c.Metadata() != nil {
				t.Errorf("a static credential's caller: principal %q, expires %v, metadata %v; want its name, zero, none", c.Principal(), c.Expires(), c.Metadata())
			}
		})
	}
}

// TestAllows: the method patterns of each identity, where * matches any
// run of characters, dots included.
func TestAllows(t *testing.T) {
	a := newTestAuth(t)
	methods := []string{
		"helloworld.Greeter.SayHello", "test.v1.TestService.Echo", "test.v1.TestService.Peek",
		"test.v1.TestService.Fail", "test.v1.TestService.Count", "demo.v1.Notes.Say", "rpc.ops.Ops.Sayonara",
	}
	want := map[string][]string{
		"admin":   methods,
		"greeter": {"helloworld.Greeter.SayHello"},
		"reader":  {"helloworld.Greeter.SayHello", "test.v1.TestService.Echo", "test.v1.TestService.Peek", "demo.v1.Notes.Say", "rpc.ops.Ops.Sayonara"},
		"nobody":  nil,
	}
	tokens := map[string]string{"admin": adminToken, "greeter": greeterToken, "reader": "reader-token-0123456789", "nobody": "nobody-token-0123456789"}
	for name, token := range tokens {
		c, f := a.Authenticate(request("Authorization", "Bearer "+token))
		if f != OK {
			t.Fatalf("%s: %s", name, f.Reason())
		}
		for _, m := range methods {
			allowed := false
			for _, w := range want[name] {
				allowed = allowed || w == m
			}
			if got := c.Allows(m); got != allowed {
				t.Errorf("%s may call %s: %v, want %v", name, m, got, allowed)
			}
		}
	}
	var off *Caller // authentication off
	if !off.Allows("anything.At.All") {
		t.Error("a nil caller (authentication off) may not call, want it may call anything")
	}
	for _, tt := range []struct {
		pattern, name string
		want          bool
	}{
		{"a.b.C", "a.b.C", true},
		{"a.b.C", "a.b.CD", false},
		{"a.*", "a.b.C", true},
		{"a.*", "a.", true},
		{"a.*", "b.a.C", false},
		{"*.Get*", "x.y.GetThing", true},
		{"*.Get*", "x.y.Set", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "a--b--c", true},
		{"a*b*c", "a--c--b", false},
		{"ab*ba", "aba", false}, // prefix and suffix may not overlap
		{"*", "", true},
	} {
		if got := compilePattern(tt.pattern).match(tt.name); got != tt.want {
			t.Errorf("%q matches %q: %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// certificate is a verified chain's leaf with common name cn and, if not
// empty, a URI alternative name (its signature is not checked here:
// Authenticate takes the chains crypto/tls verified).
func certificate(t *testing.T, cn, uri string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	if uri != "" {
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientCertificateIdentities: a verified client certificate
// authenticates by its common name or alternative names; a token, when
// sent, decides alone.
func TestClientCertificateIdentities(t *testing.T) {
	a := newTestAuth(t)
	withCert := func(c *x509.Certificate, h ...string) *http.Request {
		r := request(h...)
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}
		return r
	}
	svc, spiffe, stranger := certificate(t, "svc.example", ""), certificate(t, "", "spiffe://example.org/greeter"), certificate(t, "stranger.example", "spiffe://example.org/other")
	tests := []struct {
		name    string
		r       *http.Request
		caller  string
		failure Failure
	}{
		{"by common name", withCert(svc), "cert-svc", OK},
		{"by URI", withCert(spiffe), "spiffe-svc", OK},
		{"an unknown certificate", withCert(stranger), "", Invalid},
		{"a good token beside it", withCert(stranger, "Authorization", "Bearer "+greeterToken), "greeter", OK},
		{"a wrong token beside a good one", withCert(svc, "Authorization", "Bearer wrong-token"), "", Invalid},
		{"TLS without a verified chain", func() *http.Request { r := request(); r.TLS = &tls.ConnectionState{}; return r }(), "", Missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f := a.Authenticate(tt.r)
			if f != tt.failure {
				t.Fatalf("failure %s, want %s", f.Reason(), tt.failure.Reason())
			}
			if got := ""; c != nil {
				got = c.Name()
				if got != tt.caller {
					t.Errorf("caller %s, want %s", got, tt.caller)
				}
			} else if tt.caller != "" {
				t.Errorf("no caller, want %s", tt.caller)
			}
		})
	}
}

// TestFailureWords: each refusal's label, client message, RFC 6750 error
// code and status class.
func TestFailureWords(t *testing.T) {
	for _, tt := range []struct {
		f          Failure
		reason     string
		challenge  string
		badRequest bool
	}{
		{Missing, "missing", "", false},
		{Invalid, "invalid", "invalid_token", false},
		{Malformed, "malformed", "invalid_request", true},
		{badToken, "malformed", "invalid_token", false},
		{TooLarge, "too_large", "invalid_token", false},
		{KeysNotLoaded, "keys_not_loaded", "invalid_token", false},
		{tokenFailure(idp.Expired), "expired", "invalid_token", false},
	} {
		if got := tt.f.Reason(); got != tt.reason {
			t.Errorf("%d: Reason %q, want %q", tt.f, got, tt.reason)
		}
		if got := tt.f.Challenge(); got != tt.challenge {
			t.Errorf("%s: Challenge %q, want %q", tt.reason, got, tt.challenge)
		}
		if got := tt.f.BadRequest(); got != tt.badRequest {
			t.Errorf("%s: BadRequest %v, want %v", tt.reason, got, tt.badRequest)
		}
		if m := tt.f.Message(); m == "" || strings.ContainsAny(m, "\"\\") {
			t.Errorf("%s: Message %q, want plain words fit for an error_description", tt.reason, m)
		}
	}
	if got := tokenFailure(idp.Expired).Message(); got != idp.Expired.Description() {
		t.Errorf("an expired token's message %q, want idp's %q", got, idp.Expired.Description())
	}
}

// TestReload: a reload swaps the identities, keeps the index of a name
// it keeps, and leaves the identities there were when it refuses.
func TestReload(t *testing.T) {
	a := newTestAuth(t)
	c, _ := a.Authenticate(request("Authorization", "Bearer "+greeterToken))
	index := c.Index()
	n := a.Len()
	if err := a.Reload([]Identity{
		{Name: "newcomer", Tokens: []string{digest(adminToken)}},
		{Name: "greeter", Tokens: []string{digest(greeterToken)}, Allow: []string{"*"}},
	}); err != nil {
		t.Fatal(err)
	}
	c, f := a.Authenticate(request("Authorization", "Bearer "+greeterToken))
	if f != OK || c.Index() != index || !c.Allows("test.v1.TestService.Echo") {
		t.Errorf("greeter after the reload: %s, index %d (was %d), may call Echo %v; want the same index and the new patterns", f.Reason(), c.Index(), index, c.Allows("test.v1.TestService.Echo"))
	}
	if c, _ := a.Authenticate(request("Authorization", "Bearer "+adminToken)); c == nil || c.Name() != "newcomer" || c.Index() != n {
		t.Errorf("the admin token after the reload: %v, want newcomer with the next index %d", c, n)
	}
	if err := a.Reload([]Identity{{Name: "a"}, {Name: "a"}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("a bad reload: %v, want ErrConfig", err)
	}
	if c, _ := a.Authenticate(request("Authorization", "Bearer "+adminToken)); c == nil || c.Name() != "newcomer" {
		t.Errorf("after a refused reload: %v, want the identities there were", c)
	}
}
