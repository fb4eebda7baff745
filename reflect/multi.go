package reflect

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Filter returns a registry of the services of r whose full names match
// at least one include pattern (any, when include is empty) and no exclude
// pattern. Patterns use path.Match syntax, where * also matches dots:
// "demo.*", "*.Greeter", "test.v1.TestService". Skipped keeps the skipped
// services the patterns select.
func (r *Registry) Filter(include, exclude []string) (*Registry, error) {
	if len(include) == 0 && len(exclude) == 0 {
		return r, nil
	}
	in := make(map[protoreflect.FullName]bool, len(r.services))
	for _, sd := range r.services {
		in[sd.FullName()] = true
	}
	keep := func(sd protoreflect.ServiceDescriptor) bool {
		name := string(sd.FullName())
		return in[sd.FullName()] && (len(include) == 0 || matchAny(include, name)) && !matchAny(exclude, name)
	}
	for _, p := range slices.Concat(include, exclude) {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("reflect: service pattern %q: %w", p, err)
		}
	}
	out, err := newRegistry(r.files, keep)
	if err != nil {
		return nil, err
	}
	out.repairs = r.repairs
	for _, sk := range r.skipped {
		if (len(include) == 0 || matchAny(include, sk.Name)) && !matchAny(exclude, sk.Name) {
			out.skipped = append(out.skipped, sk)
		}
	}
	return out, nil
}

// matchAny reports whether name matches one of patterns, which are valid.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Part is the registry of one backend and the connection that reaches it.
type Part struct {
	// Name identifies the backend in errors and logs.
	Name string
	// Conn reaches the backend.
	Conn grpc.ClientConnInterface
	// Registry lists the backend's services, already filtered.
	Registry *Registry
}

// DuplicateServiceError is returned by Merge when two backends offer the
// same service.
type DuplicateServiceError struct {
	Service  string
	Backends [2]string
}

func (e *DuplicateServiceError) Error() string {
	return fmt.Sprintf("reflect: service %s is offered by backends %q and %q; "+
		"exclude it from one of them (exclude: [%q]) or include only the services each should serve",
		e.Service, e.Backends[0], e.Backends[1], e.Service)
}

// Catalog is the union of the registries of several backends, routing each
// method to the connection of the backend that offers it. It is immutable
// and safe for concurrent use; it satisfies bridge.Catalog and
// bridge.Router.
type Catalog struct {
	methods  []protoreflect.MethodDescriptor
	services []protoreflect.ServiceDescriptor
	types    *protoregistry.Types
	conns    map[protoreflect.FullName]grpc.ClientConnInterface // by service
	owners   map[protoreflect.FullName]string                   // backend name by service
}

// Merge builds the Catalog of parts; a part without a Registry adds
// nothing. A service offered by two parts is a
// *DuplicateServiceError. Message types the parts share (such as
// google.protobuf.Empty) are resolved from the first part declaring them.
func Merge(parts []Part) (*Catalog, error) {
	c := &Catalog{
		types:  new(protoregistry.Types),
		conns:  make(map[protoreflect.FullName]grpc.ClientConnInterface),
		owners: make(map[protoreflect.FullName]string),
	}
	for _, p := range parts {
		if p.Registry == nil {
			continue
		}
		for _, sd := range p.Registry.services {
			if other, dup := c.owners[sd.FullName()]; dup {
				return nil, &DuplicateServiceError{Service: string(sd.FullName()), Backends: [2]string{other, p.Name}}
			}
			c.owners[sd.FullName()] = p.Name
			c.conns[sd.FullName()] = p.Conn
			c.services = append(c.services, sd)
		}
		c.methods = append(c.methods, p.Registry.methods...)
		mergeTypes(c.types, p.Registry.types)
	}
	slices.SortFunc(c.services, func(a, b protoreflect.ServiceDescriptor) int {
		return strings.Compare(string(a.FullName()), string(b.FullName()))
	})
	slices.SortFunc(c.methods, func(a, b protoreflect.MethodDescriptor) int {
		return strings.Compare(string(a.FullName()), string(b.FullName()))
	})
	return c, nil
}

// mergeTypes registers in dst every type of src whose name dst lacks.
func mergeTypes(dst, src *protoregistry.Types) {
	src.RangeEnums(func(et protoreflect.EnumType) bool {
		if _, err := dst.FindEnumByName(et.Descriptor().FullName()); err != nil {
			_ = dst.RegisterEnum(et)
		}
		return true
	})
	src.RangeMessages(func(mt protoreflect.MessageType) bool {
		if _, err := dst.FindMessageByName(mt.Descriptor().FullName()); err != nil {
			_ = dst.RegisterMessage(mt)
		}
		return true
	})
	src.RangeExtensions(func(xt protoreflect.ExtensionType) bool {
		if _, err := dst.FindExtensionByName(xt.TypeDescriptor().FullName()); err != nil {
			_ = dst.RegisterExtension(xt) // a clashing field number is skipped too
		}
		return true
	})
}

// Methods returns every method of every backend sorted by full name, in a
// new slice.
func (c *Catalog) Methods() []protoreflect.MethodDescriptor { return slices.Clone(c.methods) }

// Services returns every service sorted by full name, in a new slice.
func (c *Catalog) Services() []protoreflect.ServiceDescriptor { return slices.Clone(c.services) }

// Types resolves the message, enum and extension types of every backend.
func (c *Catalog) Types() *protoregistry.Types { return c.types }

// Conn returns the connection of the backend offering md, or nil.
func (c *Catalog) Conn(md protoreflect.MethodDescriptor) grpc.ClientConnInterface {
	return c.conns[md.Parent().FullName()]
}

// Backend names the backend offering service, or "" when none does.
func (c *Catalog) Backend(service protoreflect.FullName) string { return c.owners[service] }
