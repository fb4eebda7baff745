package backend_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

const rst = "stream terminated by RST_STREAM with error code: "

// TestStatusReset: a status the gRPC client made of the backend's
// RST_STREAM is answered with its code and a message naming the HTTP/2
// error code, not a fixed "the backend call failed" (issue 25 point 2:
// grpc-js resets every stream of a connection with INTERNAL_ERROR when
// grpc-go's client opens one past its limit); deadlines, cancellations
// and other local statuses keep their messages; a remote status passes
// as it came; nothing else of the client's text reaches the client.
func TestStatusReset(t *testing.T) {
	for _, tt := range []struct {
		name   string
		code   codes.Code
		msg    string
		remote bool
		want   string
	}{
		{"INTERNAL_ERROR", codes.Internal, rst + "INTERNAL_ERROR", false, "the backend reset the call's stream (RST_STREAM INTERNAL_ERROR)"},
		{"NO_ERROR", codes.Internal, rst + "NO_ERROR", false, "the backend reset the call's stream (RST_STREAM NO_ERROR)"},
		{"PROTOCOL_ERROR", codes.Internal, rst + "PROTOCOL_ERROR", false, "the backend reset the call's stream (RST_STREAM PROTOCOL_ERROR)"},
		{"REFUSED_STREAM", codes.Unavailable, rst + "REFUSED_STREAM", false, "the backend reset the call's stream (RST_STREAM REFUSED_STREAM)"},
		{"ENHANCE_YOUR_CALM", codes.ResourceExhausted, rst + "ENHANCE_YOUR_CALM", false, "the backend reset the call's stream (RST_STREAM ENHANCE_YOUR_CALM)"},
		{"FLOW_CONTROL_ERROR", codes.ResourceExhausted, rst + "FLOW_CONTROL_ERROR", false, "the backend reset the call's stream (RST_STREAM FLOW_CONTROL_ERROR)"},
		{"INADEQUATE_SECURITY", codes.PermissionDenied, rst + "INADEQUATE_SECURITY", false, "the backend reset the call's stream (RST_STREAM INADEQUATE_SECURITY)"},
		{"HTTP_1_1_REQUIRED", codes.Internal, rst + "HTTP_1_1_REQUIRED", false, "the backend reset the call's stream (RST_STREAM HTTP_1_1_REQUIRED)"},
		{"a code HTTP/2 does not define", codes.Unknown, rst + "unknown error code 0x42", false, "the backend reset the call's stream (RST_STREAM 0x42)"},
		{"CANCEL", codes.Canceled, rst + "CANCEL", false, "the backend cancelled the call"},
		{"CANCEL past the deadline", codes.DeadlineExceeded, rst + "CANCEL", false, "the call's deadline expired"},
		{"an unknown name", codes.Internal, rst + "SOMETHING_ELSE", false, "the backend call failed"},
		{"text after the name", codes.Internal, rst + "INTERNAL_ERROR and more", false, "the backend call failed"},
		{"a malformed unknown code", codes.Unknown, rst + "unknown error code 0xzz", false, "the backend call failed"},
		{"another local status", codes.Internal, "grpc: error while marshaling", false, "the backend call failed"},
		{"a connection failure", codes.Unavailable, "error reading from server: EOF", false, "the backend is unavailable"},
		{"the backend's own status", codes.Internal, rst + "INTERNAL_ERROR", true, rst + "INTERNAL_ERROR"},
		{"a stream window overflowed", codes.ResourceExhausted, "transport: the backend overflowed the stream's flow-control window", false, "the backend overflowed the call's HTTP/2 flow-control window (RST_STREAM FLOW_CONTROL_ERROR)"},
		{"a stream WINDOW_UPDATE of 0", codes.Internal, "transport: the backend sent a WINDOW_UPDATE of 0", false, "the backend sent a WINDOW_UPDATE of 0 on the call's stream (RST_STREAM PROTOCOL_ERROR)"},
		{"a message too large", codes.ResourceExhausted, "grpc: received message larger than max (5 vs. 4)", false, "a message is larger than the maximum message size"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := backend.Status(context.Background(), discard, "/test.v1.TestService/Echo", status.Error(tt.code, tt.msg), tt.remote)
			if st.Code() != tt.code || st.Message() != tt.want {
				t.Errorf("status %v %q: answered %v %q, want %v %q", tt.code, tt.msg, st.Code(), st.Message(), tt.code, tt.want)
			}
		})
	}
}

// TestStatusResetBothPaths makes a call to a backend that resets its
// stream with INTERNAL_ERROR (net/http's HTTP/2 server, whose handler
// aborts) through both invokers: each answers code 13 naming the reset.
func TestStatusResetBothPaths(t *testing.T) {
	target := serveH2C(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	for _, tc := range []struct {
		name   string
		direct bool
	}{{"grpc-go", false}, {"direct", true}} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := backend.Dial(target, backend.Options{Direct: tc.direct})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c := backend.GetCall()
			defer backend.PutCall(c)
			c.Method = "/test.v1.TestService/Echo"
			c.Request = append(c.Request, 0x0a, 0x01, 'x')
			err = backend.For(conn).Invoke(ctx, c)
			st := backend.Status(ctx, discard, c.Method, err, c.Remote)
			const want = "the backend reset the call's stream (RST_STREAM INTERNAL_ERROR)"
			if st.Code() != codes.Internal || st.Message() != want {
				t.Errorf("a call whose stream the backend reset with INTERNAL_ERROR (%v): answered %v %q, want %v %q", err, st.Code(), st.Message(), codes.Internal, want)
			}
		})
	}
}

// answered is what Status may answer for a local status: a fixed message,
// or one naming an HTTP/2 error code.
var answered = regexp.MustCompile(`^(the backend call failed|the call's deadline expired|the call was cancelled|the backend cancelled the call|` +
	`the backend is unavailable|a message is larger than the maximum message size|the backend does not serve this method|` +
	`the backend refused the call's credentials|the backend refused the call|` +
	`the backend reset the call's stream \(RST_STREAM ([A-Z_1]+|0x[0-9a-f]{1,8})\))$`)

// FuzzStatus: whatever the text of a local status, the client is answered
// with one of the fixed messages, never with that text.
func FuzzStatus(f *testing.F) {
	for _, s := range []string{rst + "INTERNAL_ERROR", rst + "unknown error code 0x42", rst, rst + "unknown error code 0x", "transport: x", ""} {
		f.Add(uint32(13), s)
	}
	f.Fuzz(func(t *testing.T, code uint32, msg string) {
		st := backend.Status(context.Background(), discard, "/m", status.Error(codes.Code(code%17), msg), false)
		if !answered.MatchString(st.Message()) {
			t.Fatalf("status %d %q answered %q", code%17, msg, st.Message())
		}
	})
}
