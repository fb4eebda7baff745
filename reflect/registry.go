package reflect

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// reflectionPackage prefixes the reflection services, which are never callable.
const reflectionPackage = "grpc.reflection."

// Registry is the immutable set of callable methods of one backend, with the
// files that describe them and dynamic types for every message, enum and
// extension of those files. It is safe for concurrent use.
type Registry struct {
	files    *protoregistry.Files
	types    *protoregistry.Types
	services []protoreflect.ServiceDescriptor
	methods  []protoreflect.MethodDescriptor
	byName   map[string]protoreflect.MethodDescriptor
	skipped  []SkippedService // services discovery had to leave out
	repairs  []string         // what discovery repaired in the backend's files
}

// Skipped lists the services the backend lists but discovery left out
// because it could not get or use their descriptors.
func (r *Registry) Skipped() []SkippedService { return r.skipped }

// Repairs lists what discovery repaired in the files the backend gave
// (see docs/backends.md), a sentence each, such as
// "test_v1.proto: map entries renamed: test.v1.AllTypes.M_string_int64 → MStringInt64Entry";
// nothing for a backend whose files build as they are.
func (r *Registry) Repairs() []string { return r.repairs }

// NewRegistry builds a registry of every service declared in files except
// grpc.reflection.*. files must not be changed afterwards.
func NewRegistry(files *protoregistry.Files) (*Registry, error) {
	return newRegistry(files, func(protoreflect.ServiceDescriptor) bool { return true })
}

// newRegistry is NewRegistry keeping only the services for which keep is true.
func newRegistry(files *protoregistry.Files, keep func(protoreflect.ServiceDescriptor) bool) (*Registry, error) {
	if files == nil {
		return nil, errors.New("reflect: nil files")
	}
	types, err := newTypes(files)
	if err != nil {
		return nil, err
	}
	r := &Registry{
		files:  files,
		types:  types,
		byName: make(map[string]protoreflect.MethodDescriptor),
	}
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		svcs := fd.Services()
		for i := range svcs.Len() {
			sd := svcs.Get(i)
			if strings.HasPrefix(string(sd.FullName()), reflectionPackage) || !keep(sd) {
				continue
			}
			r.services = append(r.services, sd)
			mds := sd.Methods()
			for j := range mds.Len() {
				md := mds.Get(j)
				r.methods = append(r.methods, md)
				r.byName[string(md.FullName())] = md
			}
		}
		return true
	})
	slices.SortFunc(r.services, func(a, b protoreflect.ServiceDescriptor) int {
		return strings.Compare(string(a.FullName()), string(b.FullName()))
	})
	slices.SortFunc(r.methods, func(a, b protoreflect.MethodDescriptor) int {
		return strings.Compare(string(a.FullName()), string(b.FullName()))
	})
	return r, nil
}

// Methods returns every callable method sorted by full name, in a new slice.
func (r *Registry) Methods() []protoreflect.MethodDescriptor { return slices.Clone(r.methods) }

// Method finds a method by its full name, such as "helloworld.Greeter.SayHello".
func (r *Registry) Method(fullName string) (protoreflect.MethodDescriptor, bool) {
	md, ok := r.byName[fullName]
	return md, ok
}

// Services returns every callable service sorted by full name, in a new slice.
func (r *Registry) Services() []protoreflect.ServiceDescriptor { return slices.Clone(r.services) }

// Files returns the files the registry was built from. The caller must not
// register more files in it.
func (r *Registry) Files() *protoregistry.Files { return r.files }

// Types returns dynamicpb types for every message (nested ones included),
// enum and extension declared in Files. The caller must not register more
// types in it.
func (r *Registry) Types() *protoregistry.Types { return r.types }

// newTypes registers a dynamicpb type for every message, enum and extension
// of files.
func newTypes(files *protoregistry.Files) (*protoregistry.Types, error) {
	types := new(protoregistry.Types)
	var err error
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		err = registerTypes(types, fd)
		if err != nil {
			err = fmt.Errorf("reflect: types of %s: %w", fd.Path(), err)
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return types, nil
}

// container is a file or message: anything declaring messages, enums and extensions.
type container interface {
	Messages() protoreflect.MessageDescriptors
	Enums() protoreflect.EnumDescriptors
	Extensions() protoreflect.ExtensionDescriptors
}

func registerTypes(types *protoregistry.Types, c container) error {
	enums := c.Enums()
	for i := range enums.Len() {
		if err := types.RegisterEnum(dynamicpb.NewEnumType(enums.Get(i))); err != nil {
			return err
		}
	}
	exts := c.Extensions()
	for i := range exts.Len() {
		if err := types.RegisterExtension(dynamicpb.NewExtensionType(exts.Get(i))); err != nil {
			return err
		}
	}
	msgs := c.Messages()
	for i := range msgs.Len() {
		md := msgs.Get(i)
		if err := types.RegisterMessage(dynamicpb.NewMessageType(md)); err != nil {
			return err
		}
		if err := registerTypes(types, md); err != nil {
			return err
		}
	}
	return nil
}
