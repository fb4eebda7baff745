package mapping

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// message checks a value of message type md at path.
func (w *walker) message(md protoreflect.MessageDescriptor, path *loc, depth int) *problem {
	if depth > maxDepth {
		return &problem{path, "nesting too deep"}
	}
	if isWellKnown(md.FullName()) {
		return w.wellKnown(md, path, depth)
	}
	return w.fields(md, path, depth, false)
}

// fields checks a JSON object holding the fields of md. With skipType, an
// "@type" member is allowed (a message embedded in an Any).
func (w *walker) fields(md protoreflect.MessageDescriptor, path *loc, depth int, skipType bool) *problem {
	if w.peek() != '{' {
		return &problem{path, "want an object (" + string(md.FullName()) + "), got " + w.kind()}
	}
	seen := map[protoreflect.FieldNumber]string{}
	oneofs := map[int]string{}
	return w.object(path, depth, func(key string) *problem {
		fpath := join(path, key)
		if skipType && key == "@type" {
			return w.skip(fpath, depth)
		}
		fd := w.lookup(md, key)
		if fd == nil {
			return &problem{fpath, "unknown field of " + string(md.FullName())}
		}
		if prev, ok := seen[fd.Number()]; ok {
			if prev == key {
				return &problem{fpath, "duplicate field"}
			}
			return &problem{fpath, "duplicate field, already set as " + quote(prev)}
		}
		seen[fd.Number()] = key
		if w.peek() == 'n' && !isValueMessage(fd) && !isNullEnum(fd) {
			return w.skip(fpath, depth) // null leaves the field unset
		}
		switch {
		case fd.IsList():
			return w.list(fd, fpath, depth)
		case fd.IsMap():
			return w.mapField(fd, fpath, depth)
		}
		if od := fd.ContainingOneof(); od != nil {
			if prev, ok := oneofs[od.Index()]; ok {
				return &problem{fpath, "oneof " + string(od.Name()) + " is already set by " + quote(prev)}
			}
			oneofs[od.Index()] = key
		}
		return w.singular(fd, fpath, depth)
	})
}

// lookup finds the field of md that key names: its JSON name, its proto
// name, or "[full.name]" of an extension, as protojson does.
func (w *walker) lookup(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	if strings.HasPrefix(key, "[") && strings.HasSuffix(key, "]") {
		xt, err := w.res.FindExtensionByName(protoreflect.FullName(key[1 : len(key)-1]))
		if err != nil {
			return nil
		}
		fd := xt.TypeDescriptor()
		if fd.ContainingMessage().FullName() != md.FullName() || !md.ExtensionRanges().Has(fd.Number()) {
			return nil
		}
		return fd
	}
	if fd := md.Fields().ByJSONName(key); fd != nil {
		return fd
	}
	return md.Fields().ByTextName(key)
}

// singular checks the value of a field that is neither a list nor a map.
func (w *walker) singular(fd protoreflect.FieldDescriptor, path *loc, depth int) *problem {
	if fd.Message() != nil {
		return w.message(fd.Message(), path, depth+1)
	}
	return w.scalar(fd, path)
}

// list checks the JSON array of a repeated field.
func (w *walker) list(fd protoreflect.FieldDescriptor, path *loc, depth int) *problem {
	if w.peek() != '[' {
		return &problem{path, "want an array of " + want(fd) + ", got " + w.kind()}
	}
	return w.array(path, depth, func(i int) *problem {
		return w.singular(fd, index(path, i), depth)
	})
}

// mapField checks the JSON object of a map field.
func (w *walker) mapField(fd protoreflect.FieldDescriptor, path *loc, depth int) *problem {
	if w.peek() != '{' {
		return &problem{path, "want an object (map), got " + w.kind()}
	}
	kd, vd := fd.MapKey(), fd.MapValue()
	seen := map[string]bool{}
	return w.object(path, depth, func(key string) *problem {
		kpath := join(path, key)
		canon, ok := mapKey(kd, key)
		if !ok {
			return &problem{kpath, "invalid map key " + quote(key) + ", want " + kd.Kind().String()}
		}
		if seen[canon] {
			return &problem{kpath, "duplicate map key"}
		}
		seen[canon] = true
		return w.singular(vd, kpath, depth)
	})
}

// mapKey parses a map key as protojson does and returns its canonical text.
func mapKey(kd protoreflect.FieldDescriptor, key string) (string, bool) {
	switch kd.Kind() {
	case protoreflect.StringKind:
		return key, true
	case protoreflect.BoolKind:
		return key, key == "true" || key == "false"
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(key, 10, bitSize(kd.Kind()))
		return strconv.FormatInt(n, 10), err == nil
	default:
		n, err := strconv.ParseUint(key, 10, bitSize(kd.Kind()))
		return strconv.FormatUint(n, 10), err == nil
	}
}

