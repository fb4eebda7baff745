package config

import (
	goreflect "reflect"
	"strings"
	"testing"
	"time"
)

// TestLoadJWT: the keys of identity providers from flags, variables and
// the file, auth.jwt_providers included.
func TestLoadJWT(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want []JWT
	}{
		{name: "flags", args: []string{"--auth-jwt-issuer", "https://idp.example.com", "--auth-jwt-audiences", "https://a.example.com,https://b.example.com",
			"--auth-jwt-claims-metadata", "sub=x-user-sub,email=x-user-email", "--auth-jwt-clock-skew", "5s"},
			want: []JWT{{Issuer: "https://idp.example.com", Audiences: []string{"https://a.example.com", "https://b.example.com"},
				ClaimsMetadata: map[string]string{"sub": "x-user-sub", "email": "x-user-email"}, ClockSkew: 5 * time.Second, JWKSRefresh: 10 * time.Minute}}},
		{name: "variables", env: map[string]string{"BRIDGE_AUTH_JWT_ISSUER": "https://idp.example.com", "BRIDGE_AUTH_JWT_AUDIENCES": "a",
			"BRIDGE_AUTH_JWT_CLAIMS_METADATA": "sub=x-user-sub", "BRIDGE_AUTH_JWT_JWKS_REFRESH": "2m"},
			want: []JWT{{Issuer: "https://idp.example.com", Audiences: []string{"a"}, ClaimsMetadata: map[string]string{"sub": "x-user-sub"},
				ClockSkew: time.Minute, JWKSRefresh: 2 * time.Minute}}},
		{name: "file, with more providers", file: "auth:\n  jwt:\n    issuer: https://idp.example.com\n    audiences: [a]\n" +
			"  jwt_providers:\n    - issuer: https://token.actions.githubusercontent.com\n      audiences: [a]\n      clock_skew: 0s\n      claims_metadata: {repository: x-repo}\n" +
			"    - {issuer: https://k8s.example.com, audiences: [a], jwks_url: https://k8s.example.com/openid/v1/jwks}\n",
			args: []string{"--config", "$FILE"},
			want: []JWT{{Issuer: "https://idp.example.com", Audiences: []string{"a"}, ClockSkew: time.Minute, JWKSRefresh: 10 * time.Minute},
				{Issuer: "https://token.actions.githubusercontent.com", Audiences: []string{"a"}, ClaimsMetadata: map[string]string{"repository": "x-repo"}, JWKSRefresh: 10 * time.Minute},
				{Issuer: "https://k8s.example.com", Audiences: []string{"a"}, JWKSURL: "https://k8s.example.com/openid/v1/jwks", ClockSkew: time.Minute, JWKSRefresh: 10 * time.Minute}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, err := load(t, tt.args, tt.env, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Auth.JWTProviders(); !goreflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestJWTErrors: every bad provider setting is an error naming its key.
func TestJWTErrors(t *testing.T) {
	tests := []struct {
		name, file string
		args       []string
		key        string
	}{
		{name: "an issuer without audiences", args: []string{"--auth-jwt-issuer", "https://idp.example.com"}, key: "auth.jwt.audiences"},
		{name: "an unknown key of a provider", file: "auth:\n  jwt_providers:\n    - {issuer: https://i.example.com, audiences: [a], audience: b}\n", key: "auth.jwt_providers"},
		{name: "a provider without audiences", file: "auth:\n  jwt_providers:\n    - {issuer: https://i.example.com}\n", key: "auth.jwt_providers[0].audiences"},
		{name: "one issuer twice", file: "auth:\n  jwt:\n    issuer: https://i.example.com\n    audiences: [a]\n  jwt_providers:\n    - {issuer: https://i.example.com, audiences: [a]}\n", key: "auth.jwt_providers[0].issuer"},
		{name: "a claims map that is no map", args: []string{"--auth-jwt-issuer", "https://i.example.com", "--auth-jwt-audiences", "a"}, file: "auth:\n  jwt:\n    claims_metadata: [sub]\n", key: "auth.jwt.claims_metadata"},
		{name: "a negative clock skew", args: []string{"--auth-jwt-issuer", "https://i.example.com", "--auth-jwt-audiences", "a", "--auth-jwt-clock-skew", "-1s"}, key: "auth.jwt.clock_skew"},
		{name: "a scope with a quote", file: "auth:\n  jwt:\n    issuer: https://i.example.com\n    audiences: [a]\n    scopes: ['bridge:\"call']\n", key: "auth.jwt.scopes"},
		{name: "a scope with a space", file: "auth:\n  jwt:\n    issuer: https://i.example.com\n    audiences: [a]\n    scopes: ['read write']\n", key: "auth.jwt.scopes"},
		{name: "a url and a file", args: []string{"--auth-jwt-issuer", "https://i.example.com", "--auth-jwt-audiences", "a", "--auth-jwt-jwks-url", "https://i.example.com/k", "--auth-jwt-jwks-file", "k.json"}, key: "auth.jwt.jwks_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append(args, "--config", "$FILE")
			}
			_, _, err := load(t, args, nil, tt.file)
			if err == nil || !strings.Contains(err.Error(), `"`+tt.key+`"`) {
				t.Errorf("got %v, want an error naming %s", err, tt.key)
			}
		})
	}
}
