package unary

import (
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
)

// rstCases: RST_STREAM from the backend, before and after the response's
// headers, ends the call with the code of grpc-go's http2ErrConvTab
// (internal/transport/http_util.go), Unknown for an error code it has no
// entry for, and the message "stream terminated by RST_STREAM with error
// code: <code>" (http2Client.handleRSTStream).
func rstCases() []scriptedCase {
	var cases []scriptedCase
	for _, tt := range []struct {
		code http2.ErrCode
		want codes.Code
	}{
		{http2.ErrCodeNo, codes.Internal}, {http2.ErrCodeProtocol, codes.Internal}, {http2.ErrCodeInternal, codes.Internal},
		{http2.ErrCodeFlowControl, codes.ResourceExhausted}, {http2.ErrCodeSettingsTimeout, codes.Internal},
		{http2.ErrCodeStreamClosed, codes.Internal}, {http2.ErrCodeFrameSize, codes.Internal},
		{http2.ErrCodeRefusedStream, codes.Unavailable}, {http2.ErrCodeCancel, codes.Canceled},
		{http2.ErrCodeCompression, codes.Internal}, {http2.ErrCodeConnect, codes.Internal},
		{http2.ErrCodeEnhanceYourCalm, codes.ResourceExhausted}, {http2.ErrCodeInadequateSecurity, codes.PermissionDenied},
		{http2.ErrCodeHTTP11Required, codes.Internal}, {0x42, codes.Unknown},
	} {
		msg := "stream terminated by RST_STREAM with error code: " + tt.code.String()
		cases = append(cases,
			scriptedCase{name: tt.code.String(), write: func(s *h2stream) { s.fr.WriteRSTStream(s.id, tt.code) }, code: tt.want, msg: msg},
			scriptedCase{name: tt.code.String() + " after the headers", write: func(s *h2stream) {
				s.headers(false, ":status", "200", "content-type", "application/grpc")
				s.fr.WriteRSTStream(s.id, tt.code)
			}, code: tt.want, msg: msg})
	}
	return cases
}

// TestConformanceRSTStream: see rstCases; a REFUSED_STREAM is retried
// once by both clients (transparently), and fails when refused again.
func TestConformanceRSTStream(t *testing.T) {
	t.Parallel()
	cases := rstCases()
	target := serveCases(t, cases)
	t.Run("direct", func(t *testing.T) {
		runCases(t, newClient(t, target, Options{}), cases)
	})
	t.Run("grpc-go", func(t *testing.T) {
		runCasesGRPCGo(t, target, cases)
	})
}
