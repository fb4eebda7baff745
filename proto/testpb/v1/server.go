package testv1

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Server implements TestServiceServer for the bridge's tests. It is safe
// for concurrent use; create it with NewServer.
type Server struct {
	UnimplementedTestServiceServer

	mu        sync.Mutex
	counts    map[string]int64
	cancelled map[string]chan struct{} // closed when the stream of that key sees its context end
}

// NewServer returns a Server with all counters at zero.
func NewServer() *Server {
	return &Server{counts: make(map[string]int64), cancelled: make(map[string]chan struct{})}
}

// Echo returns a copy of its request.
func (s *Server) Echo(_ context.Context, req *AllTypes) (*AllTypes, error) {
	return proto.CloneOf(req), nil
}

// Fail returns the status req asks for: code req.Code, message
// req.Message and one detail per req.Details entry ("error_info",
// "bad_request", "custom", "unknown"; others are INVALID_ARGUMENT).
// Code 0 succeeds.
func (s *Server) Fail(_ context.Context, req *FailRequest) (*emptypb.Empty, error) {
	if req.GetCode() == 0 {
		return &emptypb.Empty{}, nil
	}
	p := &spb.Status{Code: req.GetCode(), Message: req.GetMessage()}
	for _, name := range req.GetDetails() {
		d, err := detail(name)
		if err != nil {
			return nil, err
		}
		p.Details = append(p.Details, d)
	}
	return nil, status.FromProto(p).Err()
}

// detail builds the status detail called name.
func detail(name string) (*anypb.Any, error) {
	var m proto.Message
	switch name {
	case "error_info":
		m = &errdetails.ErrorInfo{Reason: "TEST", Domain: "test.v1"}
	case "bad_request":
		m = &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "f_string", Description: "bad"},
		}}
	case "custom":
		m = &CustomDetail{Reason: "custom", RetryAfterMs: 1500}
	case "unknown":
		return &anypb.Any{TypeUrl: "type.googleapis.com/nobody.knows.This", Value: []byte{1, 2, 3}}, nil
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown detail %q", name)
	}
	return anypb.New(m)
}

// Sleep waits for req.Duration, or until ctx ends, then returns ctx's
// status (DEADLINE_EXCEEDED or CANCELLED).
func (s *Server) Sleep(ctx context.Context, req *SleepRequest) (*emptypb.Empty, error) {
	if err := req.GetDuration().CheckValid(); req.GetDuration() != nil && err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	t := time.NewTimer(req.GetDuration().AsDuration())
	defer t.Stop()
	select {
	case <-t.C:
		return &emptypb.Empty{}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// Count adds one to the counter under req.Key and returns the new value.
func (s *Server) Count(_ context.Context, req *CountRequest) (*CountReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[req.GetKey()]++
	return &CountReply{Count: s.counts[req.GetKey()]}, nil
}

// Peek returns the counter under req.Key without changing it.
func (s *Server) Peek(_ context.Context, req *CountRequest) (*CountReply, error) {
	return &CountReply{Count: s.Calls(req.GetKey())}, nil
}

// Old does nothing; the method is deprecated.
func (s *Server) Old(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// Calls returns the counter under key, as Peek does, for tests.
func (s *Server) Calls(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[key]
}

// Cancelled returns a channel that is closed once a stream call carrying
// key has seen its context cancelled or expire, for tests that check that
// a cancellation reaches the backend.
func (s *Server) Cancelled(key string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelledLocked(key)
}

func (s *Server) cancelledLocked(key string) chan struct{} {
	ch, ok := s.cancelled[key]
	if !ok {
		ch = make(chan struct{})
		s.cancelled[key] = ch
	}
	return ch
}

// noteEnd records that the stream of key ended; when ctx has ended too,
// its Cancelled channel is closed.
func (s *Server) noteEnd(ctx context.Context, key string) {
	if ctx.Err() == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.cancelledLocked(key)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// ServerStream sends req.Count messages with seq 1..Count and a payload
// of req.PayloadSize bytes. With req.FailCode set it ends with that status
// after req.FailAfter messages; with req.Hold it waits for the call to be
// cancelled after the last message.
func (s *Server) ServerStream(req *StreamRequest, stream grpc.ServerStreamingServer[StreamReply]) error {
	ctx := stream.Context()
	defer s.noteEnd(ctx, req.GetKey())
	payload := strings.Repeat("x", int(max(req.GetPayloadSize(), 0)))
	for i := int32(1); i <= req.GetCount(); i++ {
		if req.GetFailCode() != 0 && i > req.GetFailAfter() {
			break
		}
		if err := stream.Send(&StreamReply{Seq: i, Payload: payload}); err != nil {
			return err
		}
	}
	if req.GetFailCode() != 0 {
		return status.Errorf(codes.Code(req.GetFailCode()), "failed after %d messages", req.GetFailAfter())
	}
	if req.GetHold() {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	return nil
}

// ClientStream reads items until the client half-closes and answers with
// their count and texts. An item with a fail code ends the call with that
// status at once.
func (s *Server) ClientStream(stream grpc.ClientStreamingServer[StreamItem, StreamSummary]) error {
	ctx := stream.Context()
	var key string
	defer func() { s.noteEnd(ctx, key) }()
	sum := &StreamSummary{}
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(sum)
		}
		if err != nil {
			return err
		}
		if item.GetKey() != "" {
			key = item.GetKey()
		}
		if item.GetFailCode() != 0 {
			return status.Errorf(codes.Code(item.GetFailCode()), "item %d failed", item.GetSeq())
		}
		sum.Count++
		sum.Texts = append(sum.Texts, item.GetText())
	}
}

// BidiStream answers every item with one of the same seq and text until
// the client half-closes. An item with a fail code ends the call with that
// status instead.
func (s *Server) BidiStream(stream grpc.BidiStreamingServer[StreamItem, StreamItem]) error {
	ctx := stream.Context()
	var key string
	defer func() { s.noteEnd(ctx, key) }()
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if item.GetKey() != "" {
			key = item.GetKey()
		}
		if item.GetFailCode() != 0 {
			return status.Errorf(codes.Code(item.GetFailCode()), "item %d failed", item.GetSeq())
		}
		if err := stream.Send(&StreamItem{Seq: item.GetSeq(), Text: item.GetText()}); err != nil {
			return err
		}
	}
}
