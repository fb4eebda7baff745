package config

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strings"
)

// Origins are the browser checks of the front door: which pages may call
// the bridge (CORS, and against CSRF) and which Host names it answers for
// (against DNS rebinding). See bridge.Options and docs/security.md.
type Origins struct {
	// CORSOrigins are the origins, besides the request's own, whose pages
	// may call the bridge from a browser: "https://app.example.com",
	// patterns such as "https://*.example.com", "*" (any) or "null".
	// Streaming.WSOriginPatterns joins them. Empty allows none and sends
	// no CORS headers.
	CORSOrigins []string
	// AllowedHosts are the host names (any port) a request's Host header
	// may name: names, "*.example.com", or "*" for any. Empty means
	// DefaultAllowedHosts of Listen.
	AllowedHosts []string
}

// LoopbackHosts are the names of DefaultAllowedHosts for a loopback
// listen address.
func LoopbackHosts() []string { return []string{"localhost", "127.0.0.1", "::1"} }

// DefaultAllowedHosts are the Host names accepted when allowed_hosts is
// empty: for a loopback listen address (localhost, 127.0.0.0/8, ::1) the
// loopback names (and the listen host itself), so that no page elsewhere
// can reach a bridge on a user's machine by rebinding its own name to
// 127.0.0.1; otherwise "*", since a bridge on the network is reached
// under names and addresses only its deployment knows.
func DefaultAllowedHosts(listen string) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || !isLoopback(host) {
		return []string{"*"}
	}
	hosts, h := LoopbackHosts(), strings.ToLower(host)
	if ip := net.ParseIP(h); ip != nil {
		h = ip.String()
	}
	if !slices.Contains(hosts, h) {
		hosts = append(hosts, h) // such as 127.0.0.2
	}
	return hosts
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// EffectiveAllowedHosts are AllowedHosts, or DefaultAllowedHosts of
// Listen when it is empty.
func (s Settings) EffectiveAllowedHosts() []string {
	if len(s.Origins.AllowedHosts) > 0 {
		return s.Origins.AllowedHosts
	}
	return DefaultAllowedHosts(s.Listen)
}

func (o *Origins) normalize() {
	for _, l := range []*[]string{&o.CORSOrigins, &o.AllowedHosts} {
		if len(*l) == 0 {
			*l = nil
		}
	}
}

// validateOrigins checks cors_origins and allowed_hosts.
func (s Settings) validateOrigins() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	for _, o := range s.Origins.CORSOrigins {
		if reason := checkOrigin(o); reason != "" {
			bad("cors_origins", "%s", reason)
		}
	}
	for _, h := range s.Origins.AllowedHosts {
		if reason := checkHost(h); reason != "" {
			bad("allowed_hosts", "%s", reason)
		}
	}
	return errs
}

// checkOrigin tells what is wrong with an entry of cors_origins, or "".
func checkOrigin(o string) string {
	if o == "*" || o == "null" {
		return ""
	}
	scheme, host, ok := strings.Cut(o, "://")
	want := fmt.Sprintf("want an origin such as https://app.example.com or a pattern such as https://*.example.com, got %q", o)
	switch {
	case !ok || scheme == "" || host == "" || strings.ContainsAny(scheme, "*?[]\\/:"):
		return want
	case strings.ContainsAny(host, "/?#@ \t"):
		return want + ": an origin has no path, query or user"
	}
	if _, err := path.Match(host, ""); err != nil {
		return fmt.Sprintf("bad origin pattern %q", o)
	}
	return ""
}

// checkHost tells what is wrong with an entry of allowed_hosts, or "".
func checkHost(h string) string {
	name := strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	switch {
	case h == "*":
		return ""
	case name == "" || strings.ContainsAny(name, "/?#@ \t"):
		return fmt.Sprintf("want a host name such as api.example.com, *.example.com or *, got %q", h)
	case strings.Contains(name, ":") && net.ParseIP(name) == nil:
		return fmt.Sprintf("give the host without a port (any port is accepted), got %q", h)
	case strings.Contains(name[min(len(name), 1):], "*") || strings.HasPrefix(name, "*") && !strings.HasPrefix(name, "*."):
		return fmt.Sprintf("a wildcard stands only first, as in *.example.com, got %q", h)
	}
	return ""
}
