package unary

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
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
	cases := midStreamCases()
	target := serveCases(t, cases)
	t.Run("direct", func(t *testing.T) {
		runCases(t, newClient(t, target, Options{}), cases)
	})
	t.Run("grpc-go", func(t *testing.T) {
		cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				var resp rawMsg
				err := cc.Invoke(ctx, "/t.S/"+strconv.Itoa(i), &rawMsg{}, &resp, grpc.ForceCodecV2(passCodec{}))
				wantStatus(t, err, tc.code, tc.msg)
			})
		}
	})
}
