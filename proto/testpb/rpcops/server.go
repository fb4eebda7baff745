package rpcops

import "context"

// Server implements OpsServer for tests. The zero value is ready to use.
type Server struct {
	UnimplementedOpsServer
}

// Ping echoes the request's text.
func (Server) Ping(_ context.Context, req *PingRequest) (*PingReply, error) {
	return &PingReply{Text: req.GetText()}, nil
}
