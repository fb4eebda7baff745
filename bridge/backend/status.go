package backend

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Status is the status to answer for err, the failure of a call of
// method: the backend's own when remote (it came in the backend's
// trailers), and otherwise, as the status was made on the bridge's side
// of the connection (dial and transport failures, local deadlines, a
// backend breaking the protocol) and carries the gRPC client's text, one
// with the same code and a fixed message, which names the HTTP/2 error
// code of a stream the backend reset (resetCode); that text goes to log.
func Status(ctx context.Context, log *slog.Logger, method string, err error, remote bool) *status.Status {
	st := status.Convert(err)
	if remote {
		return st
	}
	log.Warn("backend call failed", "method", method, "code", st.Code().String(), "error", st.Message())
	msg := localMessage(ctx, st.Code())
	if name, ok := resetCode(st); ok {
		msg = "the backend reset the call's stream (RST_STREAM " + name + ")"
	}
	return status.New(st.Code(), msg)
}

// rstPrefix begins the message of the status of a call whose stream the
// backend reset, as grpc-go makes it (http2Client.handleRSTStream) and the
// direct client after it: the HTTP/2 error code's name follows.
const rstPrefix = "stream terminated by RST_STREAM with error code: "

// resetCode returns the name of the HTTP/2 error code with which the
// backend reset the stream of the call whose status st is, when it did,
// so that the client learns why the call failed rather than a fixed
// "the backend call failed": a backend resets streams with
// INTERNAL_ERROR when it closes a connection on a connection error, as
// grpc-js does when grpc-go's client opens streams past its limit
// (docs/backends.md). Deadlines and cancellations keep their own
// messages: a stream reset with CANCEL past the call's deadline is code 4.
// Only the names HTTP/2 defines, and "unknown error code 0x..." (x/net's
// ErrCode.String) for others, are taken: the client sees nothing else of
// st's text.
func resetCode(st *status.Status) (string, bool) {
	switch st.Code() {
	case codes.DeadlineExceeded, codes.Canceled:
		return "", false
	}
	name, ok := strings.CutPrefix(st.Message(), rstPrefix)
	if !ok {
		return "", false
	}
	if slices.Contains(h2ErrCodes, name) {
		return name, true
	}
	hex, ok := strings.CutPrefix(name, "unknown error code 0x")
	if !ok || hex == "" || len(hex) > 8 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", false
	}
	return "0x" + hex, true
}

// h2ErrCodes are the names of the error codes of RFC 9113 section 7.
var h2ErrCodes = []string{"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
	"SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
	"COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"}

// localMessage is the fixed message of a status with code made on the
// bridge's side of the connection.
func localMessage(ctx context.Context, code codes.Code) string {
	switch code {
	case codes.DeadlineExceeded:
		return "the call's deadline expired"
	case codes.Canceled:
		if ctx.Err() == context.Canceled {
			return "the call was cancelled"
		}
		return "the backend cancelled the call"
	case codes.Unavailable:
		return "the backend is unavailable"
	case codes.ResourceExhausted:
		return "a message is larger than the maximum message size"
	case codes.Unimplemented:
		return "the backend does not serve this method"
	case codes.Unauthenticated:
		return "the backend refused the call's credentials"
	case codes.PermissionDenied:
		return "the backend refused the call"
	}
	return "the backend call failed"
}
