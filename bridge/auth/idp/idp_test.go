package idp

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

func genKey(tb testing.TB, alg string) crypto.Signer {
	tb.Helper()
	var k crypto.Signer
	var err error
	switch alg[:2] {
	case "RS", "PS":
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES":
		k, err = ecdsa.GenerateKey(map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}[alg], rand.Reader)
	default:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func jwks(tb testing.TB, kid, alg string, pub crypto.PublicKey) []byte {
	tb.Helper()
	j, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.ALG(alg), USE: jwkset.UseSig}})
	if err != nil {
		tb.Fatal(err)
	}
	b, _ := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{j.Marshal()}})
	return b
}

// run runs p's fetch loop until the test ends.
func run(tb testing.TB, p *Provider) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
}

// TestFetchLimits: a key set over 1 MiB, a redirect to another host (or
// from https to http) and a provider slower than 5 s are failed fetches;
// a redirect within the host is followed; the discovery document must
// name the issuer.
func TestFetchLimits(t *testing.T) {
	t.Parallel()
	key := genKey(t, "ES256")
	set := jwks(t, "k", "ES256", key.Public())
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(set) }))
	t.Cleanup(other.Close)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Write([]byte(`{"keys":[],"pad":"`))
			w.Write([]byte(strings.Repeat("a", MaxKeySetBytes)))
			w.Write([]byte(`"}`))
		case "/elsewhere":
			http.Redirect(w, r, other.URL+"/jwks", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, "/jwks", http.StatusMovedPermanently)
		case "/jwks":
			w.Write(set)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(FetchTimeout + 5*time.Second):
			}
		case "/.well-known/openid-configuration":
			json.NewEncoder(w).Encode(map[string]string{"issuer": "https://impostor.example", "jwks_uri": srv.URL + "/jwks"})
		}
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name, url, want string
	}{
		{"over 1 MiB", srv.URL + "/big", "larger than 1048576 bytes"},
		{"to another host", srv.URL + "/elsewhere", "redirected to another host"},
		{"within the host", srv.URL + "/moved", ""},
		{"slower than 5 s", srv.URL + "/slow", "deadline exceeded"},
		{"discovery naming another issuer", "", "names the issuer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(Options{Issuer: srv.URL, Audiences: []string{"a"}, JWKSURL: tt.url})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = p.fetch(context.Background())
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want the keys", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error saying %q", err, tt.want)
			case tt.want != "" && p.Loaded():
				t.Errorf("keys loaded from a failed fetch")
			}
			if d := time.Since(start); d > FetchTimeout+2*time.Second {
				t.Errorf("the fetch took %s", d)
			}
		})
	}
}

