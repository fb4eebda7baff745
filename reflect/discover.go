package reflect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jhump/protoreflect/v2/grpcreflect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// ErrReflectionUnsupported is wrapped by Discover's error when the backend
// answers codes.Unimplemented to both reflection v1 and v1alpha.
var ErrReflectionUnsupported = errors.New("reflect: backend has no reflection service")

// Discover asks the backend behind conn for its services through gRPC server
// reflection (v1, falling back to v1alpha) and returns a registry of the
// services it lists, except grpc.reflection.*. Every file they need, with all
// its transitive imports, goes into a private protoregistry.Files.
//
// A backend without reflection gives an error wrapping
// ErrReflectionUnsupported. Other failures keep their gRPC status
// (status.Code finds it) and, once ctx is done, wrap ctx.Err() as well.
func Discover(ctx context.Context, conn grpc.ClientConnInterface) (*Registry, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := grpcreflect.NewClientAuto(ctx, conn)
	defer client.Reset() // closes the reflection stream

	names, err := client.ListServices()
	if err != nil {
		return nil, discoveryError(ctx, "list services", err)
	}
	files := new(protoregistry.Files)
	listed := make(map[protoreflect.FullName]bool, len(names))
	var skipped []SkippedService
	for _, name := range names {
		if strings.HasPrefix(string(name), reflectionPackage) {
			continue
		}
		fd, err := client.FileContainingSymbol(name)
		if grpcreflect.IsElementNotFoundError(err) {
			// The backend lists the service but cannot describe it (its
			// file is not in the server's registry): serve the others.
			skipped = append(skipped, SkippedService{Name: string(name), Err: err})
			continue
		}
		if err != nil {
			return nil, discoveryError(ctx, "resolve service "+string(name), err)
		}
		if err := registerFile(files, fd); err != nil {
			skipped = append(skipped, SkippedService{Name: string(name), Err: err})
			continue
		}
		listed[name] = true
	}
	reg, err := newRegistry(files, func(sd protoreflect.ServiceDescriptor) bool {
		return listed[sd.FullName()]
	})
	if err != nil {
		return nil, err
	}
	reg.skipped = skipped
	return reg, nil
}

// SkippedService is a service the backend lists but whose descriptors
// discovery could not get or use; it is left out of the registry.
type SkippedService struct {
	Name string
	Err  error
}

// discoveryError wraps err from the reflection client, turning
// codes.Unimplemented into ErrReflectionUnsupported and adding ctx.Err()
// once ctx is done.
func discoveryError(ctx context.Context, op string, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("reflect: %s: %w: %w", op, ErrReflectionUnsupported, err)
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("reflect: %s: %w: %w", op, ctxErr, err)
	}
	return fmt.Errorf("reflect: %s: %w", op, err)
}

// registerFile adds fd and, before it, its transitive imports to files. A
// path already in files is skipped, so shared imports are registered once.
func registerFile(files *protoregistry.Files, fd protoreflect.FileDescriptor) error {
	if _, err := files.FindFileByPath(fd.Path()); err == nil {
		return nil
	}
	imports := fd.Imports()
	for i := range imports.Len() {
		imp := imports.Get(i)
		if imp.IsPlaceholder() {
			return fmt.Errorf("%s imports missing file %s", fd.Path(), imp.Path())
		}
		if err := registerFile(files, imp.FileDescriptor); err != nil {
			return err
		}
	}
	return files.RegisterFile(fd)
}
