package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config/defaults"
)

// JWT is one identity provider whose JWT bearer tokens authenticate
// callers: auth.jwt, or an entry of auth.jwt_providers.
type JWT struct {
	// Issuer is the iss a token must carry exactly; empty turns this
	// provider off.
	Issuer string `yaml:"issuer"`
	// Audiences lists what a token's aud must hold one of; required with
	// Issuer.
	Audiences []string `yaml:"audiences"`
	// JWKSURL is where the keys are; empty means the jwks_uri of the
	// issuer's OpenID Connect discovery document.
	JWKSURL string `yaml:"jwks_url,omitempty"`
	// JWKSFile is a local key set instead, reread when it changes.
	JWKSFile string `yaml:"jwks_file,omitempty"`
	// CAFile holds the PEM certificates that may sign the provider's
	// HTTPS certificate; empty means the system's roots.
	CAFile string `yaml:"ca_file,omitempty"`
	// Algorithms are the allowed alg values; empty means every
	// asymmetric one (Engine.Algorithms).
	Algorithms []string `yaml:"algorithms,omitempty"`
	// ClockSkew is the leeway of exp, nbf and iat.
	ClockSkew time.Duration `yaml:"-"`
	// JWKSRefresh is how often the keys are fetched again; less than a
	// minute is taken as a minute.
	JWKSRefresh time.Duration `yaml:"-"`
	// ClaimsMetadata maps string claims to the gRPC metadata keys they
	// reach the backends under.
	ClaimsMetadata map[string]string `yaml:"claims_metadata,omitempty"`
	// Scopes are the scopes_supported of the protected resource metadata.
	Scopes []string `yaml:"scopes,omitempty"`
}

// MarshalYAML writes j as the file takes it, durations as strings.
func (j JWT) MarshalYAML() (any, error) {
	type plain JWT
	return struct {
		plain       `yaml:",inline"`
		ClockSkew   string `yaml:"clock_skew"`
		JWKSRefresh string `yaml:"jwks_refresh"`
	}{plain(j), j.ClockSkew.String(), j.JWKSRefresh.String()}, nil
}

// Defaults of a provider's settings.
const (
	DefaultClockSkew   = defaults.JWTClockSkew
	DefaultJWKSRefresh = defaults.JWKSRefresh
)

// JWTProviders lists the identity providers: auth.jwt when its issuer is
// set, then auth.jwt_providers.
func (a Auth) JWTProviders() []JWT {
	var out []JWT
	if a.JWT.Issuer != "" {
		out = append(out, a.JWT)
	}
	return append(out, a.Providers...)
}

// jwtKeys are the keys of one provider, for auth.jwt (prefixed) and for
// the entries of auth.jwt_providers.
func jwtKeys() []string {
	return []string{"issuer", "audiences", "jwks_url", "jwks_file", "ca_file", "algorithms", "clock_skew", "jwks_refresh", "claims_metadata", "scopes"}
}

// rawJWT decodes an entry of auth.jwt_providers: unset durations keep
// their defaults.
type rawJWT struct {
	Issuer         string            `mapstructure:"issuer"`
	Audiences      []string          `mapstructure:"audiences"`
	JWKSURL        string            `mapstructure:"jwks_url"`
	JWKSFile       string            `mapstructure:"jwks_file"`
	CAFile         string            `mapstructure:"ca_file"`
	Algorithms     []string          `mapstructure:"algorithms"`
	ClockSkew      *time.Duration    `mapstructure:"clock_skew"`
	JWKSRefresh    *time.Duration    `mapstructure:"jwks_refresh"`
	ClaimsMetadata map[string]string `mapstructure:"claims_metadata"`
	Scopes         []string          `mapstructure:"scopes"`
}

// loadJWTProviders decodes auth.jwt_providers of v into s.
func loadJWTProviders(v *viper.Viper, s *Settings) []error {
	if !v.IsSet(KeyJWTProviders) {
		return nil
	}
	var raw []rawJWT
	err := v.UnmarshalKey(KeyJWTProviders, &raw, viper.DecodeHook(strictHook), func(c *mapstructure.DecoderConfig) { c.ErrorUnused = true })
	if err != nil {
		return []error{&KeyError{Key: KeyJWTProviders, Err: ErrInvalidValue,
			Reason: fmt.Sprintf("want a list of providers, each a mapping of %s: %v", strings.Join(jwtKeys(), ", "), err)}}
	}
	for _, r := range raw {
		j := JWT{Issuer: r.Issuer, Audiences: r.Audiences, JWKSURL: r.JWKSURL, JWKSFile: r.JWKSFile, CAFile: r.CAFile,
			Algorithms: r.Algorithms, ClaimsMetadata: r.ClaimsMetadata, Scopes: r.Scopes,
			ClockSkew: DefaultClockSkew, JWKSRefresh: DefaultJWKSRefresh}
		if r.ClockSkew != nil {
			j.ClockSkew = *r.ClockSkew
		}
		if r.JWKSRefresh != nil {
			j.JWKSRefresh = *r.JWKSRefresh
		}
		s.Auth.Providers = append(s.Auth.Providers, j)
	}
	return nil
}

