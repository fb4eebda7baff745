package reflect

import (
	"strings"

	"github.com/jhump/protoreflect/v2/protoprint"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ProtoSource returns d (a service, method, message or enum) as a snippet
// of .proto source, printed by jhump/protoreflect's protoprint as
// grpcurl's describe prints it: compact, type names in full
// (".demo.v1.Note", so that a snippet reads alone), elements in canonical
// order (fields by number, methods by name), and the comments that
// document an element (the leading ones) where its file carries source
// info. Files compiled from .proto sources do, and descriptor sets made
// with protoc --include_source_info; the descriptors of generated Go code,
// which grpc-go's reflection serves, do not. The text ends with a newline.
func ProtoSource(d protoreflect.Descriptor) (string, error) {
	p := protoprint.Printer{
		Compact:                  true,
		OmitComments:             protoprint.CommentsNonDoc,
		SortElements:             true,
		ForceFullyQualifiedNames: true,
	}
	s, err := p.PrintProtoToString(d)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(s, "\n") + "\n", nil
}
