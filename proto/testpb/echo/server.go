package echo

import "context"

// Server answers Echo as the side-by-side benchmark's backend does.
type Server struct {
	UnimplementedEchoServiceServer
}

// Echo copies the request into the response and names the server.
func (Server) Echo(_ context.Context, req *EchoRequest) (*EchoResponse, error) {
	return &EchoResponse{
		Message:  req.GetMessage(),
		Sequence: req.GetSequence(),
		Tags:     req.GetTags(),
		Metadata: req.GetMetadata(),
		Priority: req.GetPriority(),
		ServedBy: "bridge-test",
	}, nil
}
