package bridge

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Metadata chooses which HTTP request headers travel to the backend as gRPC
// metadata and which of the backend's metadata come back as HTTP headers.
// Its zero value forwards only Grpc-Metadata-* headers and returns nothing.
type Metadata struct {
	// RequestHeaders lists HTTP request headers (any case) forwarded to the
	// backend as gRPC metadata under their lower-case names. Headers named
	// Grpc-Metadata-<name> are always forwarded as <name>. Hop-by-hop and
	// reserved headers (see ForbiddenHeader) never are.
	RequestHeaders []string
	// ResponseHeaders lists gRPC response header and trailer names (any
	// case) returned as HTTP headers of the same name, for a single call
	// made with HTTP POST; a batch returns none. Empty returns none.
	ResponseHeaders []string
}

// grpcMetadataPrefix starts the headers forwarded under the rest of their
// name, as grpc-gateway does.
const grpcMetadataPrefix = "Grpc-Metadata-"

// hopByHop are the headers RFC 9110 section 7.6.1 keeps to one connection.
var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-authenticate": true, "proxy-authorization": true,
	"proxy-connection": true, "te": true, "trailer": true, "transfer-encoding": true, "upgrade": true,
}

// reserved are the headers HTTP/2 and gRPC set themselves.
var reserved = map[string]bool{
	"host": true, "content-length": true, "content-type": true, "user-agent": true,
}

// ForbiddenHeader tells why the header name (any case) can never be
// forwarded, or returns "" when it can: hop-by-hop headers belong to one
// connection, and host, content-*, user-agent, grpc-* and pseudo-headers
// are set by HTTP/2 and gRPC themselves. Configuration uses it to refuse
// such names early.
func ForbiddenHeader(name string) string {
	key := strings.ToLower(name)
	switch {
	case key == "":
		return "empty name"
	case hopByHop[key]:
		return "a hop-by-hop header is never forwarded"
	case reserved[key], strings.HasPrefix(key, "grpc-"), strings.HasPrefix(key, ":"):
		return "gRPC sets this header itself"
	}
	for i := range len(key) {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Sprintf("%q is not allowed in gRPC metadata names", c)
		}
	}
	return ""
}

// metadataRules is Metadata prepared for the hot path.
type metadataRules struct {
	forward  map[string]string // canonical HTTP name -> metadata key
	response []string          // metadata keys to return
}

func newMetadataRules(m Metadata) metadataRules {
	r := metadataRules{forward: make(map[string]string, len(m.RequestHeaders))}
	for _, name := range m.RequestHeaders {
		if ForbiddenHeader(name) == "" {
			r.forward[textproto.CanonicalMIMEHeaderKey(name)] = strings.ToLower(name)
		}
	}
	for _, name := range m.ResponseHeaders {
		if ForbiddenHeader(name) == "" {
			r.response = append(r.response, strings.ToLower(name))
		}
	}
	return r
}

// key returns the metadata key the HTTP header name travels under.
func (r *metadataRules) key(name string) (string, bool) {
	if len(name) > len(grpcMetadataPrefix) && strings.EqualFold(name[:len(grpcMetadataPrefix)], grpcMetadataPrefix) {
		key := strings.ToLower(name[len(grpcMetadataPrefix):])
		return key, ForbiddenHeader(key) == ""
	}
	key, ok := r.forward[name]
	return key, ok
}

// forwarded returns the metadata h forwards, nil when none. A -bin value
// that is not base64, or another value gRPC cannot carry, is the client's
// error.
func (r *metadataRules) forwarded(h http.Header) (metadata.MD, error) {
	var md metadata.MD
	var named map[string]bool // the headers Connection names
	looked := false
	for name, values := range h {
		key, ok := r.key(name)
		if !ok {
			continue
		}
		if !looked {
			named, looked = connectionOptions(h), true
		}
		if named[name] {
			continue
		}
		if md == nil {
			md = make(metadata.MD)
		}
		for _, v := range values {
			if strings.HasSuffix(key, "-bin") {
				b, err := decodeBinary(v)
				if err != nil {
					return nil, fmt.Errorf("the %s header is not base64", name)
				}
				v = string(b)
			} else if !printable(v) {
				return nil, fmt.Errorf("the %s header has characters gRPC metadata cannot carry", name)
			}
			md[key] = append(md[key], v)
		}
	}
	return md, nil
}

// connectionOptions returns the names of the headers of h its Connection
// header names, which makes them hop-by-hop too (RFC 9110 section
// 7.6.1), nil when none: one pass over its options, each looked up among
// the names of h, so that many options beside many headers cost their
// number, not its square.
func connectionOptions(h http.Header) map[string]bool {
	var named map[string]bool
	for _, v := range h["Connection"] {
		for opt := range strings.SplitSeq(v, ",") {
			opt = textproto.TrimString(opt)
			if opt == "" || strings.EqualFold(opt, "keep-alive") {
				continue // the usual one, whose header is never forwarded
			}
			if name := textproto.CanonicalMIMEHeaderKey(opt); h[name] != nil {
				if named == nil {
					named = make(map[string]bool)
				}
				named[name] = true
			}
		}
	}
	return named
}

// decodeBinary accepts base64 with or without padding, standard or URL
// alphabet, as gRPC implementations send it.
func decodeBinary(v string) ([]byte, error) {
	v = strings.TrimRight(strings.TrimSpace(v), "=")
	if strings.ContainsAny(v, "-_") {
		return base64.RawURLEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

func printable(v string) bool {
	for i := range len(v) {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// metadataFieldOverhead is what HTTP/2 adds to every field when it counts
// the size of a header list (RFC 9113, section 6.5.2).
const metadataFieldOverhead = 32

// MetadataSize is the size of md as a backend counts it against its
// header list limit: for every value, the length of the key, of the value
// as gRPC sends it (a -bin value in base64 without padding) and 32.
func MetadataSize(md metadata.MD) int64 {
	var n int64
	for key, values := range md {
		bin := strings.HasSuffix(key, "-bin")
		for _, v := range values {
			size := len(v)
			if bin {
				size = base64.RawStdEncoding.EncodedLen(size)
			}
			n += int64(len(key) + size + metadataFieldOverhead)
		}
	}
	return n
}

// metadataTooLarge says why a request whose metadata is size bytes is
// refused, over MaxMetadataBytes, and gives its error; "" and nil when it
// is within.
func (s *Server) metadataTooLarge(size int64) (string, *mapping.Error) {
	if size <= s.opts.MaxMetadataBytes {
		return "", nil
	}
	limit := strconv.FormatInt(s.opts.MaxMetadataBytes, 10)
	n := strconv.FormatInt(size, 10)
	reason := "request metadata is " + n + " bytes, over max_metadata_bytes (" + limit + ")"
	return reason, &mapping.Error{
		Code:    mapping.CodeInvalidRequest,
		Message: wire.MsgInvalidRequest + ": " + reason,
		Data:    []byte(`{"setting":"max_metadata_bytes","limit":` + limit + `,"size":` + n + `}`),
	}
}

// capture reports whether POST / asks the engine for the backend's
// response metadata of a single call: when ResponseHeaders lists any.
func (m *metadataRules) capture() bool { return len(m.response) > 0 }
