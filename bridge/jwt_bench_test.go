package bridge_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
)

// BenchmarkUnaryAuth is BenchmarkUnary with authentication on: the same
// static token on every call, or the same JWT (ES256, about 900 bytes, as
// identity providers issue them), verified once and then found in the
// cache. The hot path's cost of a JWT is the difference.
func BenchmarkUnaryAuth(b *testing.B) {
	key := newTestKey(b, "ES256")
	file := filepath.Join(b.TempDir(), "jwks.json")
	set, _ := json.Marshal(map[string]any{"keys": []any{publicJWK(key)}})
	if err := os.WriteFile(file, set, 0o600); err != nil {
		b.Fatal(err)
	}
	const issuer = "https://idp.bench"
	p, err := idp.New(idp.Options{Issuer: issuer, Audiences: []string{testAudience}, JWKSFile: file, ClockSkew: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	a, err := auth.New([]bridge.Identity{
		{Name: "static", Tokens: []string{hashToken("static-bench-token-0123456789abcdef")}, Allow: []string{"*"}},
		{Name: "jwt", JWT: &auth.Selector{Subjects: []string{"bench-load"}}, Allow: []string{"*"}},
	}, &auth.Provider{Provider: p})
	if err != nil {
		b.Fatal(err)
	}
	groups := []string{"billing-admins", "platform-team", "sre", "ci-runners", "staff", "eng-backend", "eng-frontend", "oncall", "security-reviewers", "data-readers"}
	token := sign(b, key, jwt.MapClaims{"iss": issuer, "aud": testAudience, "sub": "bench-load", "exp": time.Now().Add(time.Hour).Unix(),
		"iat": time.Now().Unix(), "scope": "bridge:call openid profile email", "email": "bench-load@example.com", "groups": groups,
		"jti": "3f1c2a9e-8d4b-4c7e-9a1f-5e6d7c8b9a0f", "azp": "bench-load"}, nil)
	srv := newEnv(b, bridge.Options{Auth: a}, echoOnly).bridge
	for _, c := range []struct{ name, token string }{{"static", "static-bench-token-0123456789abcdef"}, {"jwt", token}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(unaryBody))
					req.Header.Set("Authorization", "Bearer "+c.token)
					w := httptest.NewRecorder()
					srv.ServeHTTP(w, req)
					if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"result"`) {
						b.Fatalf("got HTTP %d %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}
