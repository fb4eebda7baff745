package mapping

import (
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// fieldBehaviorNumber is the number of the google.api.field_behavior
// extension of google.protobuf.FieldOptions, and fieldBehaviorRequired the
// number of google.api.FieldBehavior.REQUIRED.
const (
	fieldBehaviorNumber   protowire.Number = 1052
	fieldBehaviorRequired uint64           = 2
)

// IsFieldRequired reports whether a field must be given in params: a proto2
// required field, or one marked REQUIRED by google.api.field_behavior. The
// extension is read from the options' wire form, so it is found whether or
// not google/api/field_behavior.proto is linked into the program.
func IsFieldRequired(fd protoreflect.FieldDescriptor) bool {
	if fd.Cardinality() == protoreflect.Required {
		return true
	}
	opts, ok := fd.Options().(*descriptorpb.FieldOptions)
	if !ok || opts == nil {
		return false
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(opts)
	if err != nil {
		return false
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num != fieldBehaviorNumber {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return false
			}
			b = b[n:]
			continue
		}
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			if v == fieldBehaviorRequired {
				return true
			}
			b = b[n:]
		case protowire.BytesType: // packed
			packed, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			for len(packed) > 0 {
				v, m := protowire.ConsumeVarint(packed)
				if m < 0 {
					return false
				}
				if v == fieldBehaviorRequired {
					return true
				}
				packed = packed[m:]
			}
			b = b[n:]
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return false
			}
			b = b[n:]
		}
	}
	return false
}

// isDeprecated reports whether a field, method or message carries
// `option deprecated = true`.
func isDeprecated(d protoreflect.Descriptor) bool {
	switch opts := d.Options().(type) {
	case *descriptorpb.FieldOptions:
		return opts.GetDeprecated()
	case *descriptorpb.MethodOptions:
		return opts.GetDeprecated()
	case *descriptorpb.MessageOptions:
		return opts.GetDeprecated()
	case *descriptorpb.ServiceOptions:
		return opts.GetDeprecated()
	}
	return false
}

// comments returns the leading comment of d when its file carries source
// info (a protoset built with --include_source_info, .proto sources), or "".
// The comment's lines are trimmed and joined with newlines.
func comments(d protoreflect.Descriptor) string {
	fd := d.ParentFile()
	if fd == nil {
		return ""
	}
	loc := fd.SourceLocations().ByDescriptor(d)
	text := loc.LeadingComments
	if text == "" {
		text = loc.TrailingComments
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// summary returns the first sentence of a comment, on one line.
func summary(comment string) string {
	para, _, _ := strings.Cut(comment, "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	if i := strings.Index(para, ". "); i >= 0 {
		return para[:i+1]
	}
	return para
}
