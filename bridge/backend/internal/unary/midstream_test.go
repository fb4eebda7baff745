package unary

import (
	"testing"

	"google.golang.org/grpc/codes"
)

// midStreamCases: a second HEADERS block without END_STREAM, after the
// response's headers (and a message, or not), is Internal "a HEADERS
// frame cannot appear in the middle of a stream" (grpc-go's
// operateHeaders, which resets the stream with PROTOCOL_ERROR).
func midStreamCases() []scriptedCase {
	headers := func(s *h2stream) { s.headers(false, ":status", "200", "content-type", "application/grpc") }
	return []scriptedCase{
		{name: "headers, message, headers", write: func(s *h2stream) {
			headers(s)
			s.fr.WriteData(s.id, false, grpcBody("resp"))
			s.headers(false, "x-more", "1")
		}, code: codes.Internal, msg: "a HEADERS frame cannot appear in the middle of a stream"},
		{name: "headers twice", write: func(s *h2stream) {
			headers(s)
			s.headers(false, "grpc-status", "0")
		}, code: codes.Internal, msg: "a HEADERS frame cannot appear in the middle of a stream"},
	}
}

// TestConformanceMidStreamHeaders: see midStreamCases; grpc-go's client
// gets the same outcomes from the same peer.
func TestConformanceMidStreamHeaders(t *testing.T) {
	t.Parallel()
	cases := midStreamCases()
	target := serveCases(t, cases)
	t.Run("direct", func(t *testing.T) {
		runCases(t, newClient(t, target, Options{}), cases)
	})
	t.Run("grpc-go", func(t *testing.T) {
		runCasesGRPCGo(t, target, cases)
	})
}
