package bridge_test

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
)

const sayHello = `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"jwt"}}`

// b64 is base64url without padding, as JWS has it.
func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// unsigned is a compact JWS with the given header and claims JSON and
// signature part.
func unsigned(header, claims, sig string) string { return b64(header) + "." + b64(claims) + "." + sig }

func claimsJSON(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRefusedTokens is the refused-token corpus: each token gets HTTP 401
// with a Bearer challenge whose error_description names the failed
// check, a JSON-RPC error 16, its reason counted, no backend call, and
// the bridge goes on serving.
func TestRefusedTokens(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	rs := newTestKey(t, "RS256")
	es := newTestKey(t, "ES256")
	k.publish(rs, es)
	b := newJWTBridge(t, idp.Options{Issuer: k.url, ClockSkew: 5 * time.Second},
		[]bridge.Identity{{Name: "any-token", JWT: &auth.Selector{}, Allow: []string{"*"}}}, bridge.Options{}, nil)
	awaitLoaded(t, b.provider)

	good := k.claims("svc", nil)
	attacker := newTestKey(t, "RS256")
	pubPEM := func() []byte {
		der, err := x509.MarshalPKIXPublicKey(rs.priv.Public().(*rsa.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}()
	hs256 := func(secret []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, good)
		tok.Header["kid"] = rs.kid
		s, err := tok.SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	goodJSON := claimsJSON(t, good)
	attackerJWK, _ := json.Marshal(publicJWK(attacker))
	tampered := func() string {
		s := sign(t, es, good, nil)
		parts := strings.Split(s, ".")
		parts[1] = b64(claimsJSON(t, k.claims("admin", nil)))
		return strings.Join(parts, ".")
	}()
	// A token of characters outside RFC 6750's b64token (the JWS JSON
	// serialization, padding inside) is a malformed token: invalid_token
	// and 401, as RFC 6750 section 3.1 lists it.
	const malformed = "the token is malformed"
	tests := []struct {
		name, token   string
		reason, error string // the metric's reason and the challenge's error
		description   string
	}{
		{"alg none", unsigned(`{"alg":"none","kid":"`+rs.kid+`"}`, goodJSON, ""), "algorithm_not_allowed", "invalid_token", "the token's signing algorithm is not allowed"},
		{"alg None", unsigned(`{"alg":"None","kid":"`+rs.kid+`"}`, goodJSON, ""), "algorithm_not_allowed", "invalid_token", "the token's signing algorithm is not allowed"},
		{"alg NONE", unsigned(`{"alg":"NONE","kid":"`+rs.kid+`"}`, goodJSON, ""), "algorithm_not_allowed", "invalid_token", "the token's signing algorithm is not allowed"},
		{"alg nOnE", unsigned(`{"alg":"nOnE"}`, goodJSON, ""), "algorithm_not_allowed", "invalid_token", "the token's signing algorithm is not allowed"},
		{"alg none with a signature", unsigned(`{"alg":"none"}`, goodJSON, "c2ln"), "algorithm_not_allowed", "invalid_token", "the token's signing algorithm is not allowed"},
		{"HS256 with the RSA public key as secret", hs256(pubPEM), "algorithm_not_allowed", "invalid_token", "the token's signing algorithm is not allowed"},
		{"HS256 with the JWK's modulus as secret", hs256(rs.priv.Public().(*rsa.PublicKey).N.Bytes()), "algorithm_not_allowed", "invalid_token", "the token's signing algorithm is not allowed"},
		{"PS256 under an RS256 key's kid", sign(t, &testKey{kid: rs.kid, priv: rs.priv, method: jwt.SigningMethodPS256}, good, nil), "algorithm_not_allowed", "invalid_token", "the token's signing algorithm is not allowed"},
		{"unknown kid", sign(t, attacker, good, nil), "unknown_key", "invalid_token", "the token is signed with an unknown key"},
		{"kid with a path", sign(t, attacker, good, map[string]any{"kid": "../../../../etc/passwd"}), "unknown_key", "invalid_token", "the token is signed with an unknown key"},
		{"kid with SQL", sign(t, attacker, good, map[string]any{"kid": "x' OR '1'='1' --"}), "unknown_key", "invalid_token", "the token is signed with an unknown key"},
		{"kid not a string", sign(t, attacker, good, map[string]any{"kid": 7}), "malformed", "invalid_token", malformed},
		{"jku to the attacker's keys", sign(t, attacker, good, map[string]any{"jku": "https://attacker.example/jwks"}), "unknown_key", "invalid_token", "the token is signed with an unknown key"},
		{"x5u to the attacker's certificate", sign(t, attacker, good, map[string]any{"x5u": "https://attacker.example/cert.pem"}), "unknown_key", "invalid_token", "the token is signed with an unknown key"},
		{"embedded jwk of the attacker", sign(t, attacker, good, map[string]any{"jwk": json.RawMessage(attackerJWK)}), "unknown_key", "invalid_token", "the token is signed with an unknown key"},
		{"embedded jwk, our kid, the attacker's signature", sign(t, &testKey{kid: rs.kid, priv: attacker.priv, method: attacker.method}, good, map[string]any{"jwk": json.RawMessage(attackerJWK), "jku": "https://attacker.example/jwks"}), "bad_signature", "invalid_token", "the token has a bad signature"},
		{"tampered claims", tampered, "bad_signature", "invalid_token", "the token has a bad signature"},
		{"expired", sign(t, es, k.claims("svc", jwt.MapClaims{"exp": time.Now().Add(-time.Minute).Unix()}), nil), "expired", "invalid_token", "the token has expired"},
		{"nbf in the future", sign(t, es, k.claims("svc", jwt.MapClaims{"nbf": time.Now().Add(time.Minute).Unix()}), nil), "not_yet_valid", "invalid_token", "the token is not yet valid"},
		{"iat in the future", sign(t, es, k.claims("svc", jwt.MapClaims{"iat": time.Now().Add(time.Minute).Unix()}), nil), "not_yet_valid", "invalid_token", "the token is not yet valid"},
		{"no exp", sign(t, es, k.claims("svc", jwt.MapClaims{"exp": nil}), nil), "malformed", "invalid_token", "the token is malformed: it has no expiry (exp)"},
		{"wrong iss", sign(t, es, k.claims("svc", jwt.MapClaims{"iss": "https://evil.example"}), nil), "wrong_issuer", "invalid_token", "the token is from the wrong issuer"},
		{"no iss", sign(t, es, k.claims("svc", jwt.MapClaims{"iss": nil}), nil), "wrong_issuer", "invalid_token", "the token is from the wrong issuer"},
		{"wrong aud", sign(t, es, k.claims("svc", jwt.MapClaims{"aud": "https://other.test/"}), nil), "wrong_audience", "invalid_token", "the token is for the wrong audience"},
		{"aud an array without ours", sign(t, es, k.claims("svc", jwt.MapClaims{"aud": []string{"https://a.test/", "https://b.test/"}}), nil), "wrong_audience", "invalid_token", "the token is for the wrong audience"},
		{"no aud", sign(t, es, k.claims("svc", jwt.MapClaims{"aud": nil}), nil), "wrong_audience", "invalid_token", "the token is for the wrong audience"},
		{"an ID token for another client", sign(t, es, k.claims("alice", jwt.MapClaims{"aud": "other-client", "azp": "other-client", "nonce": "n-0S6_WzA2Mj", "auth_time": time.Now().Unix()}), map[string]any{"typ": "JWT"}), "wrong_audience", "invalid_token", "the token is for the wrong audience"},
		{"exp a string", sign(t, es, k.claims("svc", jwt.MapClaims{"exp": "2999-01-01"}), nil), "malformed", "invalid_token", "the token is malformed: a claim has the wrong type"},
		{"nbf an object", sign(t, es, k.claims("svc", jwt.MapClaims{"nbf": map[string]any{"a": 1}}), nil), "malformed", "invalid_token", "the token is malformed: a claim has the wrong type"},
		{"iss a number", sign(t, es, k.claims("svc", jwt.MapClaims{"iss": 42}), nil), "malformed", "invalid_token", "the token is malformed: a claim has the wrong type"},
		{"typ of a DPoP proof", sign(t, es, good, map[string]any{"typ": "dpop+jwt"}), "malformed", "invalid_token", "the token is malformed: its type (typ) is not that of an access token"},
		{"typ of a logout token", sign(t, es, good, map[string]any{"typ": "application/logout+jwt"}), "malformed", "invalid_token", "the token is malformed: its type (typ) is not that of an access token"},
		{"typ not a string", sign(t, es, good, map[string]any{"typ": 1}), "malformed", "invalid_token", "the token is malformed: its type (typ) is not that of an access token"},
		{"sub a number", sign(t, es, k.claims("svc", jwt.MapClaims{"sub": 42}), nil), "malformed", "invalid_token", "the token is malformed: a claim has the wrong type"},
		{"unknown crit", sign(t, es, good, map[string]any{"crit": []string{"exp-ext"}, "exp-ext": true}), "malformed", "invalid_token", "the token is malformed: it names a critical header extension (crit) the bridge does not support"},
		{"many dots", "eyJhbGciOiJFUzI1NiJ9.e30.e30.e30.e30.e30", "malformed", "invalid_token", malformed},
		{"two parts", "eyJhbGciOiJFUzI1NiJ9.e30", "malformed", "invalid_token", malformed},
		{"header JSON cut short", b64(`{"alg":`) + "." + b64(goodJSON) + ".c2ln", "malformed", "invalid_token", malformed},
		{"claims not JSON", b64(`{"alg":"ES256"}`) + "." + b64("[1,") + ".c2ln", "malformed", "invalid_token", malformed},
		{"signature not base64url", sign(t, es, good, nil) + "~~", "malformed", "invalid_token", malformed},
		{"padded base64 (no b64token)", b64(`{"alg":"ES256"}`) + "==." + b64(goodJSON) + ".c2ln", "malformed", "invalid_token", malformed},
		{"padded base64 at the end", sign(t, es, good, nil) + "==", "malformed", "invalid_token", malformed},
		{"9 KiB", "eyJ" + strings.Repeat("a", 9<<10) + ".e30.e30", "too_large", "invalid_token", "the token is too large (over 8 KiB)"},
		{"1 MiB", "eyJ" + strings.Repeat("a", 1<<20-64) + ".e30.e30", "too_large", "invalid_token", "the token is too large (over 8 KiB)"},
		{"JWS JSON serialization", `{"payload":"` + b64(goodJSON) + `","signatures":[{"protected":"` + b64(`{"alg":"ES256"}`) + `","signature":"c2ln"}]}`, "malformed", "invalid_token", malformed},
		{"JWS JSON, flattened", `{"payload":"e30","protected":"e30","signature":"c2ln"}`, "malformed", "invalid_token", malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := b.counter(t, "jsonrpc_bridge_auth_failures_total", tt.reason)
			resp, body := postToken(t, b.url, tt.token, sayHello)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("got HTTP %d %s, want 401", resp.StatusCode, body)
			}
			ch := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, `Bearer realm="grpc-jsonrpc-bridge", error="`+tt.error+`"`) {
				t.Errorf("got WWW-Authenticate %q, want a Bearer challenge with error=%q", ch, tt.error)
			}
			if got := challengeParam(ch, "error_description"); got != tt.description {
				t.Errorf("got error_description %q, want %q", got, tt.description)
			}
			if got := challengeParam(ch, "resource_metadata"); !strings.HasPrefix(got, "https://bridge.test/.well-known/oauth-protected-resource") {
				t.Errorf("got resource_metadata %q, want the metadata of https://bridge.test/", got)
			}
			var reply struct{ Error struct{ Code int } }
			if err := json.Unmarshal(body, &reply); err != nil || reply.Error.Code != 16 {
				t.Errorf("got body %s, want JSON-RPC error 16", body)
			}
			if after := b.counter(t, "jsonrpc_bridge_auth_failures_total", tt.reason); after != before+1 {
				t.Errorf("jsonrpc_bridge_auth_failures_total{reason=%q} went from %v to %v, want one more", tt.reason, before, after)
			}
			if calls := b.rec.take(); len(calls) != 0 {
				t.Errorf("the backend was called: %v", calls)
			}
		})
	}
	// Still serving, with no panic logged, and a good token passes, typed
	// as an access token (RFC 9068), a JWT, or not at all.
	for _, typ := range []any{nil, "JWT", "jwt", "at+jwt", "application/at+jwt", "application/JWT"} {
		if resp, body := postToken(t, b.url, sign(t, es, good, map[string]any{"typ": typ}), sayHello); resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) {
			t.Errorf("a good token of typ %v after the corpus: got %d %s", typ, resp.StatusCode, body)
		}
	}
	if strings.Contains(b.log.String(), "panic") {
		t.Errorf("a panic was logged:\n%s", b.log)
	}
	for _, tt := range tests {
		if strings.Contains(b.log.String(), tt.token) {
			t.Errorf("the log holds the token of %q", tt.name)
		}
	}
	if !strings.Contains(b.log.String(), "kid="+attacker.kid) || !strings.Contains(b.log.String(), "iss="+k.url) {
		t.Errorf("the refusals' log lines do not name the iss and kid:\n%s", b.log)
	}
}
