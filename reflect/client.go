package reflect

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// The reflection streams, newest first. v1alpha has the same messages as
// v1 (same fields, same numbers), so both are spoken with v1's Go types
// and everything after the stream is opened is shared.
var reflectionMethods = [...]string{
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
}

var reflectionStream = grpc.StreamDesc{StreamName: "ServerReflectionInfo", ServerStreams: true, ClientStreams: true}

// reflectionClient asks one backend's reflection service, one request at a
// time, over one stream. It is not safe for concurrent use.
type reflectionClient struct {
	conn   grpc.ClientConnInterface
	ctx    context.Context
	stream grpc.ClientStream
	cancel context.CancelFunc
}

// answerError is an error_response of the backend to one request: the
// stream is fine, the backend has no (good) answer to that request.
type answerError struct{ st *status.Status }

func (e *answerError) Error() string {
	return "the backend answered " + e.st.Code().String() + ": " + e.st.Message()
}
func (e *answerError) GRPCStatus() *status.Status { return e.st }

// transient reports whether the backend's error answer says to try again
// later rather than that it cannot answer.
func (e *answerError) transient() bool {
	switch e.st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// startReflection opens a reflection stream on conn and lists the
// backend's services: over v1, and over v1alpha when v1 is not served
// (Unimplemented, or Unavailable as some servers answer an unknown
// service). When neither is served the error wraps
// ErrReflectionUnsupported. The caller closes the client.
func startReflection(ctx context.Context, conn grpc.ClientConnInterface) (*reflectionClient, []string, error) {
	c := &reflectionClient{conn: conn, ctx: ctx}
	names, err := c.open(reflectionMethods[0])
	if err == nil {
		return c, names, nil
	}
	c.close()
	v1 := status.Code(err)
	if v1 != codes.Unimplemented && v1 != codes.Unavailable || ctx.Err() != nil {
		return nil, nil, discoveryError(ctx, "list services", err)
	}
	names, alphaErr := c.open(reflectionMethods[1])
	if alphaErr == nil {
		return c, names, nil
	}
	c.close()
	if v1 == codes.Unavailable {
		return nil, nil, discoveryError(ctx, "list services", err) // the backend is down
	}
	return nil, nil, discoveryError(ctx, "list services", alphaErr) // Unimplemented too: no reflection
}

// open starts the stream of method and asks for the list of services.
func (c *reflectionClient) open(method string) ([]string, error) {
	ctx, cancel := context.WithCancel(c.ctx)
	stream, err := c.conn.NewStream(ctx, &reflectionStream, method)
	if err != nil {
		cancel()
		return nil, err
	}
	c.stream, c.cancel = stream, cancel
	resp, err := c.ask(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{ListServices: "*"},
	})
	if err != nil {
		return nil, err
	}
	list := resp.GetListServicesResponse()
	if list == nil {
		return nil, errors.New("the backend answered the list of services with something else")
	}
	names := make([]string, len(list.GetService()))
	for i, s := range list.GetService() {
		names[i] = s.GetName()
	}
	return names, nil
}

// close ends the stream, if any.
func (c *reflectionClient) close() {
	if c.stream != nil {
		_ = c.stream.CloseSend()
		c.stream = nil
	}
	if c.cancel != nil {
		c.cancel() // releases the stream without waiting for the backend to end it
		c.cancel = nil
	}
}

// ask sends req and returns the backend's answer. An error_response is an
// *answerError; any other error is the stream's.
func (c *reflectionClient) ask(req *reflectionv1.ServerReflectionRequest) (*reflectionv1.ServerReflectionResponse, error) {
	if err := c.stream.SendMsg(req); err != nil {
		if errors.Is(err, io.EOF) {
			err = c.stream.RecvMsg(new(reflectionv1.ServerReflectionResponse)) // the stream's real error
		}
		return nil, err
	}
	resp := new(reflectionv1.ServerReflectionResponse)
	if err := c.stream.RecvMsg(resp); err != nil {
		return nil, err
	}
	if e := resp.GetErrorResponse(); e != nil {
		code := codes.Code(e.GetErrorCode())
		if code == codes.OK {
			code = codes.Unknown // an error answer is an error
		}
		return nil, &answerError{status.New(code, e.GetErrorMessage())}
	}
	return resp, nil
}

// files asks for req's files and returns them serialized. An answer that
// is not a list of files is an *answerError.
func (c *reflectionClient) files(req *reflectionv1.ServerReflectionRequest) ([][]byte, error) {
	resp, err := c.ask(req)
	if err != nil {
		return nil, err
	}
	fdr := resp.GetFileDescriptorResponse()
	if fdr == nil {
		return nil, &answerError{status.New(codes.Internal, "the answer holds no files")}
	}
	return fdr.GetFileDescriptorProto(), nil
}

func (c *reflectionClient) fileContainingSymbol(name string) ([][]byte, error) {
	return c.files(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: name},
	})
}

func (c *reflectionClient) fileByFilename(path string) ([][]byte, error) {
	return c.files(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_FileByFilename{FileByFilename: path},
	})
}
