package unary

import (
	"testing"

	"google.golang.org/grpc/codes"
)

// fieldCases: header fields RFC 9113 section 8.2 calls malformed make the
// response malformed, a stream error of PROTOCOL_ERROR: grpc-go's client
// (x/net/http2's Framer.readMetaFrame, then http2Client.reader) fails the
// call with Internal and the Framer's reason, in headers as in trailers,
// whatever else the block holds. Fields the RFC allows pass.
func fieldCases() []scriptedCase {
	ok := []string{":status", "200", "content-type", "application/grpc"}
	// response writes headers, a message and trailers.
	response := func(headers, trailers []string) func(s *h2stream) {
		return func(s *h2stream) {
			s.headers(false, headers...)
			s.fr.WriteData(s.id, false, grpcBody("resp"))
			s.headers(true, trailers...)
		}
	}
	with := func(fields ...string) []string { return append(ok[:4:4], fields...) }
	good := []string{"grpc-status", "0"}
	return []scriptedCase{
		{name: "upper-case name", write: response(with("X-Upper", "1"), good), code: codes.Internal, msg: `invalid header field name "X-Upper"`},
		{name: "name with a space", write: response(with("x y", "1"), good), code: codes.Internal, msg: `invalid header field name "x y"`},
		{name: "empty name", write: response(with("", "1"), good), code: codes.Internal, msg: `invalid header field name ""`},
		{name: "upper-case name in trailers", write: response(ok, []string{"grpc-status", "0", "X-T", "1"}), code: codes.Internal, msg: `invalid header field name "X-T"`},
		{name: "value with NUL", write: response(with("x-v", "a\x00b"), good), code: codes.Internal, msg: `invalid header field value for "x-v"`},
		{name: "value with LF", write: response(with("x-v", "a\nb"), good), code: codes.Internal, msg: `invalid header field value for "x-v"`},
		{name: "value with DEL", write: response(with("x-v", "a\x7fb"), good), code: codes.Internal, msg: `invalid header field value for "x-v"`},
		{name: "grpc-message with CR", write: func(s *h2stream) { s.headers(true, with("grpc-status", "5", "grpc-message", "a\rb")...) },
			code: codes.Internal, msg: `invalid header field value for "grpc-message"`},
		{name: "pseudo-header after a regular one", write: response([]string{"content-type", "application/grpc", ":status", "200"}, good),
			code: codes.Internal, msg: "pseudo header field after regular"},
		{name: "unknown pseudo-header", write: response([]string{":status", "200", ":foo", "1", "content-type", "application/grpc"}, good),
			code: codes.Internal, msg: `invalid pseudo-header ":foo"`},
		{name: "duplicate :status", write: response([]string{":status", "200", ":status", "200", "content-type", "application/grpc"}, good),
			code: codes.Internal, msg: `duplicate pseudo-header ":status"`},
		{name: "request pseudo-header", write: response([]string{":status", "200", ":path", "/x", "content-type", "application/grpc"}, good),
			code: codes.Internal, msg: "mix of request and response pseudo headers"},
		// Allowed: tab and bytes past ASCII in values, digits and
		// punctuation of tokens in names, :status in trailers.
		{name: "tab and UTF-8 in a value", write: response(with("x-v", "a\tb é"), good), want: "resp"},
		{name: "token punctuation in a name", write: response(with("x-a.b_c!#$%&'*+^`|~", "1"), good), want: "resp"},
		{name: ":status in trailers", write: response(ok, []string{":status", "200", "grpc-status", "0"}), want: "resp"},
	}
}

// TestConformanceHeaderFields: see fieldCases; grpc-go's client gets the
// same outcomes from the same peer.
func TestConformanceHeaderFields(t *testing.T) {
	t.Parallel()
	cases := fieldCases()
	target := serveCases(t, cases)
	t.Run("direct", func(t *testing.T) {
		runCases(t, newClient(t, target, Options{}), cases)
	})
	t.Run("grpc-go", func(t *testing.T) {
		runCasesGRPCGo(t, target, cases)
	})
}
