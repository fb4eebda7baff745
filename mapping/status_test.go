package mapping

import (
	"encoding/base64"
	"testing"

	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestCodeName(t *testing.T) {
	tests := []struct {
		code codes.Code
		want string
	}{
		{codes.OK, "OK"},
		{codes.Canceled, "CANCELLED"},
		{codes.Unknown, "UNKNOWN"},
		{codes.InvalidArgument, "INVALID_ARGUMENT"},
		{codes.DeadlineExceeded, "DEADLINE_EXCEEDED"},
		{codes.NotFound, "NOT_FOUND"},
		{codes.AlreadyExists, "ALREADY_EXISTS"},
		{codes.PermissionDenied, "PERMISSION_DENIED"},
		{codes.ResourceExhausted, "RESOURCE_EXHAUSTED"},
		{codes.FailedPrecondition, "FAILED_PRECONDITION"},
		{codes.Aborted, "ABORTED"},
		{codes.OutOfRange, "OUT_OF_RANGE"},
		{codes.Unimplemented, "UNIMPLEMENTED"},
		{codes.Internal, "INTERNAL"},
		{codes.Unavailable, "UNAVAILABLE"},
		{codes.DataLoss, "DATA_LOSS"},
		{codes.Unauthenticated, "UNAUTHENTICATED"},
		{codes.Code(17), "CODE(17)"},
		{codes.Code(99), "CODE(99)"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := CodeName(tc.code); got != tc.want {
				t.Errorf("CodeName(%d) = %q, want %q", tc.code, got, tc.want)
			}
		})
	}
}

func TestStatusErrorCodes(t *testing.T) {
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		t.Run(CodeName(c), func(t *testing.T) {
			got := StatusError(status.New(c, "boom "+c.String()), NewResolver(nil))
			if got.Code != Code(c) {
				t.Errorf("got code %d, want %d", got.Code, c)
			}
			if got.Code >= -32768 && got.Code <= -32000 {
				t.Errorf("got reserved code %d", got.Code)
			}
			if want := "boom " + c.String(); got.Message != want {
				t.Errorf("got message %q, want %q", got.Message, want)
			}
			want := `{"status": "` + CodeName(c) + `", "details": []}`
			if !jsonEqual(t, got.Data, []byte(want)) {
				t.Errorf("got data %s, want %s", got.Data, want)
			}
		})
	}
}

func TestStatusErrorEdges(t *testing.T) {
	tests := []struct {
		name     string
		st       *status.Status
		wantCode Code
		wantMsg  string
		wantData string
	}{
		{"empty message", status.New(codes.NotFound, ""), 5, "NOT_FOUND", `{"status": "NOT_FOUND", "details": []}`},
		{"message verbatim", status.New(codes.Internal, "  a \"quoted\" <message>\n"), 13, "  a \"quoted\" <message>\n", `{"status": "INTERNAL", "details": []}`},
		{"unknown code 99", status.New(codes.Code(99), "odd"), 2, "odd", `{"status": "UNKNOWN", "details": []}`},
		{"unknown code 17 without message", status.New(codes.Code(17), ""), 2, "UNKNOWN", `{"status": "UNKNOWN", "details": []}`},
		{"OK is not an error", status.New(codes.OK, ""), 2, "UNKNOWN", `{"status": "UNKNOWN", "details": []}`},
		{"nil status", nil, 2, "UNKNOWN", `{"status": "UNKNOWN", "details": []}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := StatusError(tc.st, nil)
			if got.Code != tc.wantCode || got.Message != tc.wantMsg {
				t.Errorf("got %d %q, want %d %q", got.Code, got.Message, tc.wantCode, tc.wantMsg)
			}
			if !jsonEqual(t, got.Data, []byte(tc.wantData)) {
				t.Errorf("got data %s, want %s", got.Data, tc.wantData)
			}
		})
	}
}

func TestStatusErrorDetails(t *testing.T) {
	b := loadBackend(t)

	// rpc.ops.PingReply exists only in the backend's files: no generated
	// code of it is linked into this test.
	if _, err := protoregistry.GlobalTypes.FindMessageByName("rpc.ops.PingReply"); err == nil {
		t.Fatal("rpc.ops.PingReply is a global type, want it known only to the backend")
	}
	pingType, err := b.types.FindMessageByName("rpc.ops.PingReply")
	if err != nil {
		t.Fatal(err)
	}
	ping := pingType.New()
	ping.Set(ping.Descriptor().Fields().ByName("text"), pingValue("pong"))

	unknownBytes := []byte{0x0a, 0x03, 'a', 'b', 'c'}
	tests := []struct {
		name    string
		details []*anypb.Any
		res     Resolver
		want    string
	}{
		{"error info", []*anypb.Any{mustAny(t, &errdetails.ErrorInfo{Reason: "QUOTA", Domain: "example.com", Metadata: map[string]string{"k": "v"}})}, NewResolver(nil),
			`[{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "QUOTA", "domain": "example.com", "metadata": {"k": "v"}}]`},
		{"bad request", []*anypb.Any{mustAny(t, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "note.title", Description: "empty"}}})}, NewResolver(b.types),
			`[{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "note.title", "description": "empty"}]}]`},
		{"custom detail through backend", []*anypb.Any{mustAny(t, &testv1.CustomDetail{Reason: "slow down", RetryAfterMs: 1500})}, NewResolver(b.types),
			`[{"@type": "type.googleapis.com/test.v1.CustomDetail", "reason": "slow down", "retryAfterMs": "1500"}]`},
		{"backend-only type", []*anypb.Any{mustAny(t, ping.Interface())}, NewResolver(b.types),
			`[{"@type": "type.googleapis.com/rpc.ops.PingReply", "text": "pong"}]`},
		{"backend-only type without backend", []*anypb.Any{mustAny(t, ping.Interface())}, NewResolver(nil),
			`[{"@type": "type.googleapis.com/rpc.ops.PingReply", "value": "` + base64.StdEncoding.EncodeToString(mustMarshal(t, ping.Interface())) + `"}]`},
		{"unknown type", []*anypb.Any{{TypeUrl: "type.googleapis.com/no.such.Detail", Value: unknownBytes}}, NewResolver(b.types),
			`[{"@type": "type.googleapis.com/no.such.Detail", "value": "CgNhYmM="}]`},
		{"bytes that do not parse", []*anypb.Any{{TypeUrl: "type.googleapis.com/google.rpc.ErrorInfo", Value: []byte{0xff}}}, NewResolver(nil),
			`[{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "value": "/w=="}]`},
		{"several in order", []*anypb.Any{
			mustAny(t, &errdetails.ErrorInfo{Reason: "A"}),
			{TypeUrl: "x/y.Z", Value: nil},
			mustAny(t, &testv1.CustomDetail{Reason: "C"}),
		}, NewResolver(b.types),
			`[{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "A"}, {"@type": "x/y.Z", "value": ""}, {"@type": "type.googleapis.com/test.v1.CustomDetail", "reason": "C"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := status.FromProto(&spb.Status{Code: int32(codes.ResourceExhausted), Message: "slow", Details: tc.details})
			got := StatusError(st, tc.res)
			if got.Code != 8 || got.Message != "slow" {
				t.Errorf("got %d %q, want 8 \"slow\"", got.Code, got.Message)
			}
			want := `{"status": "RESOURCE_EXHAUSTED", "details": ` + tc.want + `}`
			if !jsonEqual(t, got.Data, []byte(want)) {
				t.Errorf("got data %s, want %s", got.Data, want)
			}
		})
	}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
