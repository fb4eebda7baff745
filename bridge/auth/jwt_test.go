package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
)

const (
	testIssuer   = "https://idp.test"
	testAudience = "https://bridge.test/"
)

// fileIssuer is a provider whose key set is a file of one ES256 key.
type fileIssuer struct {
	key *ecdsa.PrivateKey
	kid string
	p   *idp.Provider
}

func newFileIssuer(tb testing.TB) *fileIssuer {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	f := &fileIssuer{key: key, kid: "k1"}
	j, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: f.kid, ALG: jwkset.AlgES256, USE: jwkset.UseSig}})
	if err != nil {
		tb.Fatal(err)
	}
	b, _ := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{j.Marshal()}})
	path := filepath.Join(tb.TempDir(), "jwks.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	f.p, err = idp.New(idp.Options{Issuer: testIssuer, Audiences: []string{testAudience}, JWKSFile: path, ClockSkew: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func (f *fileIssuer) token(tb testing.TB, sub string, ttl time.Duration) string {
	tb.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": sub,
		"exp": time.Now().Add(ttl).Unix(), "email": "x@example.com"})
	tok.Header["kid"] = f.kid
	s, err := tok.SignedString(f.key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func bearer(token string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// TestTokenCacheBounds: the cache of verified tokens holds at most its
// entries and bytes, and a cached token is the same caller.
func TestTokenCacheBounds(t *testing.T) {
	f := newFileIssuer(t)
	a, err := New([]Identity{{Name: "svc", JWT: &Selector{}, Allow: []string{"*"}}}, &Provider{Provider: f.p})
	if err != nil {
		t.Fatal(err)
	}
	s := a.cur.Load()
	s.cache = newTokenCache(50, 50*(entryOverhead+600))
	var first *Caller
	for i := range 500 {
		c, fail := a.Authenticate(bearer(f.token(t, "sub-"+strings.Repeat("x", i%7)+string(rune('a'+i%26)), time.Hour)))
		if fail != OK || c.Name() != "svc" {
			t.Fatalf("token %d: %v %v", i, c, fail)
		}
		if i == 0 {
			first = c
		}
		if n, b := s.cache.entries.Load(), s.cache.bytes.Load(); n > 50 || b > s.cache.maxBytes {
			t.Fatalf("after %d tokens the cache holds %d entries, %d bytes: over its bounds", i+1, n, b)
		}
	}
	tok := f.token(t, "same", time.Hour)
	c1, _ := a.Authenticate(bearer(tok))
	c2, _ := a.Authenticate(bearer(tok))
	if c1 != c2 {
		t.Errorf("the same token twice: two callers, want the cached one")
	}
	if first.Expires().IsZero() {
		t.Errorf("a JWT caller without expiry")
	}
}

// TestCachedTokenExpires: a cached token is refused once it expired
// (beyond the clock skew).
func TestCachedTokenExpires(t *testing.T) {
	f := newFileIssuer(t)
	a, err := New([]Identity{{Name: "svc", JWT: &Selector{}, Allow: []string{"*"}}}, &Provider{Provider: f.p})
	if err != nil {
		t.Fatal(err)
	}
	tok := f.token(t, "s", 0)
	sum := sha256.Sum256([]byte(tok))
	c, fail := a.Authenticate(bearer(tok)) // within the 1 s skew
	if fail != OK {
		t.Fatalf("got %v", fail)
	}
	if got := a.cur.Load().cache.get(sum, c.Expires().Add(-time.Millisecond)); got != c {
		t.Errorf("before it expires: not cached")
	}
	if got := a.cur.Load().cache.get(sum, c.Expires()); got != nil {
		t.Errorf("once it expired: still cached")
	}
}

// FuzzAuthenticate: any token sent as a bearer token gets a caller or a
// failure, never a panic; a failure has a label, a message and no
// caller.
func FuzzAuthenticate(f *testing.F) {
	iss := newFileIssuer(f)
	a, err := New([]Identity{
		{Name: "static", Tokens: []string{"sha256:" + strings.Repeat("ab", 32)}, Allow: []string{"*"}},
		{Name: "svc", JWT: &Selector{Subjects: []string{"svc"}, Claims: map[string]string{"scope": "a"}}, Allow: []string{"*"}},
	}, &Provider{Provider: iss.p, ClaimsMetadata: map[string]string{"sub": "x-sub", "email": "x-email"}})
	if err != nil {
		f.Fatal(err)
	}
	good := iss.token(f, "svc", time.Hour)
	parts := strings.Split(good, ".")
	for _, seed := range []string{
		good, parts[0] + "." + parts[1] + ".", parts[0] + ".." + parts[2], "eyJ.eyJ.eyJ", "eyJhbGciOiJub25lIn0.e30.",
		"eyJhbGciOiJFUzI1NiIsImNyaXQiOlsiYiJdfQ.e30.e30", good + "." + parts[1], strings.Repeat("eyJ.", 50), "a.b.c",
		"eyJhbGciOiJFUzI1NiIsImtpZCI6eyJhIjoxfX0.eyJleHAiOiJ4In0.AA",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		c, fail := a.Authenticate(bearer(token))
		switch {
		case fail == OK && c == nil:
			t.Fatalf("%q: no caller and no failure", token)
		case fail != OK && (c != nil || fail.Reason() == "" || fail.Message() == ""):
			t.Fatalf("%q: failure %d with caller %v, label %q, message %q", token, fail, c, fail.Reason(), fail.Message())
		case strings.ContainsFunc(fail.Message(), func(r rune) bool { return r < 0x20 || r > 0x7e || r == '"' || r == '\\' }):
			t.Fatalf("%q: message %q is no error_description (RFC 6750 section 3)", token, fail.Message())
		}
		a.ScopesFor(bearer(token), c)
		idp.Peek(token)
	})
}

// BenchmarkAuthenticate is the front door's cost of a credential: a
// static token, and a JWT of about 900 bytes found in the cache (the
// same token on every call), in parallel.
func BenchmarkAuthenticate(b *testing.B) {
	f := newFileIssuer(b)
	const static = "static-bench-token-0123456789abcdef"
	sum := sha256.Sum256([]byte(static))
	a, err := New([]Identity{
		{Name: "static", Tokens: []string{"sha256:" + hex.EncodeToString(sum[:])}, Allow: []string{"*"}},
		{Name: "jwt", JWT: &Selector{Subjects: []string{"bench-load"}}, Allow: []string{"*"}},
	}, &Provider{Provider: f.p, ClaimsMetadata: map[string]string{"sub": "x-user-sub"}})
	if err != nil {
		b.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "bench-load",
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "scope": "bridge:call openid profile email",
		"email": "bench-load@example.com", "jti": "3f1c2a9e-8d4b-4c7e-9a1f-5e6d7c8b9a0f", "azp": "bench-load",
		"groups": []string{"billing-admins", "platform-team", "sre", "ci-runners", "staff", "eng-backend", "eng-frontend", "oncall", "security-reviewers", "data-readers", "release-managers"}})
	tok.Header["kid"] = f.kid
	token, err := tok.SignedString(f.key)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, token string }{{"static", static}, {"jwt", token}} {
		b.Run(c.name, func(b *testing.B) {
			r := bearer(c.token)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, fail := a.Authenticate(r); fail != OK {
						b.Fatal(fail.Message())
					}
				}
			})
		})
	}
}