// validateJWT checks the identity providers and auth.resource.
func (s Settings) validateJWT(e Engine) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	if j := s.Auth.JWT; j.Issuer == "" {
		for _, set := range []struct {
			key string
			on  bool
		}{
			{"auth.jwt.audiences", len(j.Audiences) > 0}, {"auth.jwt.jwks_url", j.JWKSURL != ""},
			{"auth.jwt.jwks_file", j.JWKSFile != ""}, {"auth.jwt.ca_file", j.CAFile != ""},
			{"auth.jwt.algorithms", len(j.Algorithms) > 0}, {"auth.jwt.claims_metadata", len(j.ClaimsMetadata) > 0},
			{"auth.jwt.scopes", len(j.Scopes) > 0},
		} {
			if set.on {
				bad(set.key, "is set, but auth.jwt.issuer is not: set the issuer to turn JWT authentication on")
			}
		}
	}
	issuers := map[string]string{}
	prefix := func(i int) string {
		if i == 0 && s.Auth.JWT.Issuer != "" {
			return "auth.jwt."
		}
		if s.Auth.JWT.Issuer != "" {
			i--
		}
		return fmt.Sprintf("%s[%d].", KeyJWTProviders, i)
	}
	metadataKeys := map[string]string{}
	for i, j := range s.Auth.JWTProviders() {
		p := prefix(i)
		if j.Issuer == "" {
			bad(p+"issuer", "is required")
			continue
		}
		if other, dup := issuers[j.Issuer]; dup {
			bad(p+"issuer", "%q is the issuer of %sissuer too", j.Issuer, other)
		}
		issuers[j.Issuer] = p
		if len(j.Audiences) == 0 {
			bad(p+"audiences", "is required when %sissuer is set: without it a token the issuer gave another service would be accepted", p)
		}
		if slices.Contains(j.Audiences, "") {
			bad(p+"audiences", "holds an empty audience")
		}
		switch {
		case j.JWKSURL != "" && j.JWKSFile != "":
			bad(p+"jwks_url", "give jwks_url or jwks_file, not both")
		case j.JWKSURL != "":
			if !isHTTPURL(j.JWKSURL) {
				bad(p+"jwks_url", "want an https:// (or http://) URL, got %q", j.JWKSURL)
			}
		case j.JWKSFile == "" && !isHTTPURL(j.Issuer):
			bad(p+"issuer", "%q is no http(s) URL to discover the keys at (<issuer>/.well-known/openid-configuration): set jwks_url or jwks_file", j.Issuer)
		}
		for _, a := range j.Algorithms {
			switch {
			case strings.EqualFold(a, "none"), strings.HasPrefix(strings.ToUpper(a), "HS"):
				bad(p+"algorithms", "%q is never accepted: keys come from a published key set, so only asymmetric algorithms (%s) verify", a, strings.Join(e.Algorithms, ", "))
			case e.Algorithms != nil && !slices.Contains(e.Algorithms, a):
				bad(p+"algorithms", "want some of %s, got %q", strings.Join(e.Algorithms, ", "), a)
			}
		}
		if j.ClockSkew < 0 || j.ClockSkew > 10*time.Minute {
			bad(p+"clock_skew", "want 0s to 10m, got %s", j.ClockSkew)
		}
		if j.JWKSRefresh < 0 {
			bad(p+"jwks_refresh", "must be positive (at least %s is honoured), got %s", defaults.MinJWKSRefresh, j.JWKSRefresh)
		}
		for _, claim := range slices.Sorted(maps.Keys(j.ClaimsMetadata)) {
			k := j.ClaimsMetadata[claim]
			switch {
			case claim == "":
				bad(p+"claims_metadata", "a claim name is empty")
			case !validMetadataKey(k):
				bad(p+"claims_metadata", "%s: want a lower-case gRPC metadata key of a-z, 0-9, -, _ and ., not starting with grpc- nor ending in -bin, got %q", claim, k)
			case k == s.Auth.IdentityMetadataKey || k == "x-request-id" || k == "x-forwarded-for" || k == "traceparent" || k == "tracestate" || k == "authorization":
				bad(p+"claims_metadata", "%s: %q is a key the bridge sets itself", claim, k)
			case metadataKeys[k] != "" && metadataKeys[k] != p+claim:
				bad(p+"claims_metadata", "%s: %q is the key of %s too", claim, k, metadataKeys[k])
			}
			metadataKeys[k] = p + claim
		}
		for _, sc := range j.Scopes {
			if e.ScopeToken != nil && !e.ScopeToken(sc) {
				bad(p+"scopes", "want scopes of printable ASCII without space, quote or backslash (RFC 6749 scope-tokens), got %q", sc)
			}
		}
	}
	if r := s.Auth.Resource; r != "" {
		if u, err := url.Parse(r); err != nil || !isHTTPURL(r) || u.Fragment != "" || u.RawQuery != "" {
			bad("auth.resource", "want the bridge's absolute http(s) URL without query or fragment, such as https://api.example.com/mcp, got %q", r)
		}
		if len(issuers) == 0 {
			bad("auth.resource", "is set, but no identity provider is (auth.jwt.issuer)")
		}
	}
	return errs
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}
