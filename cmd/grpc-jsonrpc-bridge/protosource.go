package main

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// describeFormats are the values of describe's --format, the default first.
var describeFormats = []string{"json", "proto"}

// checkFormat is nil for one of describeFormats, else the usage error
// naming them.
func checkFormat(format string) error {
	if slices.Contains(describeFormats, format) {
		return nil
	}
	return fmt.Errorf("--format %q: want %s", format, strings.Join(describeFormats, " or "))
}

// findDefinition returns what describe --format proto prints as name: a
// method (as findMethod takes it), a service (its full name, as list
// takes it) or a message or enum that a served file declares or imports
// (its full name, with or without the leading dot that the printed
// source puts before type names). Anything else is findMethod's error,
// the same as describe without --format gives.
func findDefinition(methods []protoreflect.MethodDescriptor, name string) (protoreflect.Descriptor, error) {
	md, err := findMethod(methods, name)
	if err == nil {
		return md, nil
	}
	for _, m := range methods {
		if serviceName(m) == name || string(m.Parent().FullName()) == name {
			return m.Parent(), nil
		}
	}
	if d := findType(methods, protoreflect.FullName(strings.TrimPrefix(name, "."))); d != nil {
		return d, nil
	}
	return nil, err
}

// findType returns the message or enum named full that the files of
// methods, or the files they import, declare; nil if none does.
func findType(methods []protoreflect.MethodDescriptor, full protoreflect.FullName) protoreflect.Descriptor {
	seen := map[string]bool{}
	var pending []protoreflect.FileDescriptor
	for _, md := range methods {
		pending = append(pending, md.ParentFile())
	}
	for len(pending) > 0 {
		fd := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		if seen[fd.Path()] {
			continue
		}
		seen[fd.Path()] = true
		if d := typeIn(fd, full); d != nil {
			return d
		}
		imports := fd.Imports()
		for i := range imports.Len() {
			pending = append(pending, imports.Get(i).FileDescriptor)
		}
	}
	return nil
}

// typeContainer is a file or a message: what declares messages and enums.
type typeContainer interface {
	Messages() protoreflect.MessageDescriptors
	Enums() protoreflect.EnumDescriptors
}

// typeIn returns the message or enum named full in c, nested ones
// included; nil if there is none.
func typeIn(c typeContainer, full protoreflect.FullName) protoreflect.Descriptor {
	enums := c.Enums()
	for i := range enums.Len() {
		if e := enums.Get(i); e.FullName() == full {
			return e
		}
	}
	msgs := c.Messages()
	for i := range msgs.Len() {
		m := msgs.Get(i)
		if m.FullName() == full {
			return m
		}
		if strings.HasPrefix(string(full), string(m.FullName())+".") {
			if d := typeIn(m, full); d != nil {
				return d
			}
		}
	}
	return nil
}

// protoText is d as .proto source (bridgereflect.ProtoSource); a method
// is followed by its request and response messages, what a call sends
// and gets, each definition after a blank line.
func protoText(d protoreflect.Descriptor) ([]byte, error) {
	defs := []protoreflect.Descriptor{d}
	if md, ok := d.(protoreflect.MethodDescriptor); ok {
		defs = append(defs, md.Input())
		if md.Output().FullName() != md.Input().FullName() {
			defs = append(defs, md.Output())
		}
	}
	var parts []string
	for _, def := range defs {
		s, err := bridgereflect.ProtoSource(def)
		if err != nil {
			return nil, fmt.Errorf("describe: printing %s as .proto source: %w", def.FullName(), err)
		}
		parts = append(parts, s)
	}
	return []byte(strings.Join(parts, "\n")), nil
}

// withProtoHint is err, findMethod's error for name, told that --format
// proto prints name where it is a service, a message or an enum.
func withProtoHint(err error, methods []protoreflect.MethodDescriptor, name string) error {
	d, ferr := findDefinition(methods, name)
	switch d.(type) {
	case nil:
		_ = ferr // not a definition either: findMethod's error as it is
		return err
	case protoreflect.ServiceDescriptor:
		return fmt.Errorf("%w, or --format proto prints the service", err)
	case protoreflect.EnumDescriptor:
		return fmt.Errorf("%q is an enum, not a method: describe --format proto prints it", name)
	default:
		return fmt.Errorf("%q is a message, not a method: describe --format proto prints it", name)
	}
}
