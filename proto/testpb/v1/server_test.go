package testv1_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

func newClient(t *testing.T) (testv1.TestServiceClient, *testv1.Server) {
	t.Helper()
	impl := testv1.NewServer()
	conn := testserver.Start(t, testserver.Options{Services: []testserver.Service{testserver.Test(impl)}, Reflection: testserver.ReflectionNone}).Conn()
	return testv1.NewTestServiceClient(conn), impl
}

func TestEcho(t *testing.T) {
	c, _ := newClient(t)
	in := &testv1.AllTypes{
		FInt64:        -1 << 60,
		FString:       "héllo",
		FEnum:         testv1.Color_COLOR_GREEN,
		RMessage:      []*testv1.Inner{{Name: "a", Big: 1}},
		MInt32Message: map[int32]*testv1.Inner{7: {Name: "seven"}},
		Choice:        &testv1.AllTypes_OString{OString: "o"},
		Tree:          &testv1.Tree{Value: "root", Children: []*testv1.Tree{{Value: "leaf"}}},
		OptInt32:      proto.Int32(0),
		WktDuration:   durationpb.New(1500 * time.Millisecond),
		WktStruct:     &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewBoolValue(true)}},
		WktEmpty:      &emptypb.Empty{},
	}
	got, err := c.Echo(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, in) {
		t.Errorf("got %v, want %v", got, in)
	}
}

func TestFail(t *testing.T) {
	c, _ := newClient(t)
	custom, _ := anypb.New(&testv1.CustomDetail{Reason: "custom", RetryAfterMs: 1500})
	errInfo, _ := anypb.New(&errdetails.ErrorInfo{Reason: "TEST", Domain: "test.v1"})
	badReq, _ := anypb.New(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "f_string", Description: "bad"}}})
	unknown := &anypb.Any{TypeUrl: "type.googleapis.com/nobody.knows.This", Value: []byte{1, 2, 3}}
	tests := []struct {
		name        string
		req         *testv1.FailRequest
		wantCode    codes.Code
		wantMessage string
		wantDetails []*anypb.Any
	}{
		{name: "ok", req: &testv1.FailRequest{}},
		{name: "plain", req: &testv1.FailRequest{Code: 5, Message: "gone"}, wantCode: codes.NotFound, wantMessage: "gone"},
		{name: "unauthenticated", req: &testv1.FailRequest{Code: 16, Message: "who"}, wantCode: codes.Unauthenticated, wantMessage: "who"},
		{
			name:        "all details",
			req:         &testv1.FailRequest{Code: 3, Message: "bad", Details: []string{"error_info", "bad_request", "custom", "unknown"}},
			wantCode:    codes.InvalidArgument,
			wantMessage: "bad",
			wantDetails: []*anypb.Any{errInfo, badReq, custom, unknown},
		},
		{name: "bad detail name", req: &testv1.FailRequest{Code: 13, Details: []string{"what"}}, wantCode: codes.InvalidArgument, wantMessage: `unknown detail "what"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Fail(t.Context(), tt.req)
			st := status.Convert(err)
			if st.Code() != tt.wantCode || st.Message() != tt.wantMessage {
				t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), tt.wantCode, tt.wantMessage)
			}
			got := st.Proto().GetDetails()
			if len(got) != len(tt.wantDetails) {
				t.Fatalf("got %d details, want %d", len(got), len(tt.wantDetails))
			}
			for i := range got {
				if !proto.Equal(got[i], tt.wantDetails[i]) {
					t.Errorf("detail %d: got %v, want %v", i, got[i], tt.wantDetails[i])
				}
			}
		})
	}
}

func TestSleep(t *testing.T) {
	c, _ := newClient(t)
	if _, err := c.Sleep(t.Context(), &testv1.SleepRequest{Duration: durationpb.New(time.Millisecond)}); err != nil {
		t.Errorf("short sleep: got %v, want nil", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Sleep(ctx, &testv1.SleepRequest{Duration: durationpb.New(time.Hour)})
	if got := status.Code(err); got != codes.DeadlineExceeded {
		t.Errorf("long sleep: got %v, want DeadlineExceeded", got)
	}
	_, err = c.Sleep(t.Context(), &testv1.SleepRequest{Duration: &durationpb.Duration{Seconds: 1, Nanos: -1}})
	if got := status.Code(err); got != codes.InvalidArgument {
		t.Errorf("invalid duration: got %v, want InvalidArgument", got)
	}
}

func TestCountPeek(t *testing.T) {
	c, impl := newClient(t)
	for want := int64(1); want <= 3; want++ {
		got, err := c.Count(t.Context(), &testv1.CountRequest{Key: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetCount() != want {
			t.Errorf("Count: got %d, want %d", got.GetCount(), want)
		}
	}
	for _, key := range []string{"a", "b"} {
		got, err := c.Peek(t.Context(), &testv1.CountRequest{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetCount() != impl.Calls(key) {
			t.Errorf("Peek(%s): got %d, want %d", key, got.GetCount(), impl.Calls(key))
		}
	}
	if got := impl.Calls("a"); got != 3 {
		t.Errorf("Calls: got %d, want 3", got)
	}
	if _, err := c.Old(t.Context(), &emptypb.Empty{}); err != nil {
		t.Errorf("Old: got %v, want nil", err)
	}
}
