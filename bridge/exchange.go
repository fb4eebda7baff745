package bridge

// This file is the one place a request's headers become the Exchange its
// calls run with (POST / and GET /ws alike): forwarded metadata, the
// identity, request id, trace context and x-forwarded-for the bridge adds,
// and the timeout. Its refusals are the front door's (exchangeOf,
// front.go).

import (
	"net"
	"net/http"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// exchange is what the front door learned about one request: the
// Exchange its calls run with, whose Caller holds the identity.
type exchange struct {
	dispatch.Exchange
}

// caller is the identity of x, nil when authentication is off (or x is).
func (x *exchange) caller() *auth.Caller {
	if x == nil {
		return nil
	}
	return auth.CallerOf(&x.Exchange)
}

// fill completes x, the exchange of a request with headers h from peer
// (its RemoteAddr), with what its calls carry: the metadata h forwards
// and the bridge adds (identity, request id, trace context,
// x-forwarded-for) and the timeout it asks for. An error names the header
// the client got wrong. It is the one place headers become an Exchange,
// for POST /, GET /ws and MCP's tool calls alike.
func (s *Server) fill(h http.Header, peer string, x *exchange) error {
	md, err := s.md.forwarded(h)
	if err != nil {
		return err
	}
	d, ok, err := s.askedTimeout(h) // dispatch holds it to max_call_timeout
	if err != nil {
		return err
	}
	if ok {
		x.Timeout = d
	}
	x.Metadata = s.outgoing(md, x, h, peer)
	return nil
}

// outgoing adds to md, the metadata a request forwards, what the bridge
// itself tells the backend: the identity and the claims of its JWT
// (always replacing whatever a client forwarded under those keys), the
// request id, the W3C trace context
// and the client's address appended to x-forwarded-for, as a proxy does.
// peer is the request's RemoteAddr.
func (s *Server) outgoing(md metadata.MD, x *exchange, h http.Header, peer string) metadata.MD {
	if md == nil {
		md = make(metadata.MD, 2)
	}
	key := s.opts.IdentityMetadataKey
	delete(md, key)
	if a := s.opts.Auth; a != nil {
		for _, k := range a.ClaimKeys() {
			delete(md, k)
		}
	}
	if id := x.caller(); id != nil {
		md[key] = []string{id.Name()}
		for kv := id.Metadata(); len(kv) >= 2; kv = kv[2:] {
			md[kv[0]] = []string{kv[1]}
		}
	}
	md["x-request-id"] = []string{x.RequestID}
	delete(md, "traceparent")
	delete(md, "tracestate")
	if tp := h.Get("Traceparent"); validTraceparent(tp) {
		md["traceparent"] = []string{tp}
		if ts, ok := validTracestate(h.Values("Tracestate")); ok {
			md["tracestate"] = []string{ts}
		}
	}
	md[xForwardedFor] = forwardedFor(md[xForwardedFor], peer)
	return md
}

const xForwardedFor = "x-forwarded-for"

// forwardedFor is the x-forwarded-for value of a request from peer (a
// RemoteAddr, host:port) that forwarded the values prior: the client's
// chain, which the backend cannot trust, then the address the bridge saw,
// last, as proxies append it.
func forwardedFor(prior []string, peer string) []string {
	host, _, err := net.SplitHostPort(peer)
	if err != nil {
		host = peer
	}
	if host == "" {
		return prior
	}
	if len(prior) == 0 {
		return []string{host}
	}
	return []string{strings.Join(prior, ", ") + ", " + host}
}

// validTracestate joins the Tracestate header's values into one and checks
// it against the W3C trace context grammar: at most 32 list members of
// key=value, keys of lower-case letters, digits and _-*/ (with one @ for a
// tenant), values of printable ASCII without comma or equals sign, 512
// bytes at most. Anything else is not forwarded.
func validTracestate(values []string) (string, bool) {
	if len(values) == 0 {
		return "", false
	}
	v := strings.Join(values, ",")
	if len(v) > 512 {
		return "", false
	}
	members := 0
	for m := range strings.SplitSeq(v, ",") {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue // empty list members are allowed
		}
		key, value, ok := strings.Cut(m, "=")
		if !ok || !validTracestateKey(key) || !validTracestateValue(value) {
			return "", false
		}
		if members++; members > 32 {
			return "", false
		}
	}
	return v, members > 0
}

func validTracestateKey(k string) bool {
	tenant, system, multi := strings.Cut(k, "@")
	if !multi {
		return len(k) <= 256 && k != "" && 'a' <= k[0] && k[0] <= 'z' && keyChars(k)
	}
	return tenant != "" && len(tenant) <= 241 && (tenant[0] >= 'a' && tenant[0] <= 'z' || tenant[0] >= '0' && tenant[0] <= '9') && keyChars(tenant) &&
		system != "" && len(system) <= 14 && 'a' <= system[0] && system[0] <= 'z' && keyChars(system)
}

func keyChars(k string) bool {
	for i := range len(k) {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/') {
			return false
		}
	}
	return true
}

func validTracestateValue(v string) bool {
	if v == "" || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := range len(v) {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

// validTraceparent checks the W3C trace context header: version, 32 hex
// trace id, 16 hex parent id and 2 hex flags, lower case, ids not all zero.
func validTraceparent(v string) bool {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || v[:2] == "ff" {
		return false
	}
	if v[:2] == "00" && len(v) != 55 || len(v) > 55 && v[55] != '-' {
		return false
	}
	for _, f := range []string{v[:2], v[3:35], v[36:52], v[53:55]} {
		for i := range len(f) {
			if c := f[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return v[3:35] != "00000000000000000000000000000000" && v[36:52] != "0000000000000000"
}

// exchangeOf fills x from the headers h of a request from peer (step 5;
// see fill), or refuses the request: 400 for a header the client got
// wrong, 431 for metadata over MaxMetadataBytes.
func (s *Server) exchangeOf(h http.Header, peer string, x *exchange) *refusal {
	if err := s.fill(h, peer, x); err != nil {
		return &refusal{status: http.StatusBadRequest, reason: "bad_header", detail: err.Error(), err: wire.InvalidRequest(err.Error())}
	}
	if reason, e := s.metadataTooLarge(MetadataSize(x.Metadata)); e != nil {
		return &refusal{status: http.StatusRequestHeaderFieldsTooLarge, reason: "metadata_too_large", detail: reason, err: e}
	}
	return nil
}
