package bridge

import (
	"net/http"
	"net/textproto"
	"path"
	"strconv"
	"strings"
)

// The answers of the CORS preflight (see docs/security.md#browsers).
const (
	corsAllowMethods = "POST, GET, OPTIONS"
	// mcpAllowMethods are /mcp's: a session is ended with DELETE.
	mcpAllowMethods = "POST, GET, DELETE, OPTIONS"
	// corsMaxAge is how long, in seconds, a browser may reuse a preflight's
	// answer: a change of cors_origins reaches browsers within it.
	corsMaxAge = "600"
)

// corsBaseHeaders are the request headers a page on an allowed origin may
// send besides the forwarded metadata: the JSON content type, credentials,
// the request id, deadlines and trace context.
var corsBaseHeaders = []string{"Content-Type", "Authorization", "X-API-Key", RequestIDHeader,
	GRPCTimeoutHeader, TimeoutHeader, "Traceparent", "Tracestate"}

// mcpHeaders are the request headers of MCP's Streamable HTTP transport
// (its session, its protocol version, and the resumption of a stream): a
// page's MCP client may send them to /mcp, and read the session's id.
var mcpHeaders = []string{"Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

// corsBaseExposed are the response headers, beyond the CORS-safelisted
// ones, a page may read.
var corsBaseExposed = []string{RequestIDHeader, "Retry-After", "WWW-Authenticate"}

// originRules are Options.CORSOrigins, WSOriginPatterns and AllowedHosts
// prepared for the front door.
type originRules struct {
	anyHost  bool            // AllowedHosts is nil or has "*"
	hosts    map[string]bool // accepted Host names, normalized (hostName)
	suffixes []string        // ".example.com" from "*.example.com"

	cors      bool            // some origin is listed: send CORS headers
	anyOrigin bool            // "*": every origin but null
	null      bool            // "null" is listed
	exact     map[string]bool // lower-case origins without patterns
	patterns  []originPattern

	allowHeaders map[string]bool // lower-case request header names a page may send
	allowList    string          // corsBaseHeaders and the forwarded headers, for Access-Control-Allow-Headers
	exposeList   string          // for Access-Control-Expose-Headers
	// mcpAllowList and mcpExposeList are /mcp's: those and MCP's own.
	mcpAllowList, mcpExposeList string
}

// originPattern is one listed origin with path.Match metacharacters. An
// empty scheme (the form of WSOriginPatterns) matches any scheme.
type originPattern struct {
	scheme string
	host   string // host[:port] pattern
}

func newOriginRules(o Options) *originRules {
	r := &originRules{anyHost: o.AllowedHosts == nil, hosts: map[string]bool{}, exact: map[string]bool{}}
	for _, h := range o.AllowedHosts {
		switch h = hostName(h); {
		case h == "*":
			r.anyHost = true
		case strings.HasPrefix(h, "*."):
			r.suffixes = append(r.suffixes, h[1:])
		default:
			r.hosts[h] = true
		}
	}
	for _, p := range append(append([]string(nil), o.CORSOrigins...), o.WSOriginPatterns...) {
		r.cors = true
		p = strings.ToLower(strings.TrimSpace(p))
		scheme, host, ok := strings.Cut(p, "://")
		if !ok {
			scheme, host = "", p
		}
		switch {
		case p == "*":
			r.anyOrigin = true
		case p == "null":
			r.null = true
		case ok && !strings.ContainsAny(host, `*?[\`):
			r.exact[p] = true
		default:
			r.patterns = append(r.patterns, originPattern{scheme: scheme, host: host})
		}
	}
	r.allowHeaders = map[string]bool{}
	allow := append(append([]string(nil), corsBaseHeaders...), o.Metadata.RequestHeaders...)
	for i, h := range allow {
		allow[i] = textproto.CanonicalMIMEHeaderKey(h)
		r.allowHeaders[strings.ToLower(h)] = true
	}
	r.allowList = strings.Join(allow, ", ")
	expose := append(append([]string(nil), corsBaseExposed...), o.Metadata.ResponseHeaders...)
	for i, h := range expose {
		expose[i] = textproto.CanonicalMIMEHeaderKey(h)
	}
	r.exposeList = strings.Join(expose, ", ")
	r.mcpAllowList = r.allowList + ", " + strings.Join(mcpHeaders, ", ")
	r.mcpExposeList = r.exposeList + ", " + mcpHeaders[0]
	return r
}

// hostName is the name of a Host header value or of an AllowedHosts
// entry: lower case, without port, IPv6 brackets or a final dot. It is ""
// when v is malformed.
func hostName(v string) string {
	name, port := v, ""
	if strings.HasPrefix(v, "[") {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return ""
		}
		name, port = v[1:end], v[end+1:]
		if port != "" && port[0] != ':' {
			return ""
		}
	} else if strings.Count(v, ":") == 1 {
		i := strings.IndexByte(v, ':')
		name, port = v[:i], v[i:]
	}
	if port != "" {
		if _, err := strconv.ParseUint(port[1:], 10, 16); err != nil {
			return ""
		}
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == "" || strings.ContainsAny(name, "/ \t@") {
		return ""
	}
	return name
}

// hostAllowed reports whether the Host header value h names a host the
// bridge answers for.
func (r *originRules) hostAllowed(h string) bool {
	if r.anyHost {
		return true
	}
	name := hostName(h)
	if name == "" {
		return false
	}
	if r.hosts[name] {
		return true
	}
	for _, s := range r.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// originAllowed reports whether the Origin header value o is listed.
func (r *originRules) originAllowed(o string) bool {
	if o == "null" {
		return r.null
	}
	scheme, host, ok := strings.Cut(strings.ToLower(o), "://")
	if !ok || scheme == "" || host == "" || strings.ContainsAny(host, "/?#@ \t\\") {
		return false // not an origin a browser sends
	}
	if r.anyOrigin || r.exact[scheme+"://"+host] {
		return true
	}
	for _, p := range r.patterns {
		if p.scheme != "" && p.scheme != scheme {
			continue
		}
		if m, _ := path.Match(p.host, host); m {
			return true
		}
	}
	return false
}

// sameOrigin reports whether the Origin o names the host and port the
// request was sent to (its Host header), whatever the scheme.
func sameOrigin(o, host string) bool {
	_, h, ok := strings.Cut(o, "://")
	return ok && h != "" && strings.EqualFold(h, host)
}

// checkOrigin runs the browser checks of the front door on the endpoints
// that serve data (/, /ws and /openrpc.json), before authentication: the
// Host must be one of AllowedHosts (against DNS rebinding); a POST / or
// GET /ws with an Origin must be same-origin or listed (against CSRF); a
// listed origin gets the CORS headers, and its preflight (OPTIONS with
// Access-Control-Request-Method) is answered here with 204. It reports
// whether the request goes on; when not, it has answered.
func (s *Server) checkOrigin(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if p != "/" && p != "/ws" && p != "/openrpc.json" && p != "/mcp" {
		return true // probes and metrics: see docs/security.md#browsers
	}
	rules := s.origins
	// An HTTP/1.0 request may leave Host out (HTTP/1.1 may not: net/http
	// answers it 400); browsers always send it, so one without carries no
	// DNS-rebinding risk, and old tools, scripts and health checkers
	// rightly leave it out. geth's vhosts check accepts it too.
	if !rules.hostAllowed(r.Host) && !(r.Host == "" && r.ProtoMajor == 1 && r.ProtoMinor == 0) {
		s.refuseOrigin(w, r, "host_not_allowed", "host", r.Host, "allowed_hosts")
		return false
	}
	h := w.Header()
	if rules.cors {
		h.Add("Vary", "Origin")
	}
	vs, present := r.Header["Origin"]
	if !present {
		return true // not a browser's cross-origin request: curl, scripts
	}
	origin := ""
	if len(vs) > 0 {
		origin = vs[0]
	}
	listed := len(vs) == 1 && rules.originAllowed(origin)
	same := len(vs) == 1 && sameOrigin(origin, r.Host)
	if listed {
		h.Set("Access-Control-Allow-Origin", origin)
		if p == "/mcp" {
			h.Set("Access-Control-Expose-Headers", rules.mcpExposeList)
		} else {
			h.Set("Access-Control-Expose-Headers", rules.exposeList)
		}
	}
	if r.Method == http.MethodOptions && p != "/ws" && r.Header.Get("Access-Control-Request-Method") != "" {
		switch {
		case listed:
			s.preflight(w, r)
			return false
		case !same:
			s.refuseOrigin(w, r, "origin_not_allowed", "origin", origin, "cors_origins")
			return false
		}
		return true // a same-origin preflight: answered as any OPTIONS
	}
	if listed || same || p == "/openrpc.json" {
		// A GET of the document changes nothing; without CORS headers a
		// page on another origin cannot read it.
		return true
	}
	s.refuseOrigin(w, r, "origin_not_allowed", "origin", origin, "cors_origins")
	return false
}

// preflight answers a CORS preflight of an allowed origin with 204. The
// allowed request headers are the fixed ones, the forwarded ones, and
// each Grpc-Metadata-* header the browser asks for.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request) {
	rules := s.origins
	h := w.Header()
	base := rules.allowList
	if r.URL.Path == "/mcp" {
		h.Set("Access-Control-Allow-Methods", mcpAllowMethods)
		base = rules.mcpAllowList
	} else {
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
	}
	// Built once, each name once, so that a preflight asking for many
	// costs its length (it is answered before authentication).
	var allow strings.Builder
	allow.WriteString(base)
	var added map[string]bool
	for _, v := range r.Header.Values("Access-Control-Request-Headers") {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			if len(name) > len(grpcMetadataPrefix) && strings.HasPrefix(name, "grpc-metadata-") &&
				ForbiddenHeader(name[len(grpcMetadataPrefix):]) == "" && !rules.allowHeaders[name] && !added[name] {
				if added == nil {
					added = make(map[string]bool)
				}
				added[name] = true
				allow.WriteString(", ")
				allow.WriteString(name)
			}
		}
	}
	h.Set("Access-Control-Allow-Headers", allow.String())
	h.Set("Access-Control-Max-Age", corsMaxAge)
	if strings.EqualFold(r.Header.Get("Access-Control-Request-Private-Network"), "true") {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	w.WriteHeader(http.StatusNoContent)
}