// isWellKnown reports whether protojson has a special JSON form for name.
func isWellKnown(name protoreflect.FullName) bool {
	switch name {
	case "google.protobuf.Any", "google.protobuf.Timestamp", "google.protobuf.Duration",
		"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
		"google.protobuf.FieldMask", "google.protobuf.Empty":
		return true
	}
	return isWrapper(name)
}

func isWrapper(name protoreflect.FullName) bool {
	switch name {
	case "google.protobuf.BoolValue", "google.protobuf.Int32Value", "google.protobuf.Int64Value",
		"google.protobuf.UInt32Value", "google.protobuf.UInt64Value", "google.protobuf.FloatValue",
		"google.protobuf.DoubleValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		return true
	}
	return false
}

func isValueMessage(fd protoreflect.FieldDescriptor) bool {
	return fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value"
}

func isNullEnum(fd protoreflect.FieldDescriptor) bool {
	return fd.Enum() != nil && fd.Enum().FullName() == "google.protobuf.NullValue"
}

// wellKnown checks a value of a well-known type. Wrappers are checked as
// their scalar, Any by its embedded type, the rest by protojson itself on
// the value alone.
func (w *walker) wellKnown(md protoreflect.MessageDescriptor, path *loc, depth int) *problem {
	name := md.FullName()
	switch {
	case name == "google.protobuf.Any":
		return w.any(path, depth)
	case isWrapper(name):
		return w.scalar(md.Fields().ByName("value"), path)
	case name == "google.protobuf.Struct" && w.peek() != '{':
		return &problem{path, "want an object (google.protobuf.Struct), got " + w.kind()}
	case name == "google.protobuf.ListValue" && w.peek() != '[':
		return &problem{path, "want an array (google.protobuf.ListValue), got " + w.kind()}
	}
	start := jsonscan.SkipSpace(w.b, w.i)
	if p := w.skip(path, depth); p != nil {
		return p
	}
	err := protojson.UnmarshalOptions{Resolver: w.res}.Unmarshal(w.b[start:w.i], dynamicpb.NewMessage(md))
	if err == nil {
		return nil
	}
	switch name {
	case "google.protobuf.Timestamp":
		return &problem{path, `want an RFC 3339 timestamp string such as "2006-01-02T15:04:05Z", got ` + w.excerpt(start)}
	case "google.protobuf.Duration":
		return &problem{path, `want a duration string in seconds such as "1.5s", got ` + w.excerpt(start)}
	case "google.protobuf.FieldMask":
		return &problem{path, `want a field mask string of comma-separated lowerCamelCase paths such as "name,note.tags", got ` + w.excerpt(start)}
	}
	return &problem{path, sanitize(err)}
}

// excerpt repeats the JSON value that starts at b[start] and ends at the
// read position, shortened.
func (w *walker) excerpt(start int) string {
	s := string(w.b[start:w.i])
	if len(s) > maxQuoted {
		return strings.ToValidUTF8(s[:maxQuoted], "") + "..."
	}
	return s
}

// any checks a google.protobuf.Any: "@type" must name a type the resolver
// knows; the other members are that type's fields, or "value" for a
// well-known type.
func (w *walker) any(path *loc, depth int) *problem {
	if w.peek() != '{' {
		return &problem{path, "want an object (google.protobuf.Any), got " + w.kind()}
	}
	start := w.i
	var url string
	found, members := false, 0
	if p := w.object(path, depth, func(key string) *problem {
		members++
		if key != "@type" {
			return w.skip(join(path, key), depth)
		}
		if found {
			return &problem{join(path, key), "duplicate field"}
		}
		found = true
		if w.peek() != '"' {
			return &problem{join(path, key), "want a type URL string, got " + w.kind()}
		}
		var reason string
		url, reason = w.str()
		if reason != "" {
			return &problem{join(path, key), reason}
		}
		return nil
	}); p != nil || members == 0 {
		return p
	}
	if !found {
		return &problem{path, `missing "@type" of google.protobuf.Any`}
	}
	mt, err := w.res.FindMessageByURL(url)
	if err != nil {
		return &problem{join(path, "@type"), "unknown type " + quote(url)}
	}
	md := mt.Descriptor()
	w.i = start
	if !isWellKnown(md.FullName()) {
		return w.fields(md, path, depth+1, true)
	}
	hasValue := false
	if p := w.object(path, depth, func(key string) *problem {
		switch key {
		case "@type":
			return w.skip(join(path, key), depth)
		case "value":
			hasValue = true
			return w.message(md, join(path, key), depth+1)
		}
		return &problem{join(path, key), "unknown field of google.protobuf.Any holding " + string(md.FullName()) + `, want only "@type" and "value"`}
	}); p != nil {
		return p
	}
	if !hasValue && md.FullName() != "google.protobuf.Empty" {
		return &problem{path, `missing "value" of google.protobuf.Any holding ` + string(md.FullName())}
	}
	return nil
}
