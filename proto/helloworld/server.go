package helloworld

import "context"

// Server is the demo implementation of GreeterServer. The zero value is
// ready to use.
type Server struct {
	UnimplementedGreeterServer
}

// SayHello greets req.Name, or the world when no name is given.
func (Server) SayHello(_ context.Context, req *HelloRequest) (*HelloReply, error) {
	name := req.GetName()
	if name == "" {
		name = "world"
	}
	return &HelloReply{Message: "Hello, " + name + "!"}, nil
}
