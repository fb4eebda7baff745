package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// withGuardDefaults gives s the defaults of the authentication, limit and
// shutdown settings, for tests that spell out the others.
func (s Settings) withGuardDefaults() Settings {
	d := Defaults()
	s.ShutdownDelay, s.Auth, s.MaxInFlight, s.MaxResponseBytes = d.ShutdownDelay, d.Auth, d.MaxInFlight, d.MaxResponseBytes
	s.RateLimit, s.RateBurst = d.RateLimit, d.RateBurst
	s.RateLimitStoreTimeout, s.RateLimitStoreFallback = d.RateLimitStoreTimeout, d.RateLimitStoreFallback
	s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout = d.ReadHeaderTimeout, d.ReadTimeout, d.WriteTimeout, d.IdleTimeout
	s.AccessLog, s.Metrics, s.DirectCalls, s.BackendKeepalive, s.MCP = d.AccessLog, d.Metrics, d.DirectCalls, d.BackendKeepalive, d.MCP
	s.Explorer, s.LeanHTTP1 = d.Explorer, d.LeanHTTP1
	s.Balance, s.ResolveInterval = d.Balance, d.ResolveInterval
	s.BodyTimeout, s.ReplyTimeout, s.MaxBodyReadsPerClient, s.MaxBodyReadsPerConnection = d.BodyTimeout, d.ReplyTimeout, d.MaxBodyReadsPerClient, d.MaxBodyReadsPerConnection
	s.HTTP2MaxConcurrentStreams, s.MaxWSConnections, s.MaxWSConnectionsPerClient = d.HTTP2MaxConcurrentStreams, d.MaxWSConnections, d.MaxWSConnectionsPerClient
	return s
}

func TestLoadIdentities(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "identities:\n  - name: bot\n    tokens: [\"sha256:"+
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"]\n    client_certs: [\"cn:bot\"]\n    allow: [\"billing.v1.*\"]\n")
	ids, err := LoadIdentities(good)
	if err != nil || len(ids) != 1 || ids[0].Name != "bot" || len(ids[0].Tokens) != 1 || ids[0].ClientCerts[0] != "cn:bot" || ids[0].Allow[0] != "billing.v1.*" {
		t.Fatalf("got %+v, %v, want the one identity", ids, err)
	}
	for _, tt := range []struct{ name, data string }{
		{"unknown key", "identities:\n  - name: bot\n    token: x\n"},
		{"unknown top key", "users: []\n"},
		{"empty", "identities: []\n"},
		{"not yaml", "identities: [\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := LoadIdentities(write(tt.name+".yaml", tt.data)); err == nil {
				t.Errorf("got no error, want one")
			}
		})
	}
	t.Run("through Load", func(t *testing.T) {
		_, _, err := load(t, []string{"--auth-file", filepath.Join(dir, "missing.yaml")}, nil, "")
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != "auth.file" {
			t.Errorf("got %v, want a KeyError for auth.file", err)
		}
	})
}

func TestGuardValidation(t *testing.T) {
	for _, tt := range []struct {
		key  string
		args []string
	}{
		{"max_in_flight", []string{"--max-in-flight", "0"}},
		{"max_response_bytes", []string{"--max-response-bytes", "0"}},
		{"rate_limit", []string{"--rate-limit", "-1"}},
		{"rate_burst", []string{"--rate-burst", "-1"}},
		{"read_header_timeout", []string{"--read-header-timeout", "0s"}},
		{"write_timeout", []string{"--write-timeout", "10s"}},
		{"shutdown_delay", []string{"--shutdown-delay", "-1s"}},
		{"auth.identity_metadata_key", []string{"--auth-identity-metadata-key", "X-Bad Key"}},
	} {
		t.Run(tt.key, func(t *testing.T) {
			_, _, err := load(t, tt.args, nil, "")
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tt.key || !errors.Is(err, ErrInvalidValue) {
				t.Errorf("got %v, want an invalid value of %s", err, tt.key)
			}
		})
	}
}
