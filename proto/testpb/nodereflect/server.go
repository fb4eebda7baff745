// Package nodereflect is a gRPC server reflection service answering as
// @grpc/reflection 1.0.4 (Node) does: every FileDescriptorProto it serves
// has an empty dependency list, whatever the file imports. New serves
// files so and nothing else, each answer carrying the file asked for
// alone; NewNode also mangles them as 1.0.4 does (see Quirk) and, as it
// does, answers with the file and every file it refers to. The tests of
// discovery use it to check that the bridge repairs such files.
package nodereflect

import (
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Full names of the reflection services Register can offer.
const (
	V1      = "grpc.reflection.v1.ServerReflection"
	V1Alpha = "grpc.reflection.v1alpha.ServerReflection"
)

// Server answers reflection requests from a fixed set of files. It is safe
// for concurrent use.
type Server struct {
	files    map[string][]byte   // serialized, dependencies stripped, by path
	symbols  map[string]string   // full name of every declaration → path
	refers   map[string][]string // path → the paths of the files it refers to, transitively (NewNode)
	services []string

	mu      sync.Mutex
	streams []string // full method of every stream served
}

// New serves files, listing every service they declare. Their dependency
// lists are removed (public and weak import indexes with them).
func New(files ...*descriptorpb.FileDescriptorProto) *Server {
	s := &Server{files: make(map[string][]byte), symbols: make(map[string]string)}
	for _, f := range files {
		f = proto.CloneOf(f)
		f.Dependency, f.PublicDependency, f.WeakDependency = nil, nil, nil
		b, err := proto.Marshal(f)
		if err != nil {
			panic(err)
		}
		s.files[f.GetName()] = b
		pkg := f.GetPackage()
		for _, sd := range f.GetService() {
			name := join(pkg, sd.GetName())
			s.services = append(s.services, name)
			s.symbols[name] = f.GetName()
			for _, md := range sd.GetMethod() {
				s.symbols[join(name, md.GetName())] = f.GetName()
			}
		}
		for _, x := range f.GetExtension() {
			s.symbols[join(pkg, x.GetName())] = f.GetName()
		}
		for _, e := range f.GetEnumType() {
			s.symbols[join(pkg, e.GetName())] = f.GetName()
		}
		for _, m := range f.GetMessageType() {
			s.addMessage(f.GetName(), pkg, m)
		}
	}
	slices.Sort(s.services)
	return s
}

// NewNode serves files as @grpc/reflection 1.0.4 does: Mangle(q, files),
// each answer carrying the file asked for and then every file it refers
// to, transitively (as the files' own dependency lists say, before they
// are stripped).
func NewNode(q Quirk, files ...*descriptorpb.FileDescriptorProto) *Server {
	s := New(Mangle(q, files...)...)
	served := func(f *descriptorpb.FileDescriptorProto) string {
		if q&MergePackages != 0 {
			return packagePath(f.GetPackage())
		}
		return f.GetName()
	}
	byPath := make(map[string]*descriptorpb.FileDescriptorProto)
	for _, f := range files {
		byPath[f.GetName()] = f
	}
	direct := make(map[string][]string)
	for _, f := range files {
		from := served(f)
		for _, dep := range f.GetDependency() {
			if d, ok := byPath[dep]; ok && served(d) != from && !slices.Contains(direct[from], served(d)) {
				direct[from] = append(direct[from], served(d))
			}
		}
	}
	s.refers = make(map[string][]string)
	for from := range direct {
		seen := map[string]bool{from: true}
		queue := slices.Clone(direct[from])
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if seen[p] {
				continue
			}
			seen[p] = true
			s.refers[from] = append(s.refers[from], p)
			queue = append(queue, direct[p]...)
		}
	}
	return s
}

// Protos returns the FileDescriptorProtos of fds.
func Protos(fds ...protoreflect.FileDescriptor) []*descriptorpb.FileDescriptorProto {
	out := make([]*descriptorpb.FileDescriptorProto, len(fds))
	for i, fd := range fds {
		out[i] = protodesc.ToFileDescriptorProto(fd)
	}
	return out
}

func (s *Server) addMessage(path, scope string, m *descriptorpb.DescriptorProto) {
	name := join(scope, m.GetName())
	s.symbols[name] = path
	for _, e := range m.GetEnumType() {
		s.symbols[join(name, e.GetName())] = path
	}
	for _, x := range m.GetExtension() {
		s.symbols[join(name, x.GetName())] = path
	}
	for _, n := range m.GetNestedType() {
		s.addMessage(path, name, n)
	}
}

func join(scope, name string) string {
	if scope == "" {
		return name
	}
	return scope + "." + name
}

// Register offers the reflection services named (V1, V1Alpha) on r. Both
// speak the same messages, so one handler serves them.
func (s *Server) Register(r grpc.ServiceRegistrar, services ...string) {
	for _, name := range services {
		r.RegisterService(&grpc.ServiceDesc{
			ServiceName: name,
			HandlerType: (*any)(nil),
			Streams: []grpc.StreamDesc{{
				StreamName: "ServerReflectionInfo", ServerStreams: true, ClientStreams: true,
				Handler: func(_ any, stream grpc.ServerStream) error { return s.serve(stream) },
			}},
		}, struct{}{})
	}
}

// Streams returns the full method names of the streams served so far.
func (s *Server) Streams() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.streams)
}

func (s *Server) serve(stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	s.mu.Lock()
	s.streams = append(s.streams, method)
	s.mu.Unlock()
	for {
		req := new(reflectionv1.ServerReflectionRequest)
		if err := stream.RecvMsg(req); err != nil {
			return nil // the client is done
		}
		resp := &reflectionv1.ServerReflectionResponse{ValidHost: req.GetHost(), OriginalRequest: req}
		switch r := req.GetMessageRequest().(type) {
		case *reflectionv1.ServerReflectionRequest_ListServices:
			list := &reflectionv1.ListServiceResponse{}
			for _, name := range s.services {
				list.Service = append(list.Service, &reflectionv1.ServiceResponse{Name: name})
			}
			list.Service = append(list.Service, &reflectionv1.ServiceResponse{Name: V1})
			resp.MessageResponse = &reflectionv1.ServerReflectionResponse_ListServicesResponse{ListServicesResponse: list}
		case *reflectionv1.ServerReflectionRequest_FileByFilename:
			s.file(resp, r.FileByFilename)
		case *reflectionv1.ServerReflectionRequest_FileContainingSymbol:
			s.file(resp, s.symbols[r.FileContainingSymbol])
		default:
			resp.MessageResponse = notFound()
		}
		if err := stream.SendMsg(resp); err != nil {
			return err
		}
	}
}

// file answers resp with the file at path, as its dependency list is
// empty alone (New) or with the files it refers to (NewNode), or
// NOT_FOUND.
func (s *Server) file(resp *reflectionv1.ServerReflectionResponse, path string) {
	b, ok := s.files[path]
	if !ok {
		resp.MessageResponse = notFound()
		return
	}
	answer := [][]byte{b}
	for _, p := range s.refers[path] {
		answer = append(answer, s.files[p])
	}
	resp.MessageResponse = &reflectionv1.ServerReflectionResponse_FileDescriptorResponse{
		FileDescriptorResponse: &reflectionv1.FileDescriptorResponse{FileDescriptorProto: answer},
	}
}

func notFound() *reflectionv1.ServerReflectionResponse_ErrorResponse {
	return &reflectionv1.ServerReflectionResponse_ErrorResponse{ErrorResponse: &reflectionv1.ErrorResponse{
		ErrorCode: int32(codes.NotFound), ErrorMessage: "not found",
	}}
}