// TestScopesFor: the scopes a token no identity matches would need to be
// one's: its own and those of the first identity its token matches but
// for scope or scp, when the token would then resolve to it; none when
// an earlier identity would take it instead, when other claims are
// missing, or for a caller that matched.
func TestScopesFor(t *testing.T) {
	iss := newFileIssuer(t)
	sign := func(claims jwt.MapClaims) string {
		c := jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "u", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range claims {
			c[k] = v
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
		tok.Header["kid"] = iss.kid
		s, err := tok.SignedString(iss.key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tt := range []struct {
		name   string
		ids    []Identity
		claims jwt.MapClaims
		want   []string
	}{
		{"scope", []Identity{{Name: "a", JWT: &Selector{Claims: map[string]string{"scope": "x:call"}}, Allow: []string{"*"}}},
			jwt.MapClaims{"scope": "openid"}, []string{"openid", "x:call"}},
		{"scp as an array", []Identity{{Name: "a", JWT: &Selector{Claims: map[string]string{"scp": "x:call"}}, Allow: []string{"*"}}},
			jwt.MapClaims{"scp": []string{"a", "b"}}, []string{"a", "b", "x:call"}},
		{"other claims missing", []Identity{{Name: "a", JWT: &Selector{Subjects: []string{"v"}, Claims: map[string]string{"scope": "x:call"}}, Allow: []string{"*"}}},
			nil, nil},
		{"an identity allowed nothing", []Identity{{Name: "a", JWT: &Selector{Claims: map[string]string{"scope": "x:call"}}}},
			nil, nil},
		{"an earlier identity takes it", []Identity{
			{Name: "a", JWT: &Selector{Claims: map[string]string{"scope": "x:call"}}},
			{Name: "b", JWT: &Selector{Claims: map[string]string{"scope": "x:call", "groups": "g"}}, Allow: []string{"*"}},
			{Name: "c", JWT: &Selector{Claims: map[string]string{"scope": "y:call"}}, Allow: []string{"*"}},
		}, jwt.MapClaims{"groups": []string{"g"}}, []string{"y:call"}},
		{"no selector asks for scopes", []Identity{{Name: "a", JWT: &Selector{Subjects: []string{"v"}}, Allow: []string{"*"}}},
			nil, nil},
		{"a caller that matched", []Identity{{Name: "a", JWT: &Selector{}, Allow: []string{"*"}}, {Name: "b", JWT: &Selector{Claims: map[string]string{"scope": "x"}}, Allow: []string{"*"}}},
			nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.ids, &Provider{Provider: iss.p})
			if err != nil {
				t.Fatal(err)
			}
			r := bearer(sign(tt.claims))
			c, fail := a.Authenticate(r)
			if fail != OK {
				t.Fatal(fail.Message())
			}
			if got := a.ScopesFor(r, c); strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
