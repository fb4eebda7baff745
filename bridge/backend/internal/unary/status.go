package unary

import (
	"context"
	"fmt"
	"net/http"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Statuses of the calls that Budget, Limit or MaxMessages end. Their
// messages begin with "grpc: ", as those of other statuses made here.
var (
	ErrOverBudget      = status.Error(codes.ResourceExhausted, "grpc: the response is larger than what is left of the call's budget")
	ErrTooManyMessages = status.Error(codes.ResourceExhausted, "grpc: the backend sent more messages than the call allows")
)

// errUnsent ends a call that never reached the backend, refused: it may
// be tried again (see Call.retry).
var errUnsent = status.Error(codes.Unavailable, "transport: the connection to the backend was lost before the call was sent")

// The messages of the statuses of calls whose stream the client reset
// for the backend's flow-control errors (RFC 9113 6.9): fixed texts,
// which bridge/backend tells its clients in its own words.
const (
	MsgZeroWindowUpdate = "transport: the backend sent a WINDOW_UPDATE of 0"
	MsgWindowOverflow   = "transport: the backend overflowed the stream's flow-control window"
)

// result is the status of a call whose stream has ended with trailers.
func (call *Call) result() error {
	bs := &call.block
	code := codes.Unknown // grpc-go's, for trailers without grpc-status
	if bs.hasCode {
		code = bs.code
	}
	if code == codes.OK {
		if call.msgs == 0 && !call.Stream || call.inMsg || call.prefixN != 0 {
			return status.Error(codes.Internal, "grpc: the backend ended a unary call without a whole response message")
		}
		if !call.deadline.IsZero() && time.Now().After(call.deadline) {
			// Too late: the caller has been told, or is about to be.
			return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		}
		return nil
	}
	call.Remote = true
	st := status.New(code, bs.message)
	if len(bs.details) == 1 {
		p := new(spb.Status)
		if proto.Unmarshal([]byte(bs.details[0]), p) == nil {
			if p.Code == int32(code) {
				st = status.FromProto(p)
			} else {
				st = status.Newf(codes.Internal, "grpc-status-details-bin mismatch: grpc-status=%v, grpc-message=%q, grpc-status-details-bin=%+v", code, bs.message, p)
			}
		}
	}
	return st.Err()
}

// httpStatusError is the status of a response that is not gRPC's, by its
// HTTP status, as grpc-go maps it.
func httpStatusError(code int, more string) error {
	c := codes.Unknown
	switch code {
	case http.StatusBadRequest:
		c = codes.Internal
	case http.StatusUnauthorized:
		c = codes.Unauthenticated
	case http.StatusForbidden:
		c = codes.PermissionDenied
	case http.StatusNotFound:
		c = codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		c = codes.Unavailable
	}
	msg := fmt.Sprintf("unexpected HTTP status code received from server: %d (%s)", code, http.StatusText(code))
	if more != "" {
		msg += "; " + more
	}
	return status.Error(c, msg)
}

// resetStatus is the status of a call whose stream the backend reset with
// code: grpc-go's http2ErrConvTab, and its message (handleRSTStream).
// deadline is the call's, if it has one.
func resetStatus(code uint32, deadline time.Time) error {
	c, msg := codes.Internal, "stream terminated by RST_STREAM with error code: "
	switch code {
	case errCodeFlowControl:
		c = codes.ResourceExhausted
	case errCodeRefusedStream:
		c = codes.Unavailable
	case errCodeCancel:
		c = codes.Canceled
		if !deadline.IsZero() && !deadline.After(time.Now()) {
			// A backend resets a call whose grpc-timeout has passed, as
			// grpc-go's does: its deadline, not a cancellation, ended it.
			c = codes.DeadlineExceeded
		}
	case errCodeEnhanceYourCalm:
		c = codes.ResourceExhausted
	case errCodeInadequateSec:
		c = codes.PermissionDenied
	default:
		if code > errCodeHTTP11Required {
			c = codes.Unknown // a code grpc-go has no entry for
		}
	}
	return status.Error(c, msg+rstCodeName(code))
}

func rstCodeName(code uint32) string {
	names := [...]string{"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
		"SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
		"COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"}
	if int(code) < len(names) {
		return names[code]
	}
	return fmt.Sprintf("unknown error code 0x%x", code) // as x/net/http2's ErrCode.String
}

// contextStatus is the status of a call whose context is done.
func contextStatus(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	}
	return status.Error(codes.Canceled, "context canceled")
}
