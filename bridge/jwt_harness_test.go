package bridge_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// testAudience is the audience the bridges of these tests accept.
const testAudience = "https://bridge.test/"

// keyIssuer is an identity provider for the tests that need to sign
// tokens of their own making (the refused-token corpus): keys made here,
// published over real HTTP (OIDC discovery and a JWKS) by an
// httptest.Server, which counts its fetches and can be taken down. The
// tests of a real provider use oidc-provider (oidc_test.go).
type keyIssuer struct {
	url string
	srv *httptest.Server

	mu        sync.Mutex
	published []*testKey
	down      atomic.Bool  // answer 503
	fetches   atomic.Int64 // JWKS requests served (or refused while down)
}

// testKey is a signing key and what names it.
type testKey struct {
	kid    string
	alg    string
	priv   crypto.Signer
	method jwt.SigningMethod
}

func newKeyIssuer(t testing.TB) *keyIssuer {
	t.Helper()
	k := &keyIssuer{}
	k.srv = httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(k.srv.Close)
	k.url = k.srv.URL
	return k
}

func (k *keyIssuer) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		if k.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"issuer": k.url, "jwks_uri": k.url + "/jwks"})
	case "/jwks":
		k.fetches.Add(1)
		if k.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(k.jwks())
	default:
		http.NotFound(w, r)
	}
}

// jwks is the published key set.
func (k *keyIssuer) jwks() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	set := jwkset.JWKSMarshal{}
	for _, key := range k.published {
		set.Keys = append(set.Keys, publicJWK(key))
	}
	b, _ := json.Marshal(set)
	return b
}

func publicJWK(key *testKey) jwkset.JWKMarshal {
	j, err := jwkset.NewJWKFromKey(key.priv.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{
		KID: key.kid, ALG: jwkset.ALG(key.alg), USE: jwkset.UseSig}})
	if err != nil {
		panic(err)
	}
	return j.Marshal()
}

// newTestKey makes a key for alg (RS256, PS256, ES256, ES384, EdDSA, ...).
func newTestKey(t testing.TB, alg string) *testKey {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch alg[:2] {
	case "RS", "PS":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES":
		curve := map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}[alg]
		priv, err = ecdsa.GenerateKey(curve, rand.Reader)
	case "Ed":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: rand.Text(), alg: alg, priv: priv, method: jwt.GetSigningMethod(alg)}
}

// publish adds key to the key set; rotate replaces the key set.
func (k *keyIssuer) publish(keys ...*testKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.published = append(k.published, keys...)
}

func (k *keyIssuer) rotate(keys ...*testKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.published = keys
}

// claims are good claims of k for testAudience and sub, expiring in an
// hour; more are set over them (a nil value deletes a claim).
func (k *keyIssuer) claims(sub string, more jwt.MapClaims) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": k.url, "aud": testAudience, "sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for name, v := range more {
		if v == nil {
			delete(c, name)
		} else {
			c[name] = v
		}
	}
	return c
}

// sign signs claims with key, its kid in the header, and the header
// fields of header over those (a nil value deletes one).
func sign(t testing.TB, key *testKey, claims jwt.MapClaims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(key.method, claims)
	tok.Header["kid"] = key.kid
	for name, v := range header {
		if v == nil {
			delete(tok.Header, name)
		} else {
			tok.Header[name] = v
		}
	}
	s, err := tok.SignedString(key.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwtBridge is a bridge whose callers authenticate with the tokens of an
// identity provider, and with the static tokens of callers.
type jwtBridge struct {
	*env
	rec      *recorder
	provider *idp.Provider
	auth     *auth.Auth
	reg      *prometheus.Registry
	log      *syncBuffer
}

// newJWTBridge starts a bridge with the identities of callers plus ids,
// and the provider of o (Issuer and Audiences default to k's and
// testAudience), whose fetch loop runs until the test ends.
func newJWTBridge(t *testing.T, o idp.Options, ids []bridge.Identity, opts bridge.Options, claims map[string]string) *jwtBridge {
	t.Helper()
	if o.Audiences == nil {
		o.Audiences = []string{testAudience}
	}
	log := &syncBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(log, nil))
	p, err := idp.New(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range callers {
		ids = append(ids, bridge.Identity{Name: c.name, Tokens: []string{hashToken(c.token)}, Allow: c.allow})
	}
	a, err := auth.New(ids, &auth.Provider{Provider: p, ClaimsMetadata: claims})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	reg := prometheus.NewRegistry()
	m, err := bridge.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Auth, opts.Metrics = a, m
	opts.Logger = slog.New(slog.NewTextHandler(log, nil))
	opts.AccessLog = opts.Logger
	rec := new(recorder)
	e := newEnv(t, opts, recording(rec))
	return &jwtBridge{env: e, rec: rec, provider: p, auth: a, reg: reg, log: log}
}

// counter is the value of the counter name with label reason.
func (b *jwtBridge) counter(t testing.TB, name, reason string) float64 {
	t.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "reason", reason) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

// postToken posts body to path with token as a bearer token.
func postToken(t testing.TB, url, token, body string) (*http.Response, []byte) {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return postAs(t, url, h, body)
}

// awaitLoaded awaits p's keys loaded.
func awaitLoaded(t *testing.T, p *idp.Provider) {
	t.Helper()
	await.Until(t, 10*time.Second, "the keys of "+p.Issuer()+" loaded", p.Loaded)
}

// challengeParam is the value of the auth-param name of a challenge.
func challengeParam(challenge, name string) string {
	_, rest, ok := strings.Cut(challenge, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
