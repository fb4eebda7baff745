package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Identity is one caller in the file named by auth.file. The bridge checks
// the values themselves (digest format, certificate names, duplicates).
type Identity struct {
	// Name is the identity passed to the backends and logged.
	Name string `yaml:"name"`
	// Tokens are "sha256:<hex>" digests of bearer tokens or API keys.
	Tokens []string `yaml:"tokens"`
	// ClientCerts are "cn:", "dns:", "uri:" or "email:" names of client
	// certificates.
	ClientCerts []string `yaml:"client_certs"`
	// JWT selects the verified JWTs that authenticate as the identity.
	JWT *JWTSelector `yaml:"jwt"`
	// Allow are the method patterns the identity may call.
	Allow []string `yaml:"allow"`
}

// JWTSelector matches verified JWTs by their claims (see auth.Selector).
type JWTSelector struct {
	// Issuer, if set, is the iss of the tokens it matches.
	Issuer string `yaml:"issuer"`
	// Subjects, if set, lists the sub values it matches.
	Subjects []string `yaml:"subjects"`
	// Claims are claim values every matched token carries.
	Claims map[string]string `yaml:"claims"`
}

// LoadIdentities reads an identities file: a mapping whose only key,
// identities, lists the callers. Unknown keys are refused.
func LoadIdentities(path string) ([]Identity, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.New(readError(err))
	}
	return ParseIdentities(path, data)
}

// ParseIdentities reads data, the identities file at path, as
// LoadIdentities does.
func ParseIdentities(path string, data []byte) ([]Identity, error) {
	var f struct {
		Identities []Identity `yaml:"identities"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Identities) == 0 {
		return nil, fmt.Errorf("%s lists no identities", path)
	}
	return f.Identities, nil
}

// validateGuard checks the settings of authentication, limits, timeouts
// and shutdown.
func (s Settings) validateGuard(e Engine) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	if s.Auth.File != "" {
		if _, err := LoadIdentities(s.Auth.File); err != nil {
			bad("auth.file", "%v", err)
		}
	}
	errs = append(errs, s.validateJWT(e)...)
	if k := s.Auth.IdentityMetadataKey; !validMetadataKey(k) {
		bad("auth.identity_metadata_key", "want a lower-case gRPC metadata key of a-z, 0-9, -, _ and ., not starting with grpc- nor ending in -bin, got %q", k)
	}
	if s.MaxInFlight < 1 {
		bad("max_in_flight", "must be at least 1, got %d", s.MaxInFlight)
	}
	if s.MaxResponseBytes <= 0 {
		bad("max_response_bytes", "must be positive, got %d", s.MaxResponseBytes)
	}
	if s.RateLimit < 0 {
		bad("rate_limit", "must be 0 (off) or positive, got %d", s.RateLimit)
	}
	if s.RateBurst < 0 {
		bad("rate_burst", "must be 0 (automatic) or positive, got %d", s.RateBurst)
	}
	if s.ReadHeaderTimeout <= 0 {
		bad("read_header_timeout", "must be positive, got %s", s.ReadHeaderTimeout)
	}
	for _, d := range []struct {
		key string
		v   any
		ok  bool
	}{
		{"read_timeout", s.ReadTimeout, s.ReadTimeout >= 0},
		{"write_timeout", s.WriteTimeout, s.WriteTimeout >= 0},
		{"idle_timeout", s.IdleTimeout, s.IdleTimeout >= 0},
		{"shutdown_delay", s.ShutdownDelay, s.ShutdownDelay >= 0},
	} {
		if !d.ok {
			bad(d.key, "must be 0s or positive, got %s", d.v)
		}
	}
	if s.WriteTimeout > 0 && s.WriteTimeout <= s.CallTimeout {
		bad("write_timeout", "must be 0s (off) or longer than call_timeout (%s), got %s", s.CallTimeout, s.WriteTimeout)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"body_timeout", s.BodyTimeout}, {"reply_timeout", s.ReplyTimeout}} {
		if d.v <= 0 {
			bad(d.key, "must be positive, got %s", d.v)
		}
	}
	for _, n := range []struct {
		key string
		v   int
	}{
		{"max_body_reads_per_client", s.MaxBodyReadsPerClient},
		{"max_body_reads_per_connection", s.MaxBodyReadsPerConnection},
		{"http2_max_concurrent_streams", s.HTTP2MaxConcurrentStreams},
		{"max_ws_connections", s.MaxWSConnections},
		{"max_ws_connections_per_client", s.MaxWSConnectionsPerClient},
	} {
		if n.v < 1 {
			bad(n.key, "must be at least 1, got %d", n.v)
		}
	}
	return errs
}

func validMetadataKey(k string) bool {
	if k == "" || strings.HasPrefix(k, "grpc-") || strings.HasSuffix(k, "-bin") {
		return false
	}
	for i := range len(k) {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
