package backend

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Status is the status to answer for err, the failure of a call of
// method: the backend's own when remote (it came in the backend's
// trailers), and otherwise, as the status was made on the bridge's side
// of the connection (dial and transport failures, local deadlines, a
// backend breaking the protocol) and carries the gRPC client's text, one
// with the same code and a fixed message; that text goes to log.
func Status(ctx context.Context, log *slog.Logger, method string, err error, remote bool) *status.Status {
	st := status.Convert(err)
	if remote {
		return st
	}
	log.Warn("backend call failed", "method", method, "code", st.Code().String(), "error", st.Message())
	return status.New(st.Code(), localMessage(ctx, st.Code()))
}

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