// TestRefreshAndRetry: while no key set has loaded, fetches are retried
// within seconds; once loaded, every Refresh.
func TestRefreshAndRetry(t *testing.T) {
	t.Parallel()
	key := genKey(t, "EdDSA")
	var fetches, failing atomic.Int64
	failing.Store(1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if failing.Load() == 1 {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		w.Write(jwks(t, "k", "EdDSA", key.Public()))
	}))
	t.Cleanup(srv.Close)
	p, err := New(Options{Issuer: srv.URL, Audiences: []string{"a"}, JWKSURL: srv.URL + "/jwks", Refresh: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	await.Until(t, 10*time.Second, "a failed first fetch", func() bool { return p.Status().LastError != "" })
	if st := p.Status(); st.State != "loading" || !strings.Contains(st.LastError, "HTTP 502") {
		t.Errorf("status after a failed fetch: %+v", st)
	}
	failing.Store(0)
	await.Until(t, 10*time.Second, "the keys loaded on a retry", p.Loaded)
	n := fetches.Load()
	await.Until(t, 10*time.Second, "refreshes every 30 ms", func() bool { return fetches.Load() >= n+3 })
	if st := p.Status(); st.State != "ready" || st.KeyCount != 1 {
		t.Errorf("status once loaded: %+v", st)
	}
}

// TestKeySetPolicy: symmetric keys, RSA keys under 2048 bits and keys
// of unknown types are left out of a key set; a set with none left is an
// error; an HMAC or none algorithm is refused at New.
func TestKeySetPolicy(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ec := genKey(t, "ES256")
	smallJWK, _ := jwkset.NewJWKFromKey(&small.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "small"}})
	ecJWK, _ := jwkset.NewJWKFromKey(ec.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "ec"}})
	set, _ := json.Marshal(map[string]any{"keys": []any{
		map[string]any{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
		map[string]any{"kty": "OKP", "crv": "X448", "kid": "x448", "x": "AAAA"},
		smallJWK.Marshal(), ecJWK.Marshal(),
	}})
	p, err := New(Options{Issuer: "i", Audiences: []string{"a"}, JWKSURL: "https://idp.test/jwks"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.install(set, "test"); err != nil {
		t.Fatal(err)
	}
	if got := p.keys.Load(); got.n != 1 || got.prints["ec"] == "" || got.prints["hmac"] != "" || got.prints["small"] != "" {
		t.Errorf("kept %d keys %v, want only ec", got.n, got.prints)
	}
	if err := p.install([]byte(`{"keys":[{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}]}`), "test"); err == nil {
		t.Errorf("a key set of only a symmetric key loaded")
	}
	for _, alg := range []string{"HS256", "none", "RSA-OAEP"} {
		if _, err := New(Options{Issuer: "i", Audiences: []string{"a"}, JWKSURL: "https://idp.test/jwks", Algorithms: []string{alg}}); err == nil {
			t.Errorf("algorithm %s was accepted", alg)
		}
	}
	if _, err := New(Options{Issuer: "i", JWKSURL: "https://idp.test/jwks"}); err == nil {
		t.Errorf("a provider without audiences was accepted")
	}
}

// BenchmarkFirstVerification is the cost of verifying a token the cache
// does not hold: parsing it and checking its signature and claims, for
// each algorithm.
func BenchmarkFirstVerification(b *testing.B) {
	for _, alg := range Algorithms() {
		b.Run(alg, func(b *testing.B) {
			key := genKey(b, alg)
			p, err := New(Options{Issuer: "https://idp.test", Audiences: []string{"https://bridge.test/"}, JWKSURL: "https://idp.test/jwks"})
			if err != nil {
				b.Fatal(err)
			}
			if err := p.install(jwks(b, "k", alg, key.Public()), "bench"); err != nil {
				b.Fatal(err)
			}
			tok := jwt.NewWithClaims(jwt.GetSigningMethod(alg), jwt.MapClaims{"iss": "https://idp.test", "aud": "https://bridge.test/",
				"sub": "svc-billing", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "scope": "a b c"})
			tok.Header["kid"] = "k"
			s, err := tok.SignedString(key)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				t, r := Parse(s)
				if r != OK {
					b.Fatal(r.Description())
				}
				if _, r := p.Verify(ctx, t); r != OK {
					b.Fatal(r.Description())
				}
			}
		})
	}
}

// TestAudienceForms: an audience that is an http(s) URL matches the
// same URL as clients write it (RFC 3986 section 6.2: scheme and host
// without case, the default port, a trailing slash; the MCP
// specification asks servers to take upper-case schemes and hosts, and
// MCP clients that parse the resource as a URL send
// https://bridge.example.com/ for https://bridge.example.com), never
// another scheme, host, port or path; other audiences match exactly.
func TestAudienceForms(t *testing.T) {
	t.Parallel()
	key := genKey(t, "ES256")
	p, err := New(Options{Issuer: "https://idp.test", JWKSURL: "https://idp.test/jwks",
		Audiences: []string{"https://bridge.example.com", "https://api.example.com/mcp/", "billing-api", "urn:example:Bridge"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.install(jwks(t, "k", "ES256", key.Public()), "test"); err != nil {
		t.Fatal(err)
	}
	verify := func(aud any) Reason {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": "https://idp.test", "aud": aud,
			"sub": "s", "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = "k"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		pt, r := Parse(s)
		if r != OK {
			return r
		}
		_, r = p.Verify(context.Background(), pt)
		return r
	}
	for _, aud := range []any{"https://bridge.example.com", "https://bridge.example.com/", "HTTPS://Bridge.Example.COM/",
		"https://bridge.example.com:443", "https://api.example.com/mcp", "https://api.example.com:443/mcp/",
		"billing-api", "urn:example:Bridge", []any{"other", "https://bridge.example.com/"}} {
		if r := verify(aud); r != OK {
			t.Errorf("aud %v: %s, want it accepted", aud, r.Label())
		}
	}
	for _, aud := range []any{"http://bridge.example.com", "https://bridge.example.com:8443", "https://bridge.example.com/mcp",
		"https://bridge.example.com.evil.test", "https://evil.test/https://bridge.example.com", "https://api.example.com/MCP",
		"https://api.example.com/mcp?x=1", "https://api.example.com/mcp#f", "https://user@bridge.example.com/",
		"https://api.example.com/mcp//", "Billing-api", "billing-api/", "urn:example:bridge", []any{}, "", []any{"a", "b"}} {
		if r := verify(aud); r != WrongAudience {
			t.Errorf("aud %v: %s, want wrong_audience", aud, r.Label())
		}
	}
	if r := verify([]any{"https://bridge.example.com", 7}); r != WrongClaimType {
		t.Errorf("aud of a number: %s, want a claim of the wrong type", r.Label())
	}
}

// TestKeyRefOfTheVerifyingKey: a token's KeyRef names the key that
// verified it, even while key sets that put other material under its
// kid are installed meanwhile: a token of the key a refresh dropped must
// not pass for one of its successor (the cache keeps a token while
// HasKey holds).
func TestKeyRefOfTheVerifyingKey(t *testing.T) {
	t.Parallel()
	a, b := genKey(t, "ES256"), genKey(t, "ES256")
	setA, setB := jwks(t, "k", "ES256", a.Public()), jwks(t, "k", "ES256", b.Public())
	p, err := New(Options{Issuer: "https://idp.test", Audiences: []string{"aud"}, JWKSURL: "https://idp.test/jwks"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.install(setA, "a"); err != nil {
		t.Fatal(err)
	}
	printA := p.keys.Load().prints["k"]
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": "https://idp.test", "aud": "aud", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k"
	s, err := tok.SignedString(a)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // key sets of a and of b, in turn
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			set := setA
			if i%2 == 1 {
				set = setB
			}
			_ = p.install(set, "flip")
		}
	}()
	defer func() { close(stop); <-done }()
	for range 3000 {
		pt, r := Parse(s)
		if r != OK {
			t.Fatal(r.Label())
		}
		c, r := p.Verify(context.Background(), pt)
		if r == OK && c.Key.print != printA {
			t.Fatalf("a token of key a verified with a KeyRef of another key's material")
		}
	}
}
