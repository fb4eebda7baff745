package mapping

import (
	"errors"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Resolver finds message and extension types (Any fields, status details).
// It is what protojson.UnmarshalOptions.Resolver and
// protojson.MarshalOptions.Resolver accept.
type Resolver interface {
	protoregistry.MessageTypeResolver
	protoregistry.ExtensionTypeResolver
}

// NewResolver returns a Resolver that looks in backend first and then in
// protoregistry.GlobalTypes. A nil backend means global types only. Like
// protoregistry.Types, it reports a missing type as protoregistry.NotFound.
func NewResolver(backend *protoregistry.Types) Resolver {
	return chain{backend: backend}
}

// chain looks up backend, then protoregistry.GlobalTypes. It falls through
// to the global types only on protoregistry.NotFound so that any other
// error of the backend is not hidden.
type chain struct {
	backend *protoregistry.Types
}

func (c chain) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	if c.backend != nil {
		mt, err := c.backend.FindMessageByName(name)
		if !errors.Is(err, protoregistry.NotFound) {
			return mt, err
		}
	}
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

func (c chain) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if c.backend != nil {
		mt, err := c.backend.FindMessageByURL(url)
		if !errors.Is(err, protoregistry.NotFound) {
			return mt, err
		}
	}
	return protoregistry.GlobalTypes.FindMessageByURL(url)
}

func (c chain) FindExtensionByName(field protoreflect.FullName) (protoreflect.ExtensionType, error) {
	if c.backend != nil {
		xt, err := c.backend.FindExtensionByName(field)
		if !errors.Is(err, protoregistry.NotFound) {
			return xt, err
		}
	}
	return protoregistry.GlobalTypes.FindExtensionByName(field)
}

func (c chain) FindExtensionByNumber(message protoreflect.FullName, field protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	if c.backend != nil {
		xt, err := c.backend.FindExtensionByNumber(message, field)
		if !errors.Is(err, protoregistry.NotFound) {
			return xt, err
		}
	}
	return protoregistry.GlobalTypes.FindExtensionByNumber(message, field)
}
