package reflect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ErrReflectionUnsupported is wrapped by Discover's error when the backend
// answers codes.Unimplemented to both reflection v1 and v1alpha.
var ErrReflectionUnsupported = errors.New("reflect: backend has no reflection service")

// Discover asks the backend behind conn for its services through gRPC server
// reflection (v1, falling back to v1alpha) and returns a registry of the
// services it lists, except grpc.reflection.*. Every file they need, with all
// its transitive imports, goes into a private protoregistry.Files.
//
// Files are repaired as they are built, for what @grpc/reflection 1.0.4
// (Node) serves: the bridge's own well-known types stand for the
// backend's; a file using a type it does not import gets the file
// declaring that type as a dependency (one the backend gave, one it gives
// when asked for the type, or the bridge's own copy of a google/protobuf
// file); type names are made full; map entries get the names protobuf
// derives from their field and proto3 optional fields their flag, which
// change nothing on the wire. A service that still cannot be described is
// left out and listed by Registry.Skipped; the others are served. Both
// reflection versions go through the same repair.
//
// A backend without reflection gives an error wrapping
// ErrReflectionUnsupported. Other failures (the stream breaks, the backend
// answers a transient error) keep their gRPC status (status.Code finds
// it) and, once ctx is done, wrap ctx.Err() as well.
func Discover(ctx context.Context, conn grpc.ClientConnInterface) (*Registry, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client, names, err := startReflection(ctx, conn)
	if err != nil {
		return nil, err
	}
	defer client.close()
	return describe(ctx, newDescriber(client), names)
}

// describe builds the registry of the services names with d, leaving out
// (as skipped) those it cannot describe.
func describe(ctx context.Context, d *describer, names []string) (*Registry, error) {
	listed := make(map[protoreflect.FullName]bool, len(names))
	var skipped []SkippedService
	for _, name := range names {
		if strings.HasPrefix(name, reflectionPackage) {
			continue
		}
		path, err := d.serviceFile(name)
		if err != nil {
			return nil, discoveryError(ctx, "resolve service "+name, err)
		}
		if path == "" {
			skipped = append(skipped, SkippedService{Name: name,
				Reason: "the backend's reflection gives no file declaring it",
				Err:    fmt.Errorf("no file declares %s", name)})
			continue
		}
		_, fe, err := d.build(path, 0)
		if err != nil {
			return nil, discoveryError(ctx, "resolve service "+name, err)
		}
		if fe != nil {
			skipped = append(skipped, SkippedService{Name: name, Reason: fe.Reason, Err: fe.Err})
			continue
		}
		listed[protoreflect.FullName(name)] = true
	}
	reg, err := newRegistry(d.files, func(sd protoreflect.ServiceDescriptor) bool {
		return listed[sd.FullName()]
	})
	if err != nil {
		return nil, err
	}
	reg.skipped = skipped
	reg.repairs = d.repairs
	return reg, nil
}

// SkippedService is a service the backend lists but whose descriptors
// discovery could not get or use; it is left out of the registry.
type SkippedService struct {
	Name string
	// Reason is why, in a sentence for operators, such as
	// "ghost.proto refers to ghost.v1.Missing, which the backend's
	// reflection does not describe".
	Reason string
	// Err has the details, for logs.
	Err error
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
