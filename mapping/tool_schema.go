package mapping

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// DefsPrefix starts every $ref of the schemas MethodSchemas returns.
const DefsPrefix = "#/$defs/"

// MethodSchemas returns the JSON Schemas of the params and of the result
// of a call of md over HTTP, the same as the OpenRPC document of md gives
// them: params is the schema of the request message (the component
// "<input>.input"), result the schema of the response message, or of the
// array of every response message of a server stream. Each stands alone,
// for clients that take one schema per method (such as MCP tools): the
// schema of the message itself, with every component schema it refers to
// under "$defs", its references rewritten from "#/components/schemas/X" to
// "#/$defs/X". The result of a server stream is {"type": "array", "items":
// {"$ref": ...}} with "$defs" beside it. emitUnpopulated is as in
// DocumentOptions.
func MethodSchemas(md protoreflect.MethodDescriptor, emitUnpopulated bool) (params, result map[string]any) {
	s := newSchemas(emitUnpopulated)
	s.ref(md.Input(), input)
	s.ref(md.Output(), output)
	params = s.standalone(object{"$ref": schemaRefPrefix + componentName(md.Input(), input)})
	out := object{"$ref": schemaRefPrefix + componentName(md.Output(), output)}
	if md.IsStreamingServer() {
		out = object{"type": "array", "items": out}
	}
	return params, s.standalone(out)
}

// Comments returns the leading (or else trailing) comment of d, lines
// trimmed, when its file carries source info; "" otherwise. The OpenRPC
// document takes its descriptions from the same comments.
func Comments(d protoreflect.Descriptor) string { return comments(d) }

// standalone returns root with its references into the components made
// local: a root that is only a reference is replaced by a copy of the
// schema it names, and every schema reachable from it goes under "$defs".
func (s *schemas) standalone(root object) object {
	if ref, ok := root["$ref"].(string); ok && len(root) == 1 {
		if sch, ok := s.defs[strings.TrimPrefix(ref, schemaRefPrefix)].(object); ok {
			root = sch
		}
	}
	defs := object{}
	pending := []any{root}
	for len(pending) > 0 {
		v := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		for _, name := range componentRefs(v, nil) {
			if _, done := defs[name]; done {
				continue
			}
			sch := s.defs[name]
			defs[name] = localRefs(sch)
			pending = append(pending, sch)
		}
	}
	out := localRefs(root).(object)
	if len(defs) > 0 {
		out["$defs"] = defs
	}
	return out
}

// componentRefs appends to names the components v refers to, sorted
// within each object so that the walk is deterministic.
func componentRefs(v any, names []string) []string {
	switch v := v.(type) {
	case object:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if ref, ok := v[k].(string); ok && k == "$ref" && strings.HasPrefix(ref, schemaRefPrefix) {
				names = append(names, strings.TrimPrefix(ref, schemaRefPrefix))
			} else {
				names = componentRefs(v[k], names)
			}
		}
	case []any:
		for _, x := range v {
			names = componentRefs(x, names)
		}
	}
	return names
}

// localRefs returns a deep copy of v with its references into the
// components rewritten to "#/$defs/".
func localRefs(v any) any {
	switch v := v.(type) {
	case object:
		out := make(object, len(v))
		for k, x := range v {
			if ref, ok := x.(string); ok && k == "$ref" && strings.HasPrefix(ref, schemaRefPrefix) {
				out[k] = DefsPrefix + strings.TrimPrefix(ref, schemaRefPrefix)
			} else {
				out[k] = localRefs(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = localRefs(x)
		}
		return out
	}
	return v
}
