package bridge

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// This file is the bridge as an OAuth 2.0 protected resource (RFC 9728,
// and MCP's authorization, which builds on it) when JWTs authenticate
// callers: the metadata document that tells clients where tokens come
// from, served unauthenticated at /.well-known/oauth-protected-resource
// (and that path followed by the resource's, and by /mcp), which the
// challenge of every 401 names in its resource_metadata.

// wellKnownResource is the path of the protected resource metadata.
const wellKnownResource = "/.well-known/oauth-protected-resource"

// jwt reports whether JWTs of identity providers authenticate callers.
func (s *Server) jwt() bool { return s.opts.Auth != nil && len(s.opts.Auth.Issuers()) > 0 }

// resource is the bridge's resource identifier (RFC 8707, RFC 9728):
// Options.Resource, else the first audience of the first provider when
// it is an http(s) URL, else the origin r reached.
func (s *Server) resource(r *http.Request) string {
	if s.opts.Resource != "" {
		return s.opts.Resource
	}
	if ps := s.opts.Auth.Providers(); len(ps) > 0 {
		if aud := ps[0].Audiences()[0]; httpURL(aud) {
			return aud
		}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/"
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
}

// resourceMetadataURL is where the metadata of resource is served (RFC
// 9728 section 3.1): the well-known path between its host and its path.
func resourceMetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return resource
	}
	return u.Scheme + "://" + u.Host + wellKnownResource + strings.TrimSuffix(u.EscapedPath(), "/")
}

// isResourceMetadata reports whether r asks for a path the metadata is
// served at: the well-known path alone, followed by /mcp, or followed by
// the path of the resource (RFC 9728 section 3.1), whether that is
// Options.Resource or the first audience: the path every 401's
// resource_metadata names.
func (s *Server) isResourceMetadata(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, wellKnownResource)
	if !ok || !s.jwt() {
		return false
	}
	if rest == "" || rest == "/" || rest == "/mcp" {
		return true
	}
	u, err := url.Parse(s.resource(r))
	return err == nil && rest == strings.TrimSuffix(u.Path, "/")
}

// resourceMetadata is the protected resource metadata document.
type resourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	ResourceName           string   `json:"resource_name"`
}

// authorizationServers are the issuers that are authorization servers'
// issuer identifiers, https (or http) URLs (RFC 8414 section 2): a
// client takes the first to find where tokens come from, and one that is
// no URL (an old Kubernetes issuer, "kubernetes/serviceaccount") would
// stop it.
func authorizationServers(issuers []string) []string {
	var out []string
	for _, iss := range issuers {
		if httpURL(iss) {
			out = append(out, iss)
		}
	}
	return out
}

// serveResourceMetadata serves the metadata document to anyone (it says
// only where tokens come from), cacheable and readable by any page, on
// GET and HEAD; a CORS preflight of a GET is answered too.
func (s *Server) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	if m := r.Header.Get("Access-Control-Request-Method"); r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		(m == http.MethodGet || m == http.MethodHead) {
		// A page's preflight: MCP clients in browsers send
		// MCP-Protocol-Version with the fetch (MCP 2025-11-25).
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", "GET, HEAD")
		h.Set("Access-Control-Allow-Headers", "Mcp-Protocol-Version")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"error":"method not allowed"}`))
		return
	}
	doc, _ := json.Marshal(resourceMetadata{ // strings only: it cannot fail
		Resource:               s.resource(r),
		AuthorizationServers:   authorizationServers(s.opts.Auth.Issuers()),
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        s.opts.Scopes,
		ResourceName:           "grpc-jsonrpc-bridge",
	})
	h := w.Header()
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, doc)
}
