package mapping

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// OpenRPCVersion is the version of the OpenRPC specification the document
// follows: the newest that the published meta-schema and the common
// validators accept.
const OpenRPCVersion = "1.3.2"

// Defaults of the document's info object.
const (
	DefaultTitle   = "gRPC services over JSON-RPC"
	DefaultVersion = "0.0.0"
)

// reservedPrefix starts the method names the JSON-RPC specification keeps
// for the protocol's own methods.
const reservedPrefix = "rpc."

// MethodName returns the JSON-RPC name of a gRPC method: its fully
// qualified name, "pkg.Service.Method". Names that would start with the
// reserved "rpc." (a protobuf package named rpc) take protobuf's own fully
// qualified form with a leading dot instead: ".rpc.ops.Ops.Ping".
func MethodName(md protoreflect.MethodDescriptor) string {
	name := string(md.FullName())
	if strings.HasPrefix(name, reservedPrefix) {
		return "." + name
	}
	return name
}

// DocumentInfo is what the descriptors cannot tell about the API: the
// document's info object and its servers. The zero value gives a valid
// document.
type DocumentInfo struct {
	// Title of the API. Empty means DefaultTitle.
	Title string
	// Version of the API (not of OpenRPC). Empty means DefaultVersion.
	Version string
	// Description of the API. Empty means the comments of the services,
	// where the descriptors carry them.
	Description string
	// Servers where the API is served. Empty leaves servers out, which
	// OpenRPC reads as the document's own location.
	Servers []Server
}

// Server is one entry of the document's servers.
type Server struct {
	// Name of the server; empty leaves it out.
	Name string `json:"name,omitempty"`
	// URL of the JSON-RPC endpoint, such as "http://localhost:8080/".
	URL string `json:"url"`
	// Description of the server; empty leaves it out.
	Description string `json:"description,omitempty"`
}

// DocumentOptions tunes Document. The zero value gives the defaults.
type DocumentOptions struct {
	// Info fills the document's info object and servers.
	Info DocumentInfo
	// EmitUnpopulated must match the Options of the Codecs that serve the
	// methods: results then carry every field outside a oneof, and null for
	// an unset message field.
	EmitUnpopulated bool
}

// Document renders the OpenRPC document of methods, as served by the
// bridge. Methods are sorted by name and components by key, so the same
// descriptors always give the same bytes. Streaming methods are methods
// too, with the params and result of a call over HTTP and the extension
// "x-grpc-streaming" telling their kind and how a call differs over
// WebSocket; "x-streaming-methods" lists their names.
func Document(methods []protoreflect.MethodDescriptor, opts DocumentOptions) ([]byte, error) {
	s := newSchemas(opts.EmitUnpopulated)
	doc := document{
		OpenRPC:    OpenRPCVersion,
		Info:       info(methods, opts.Info),
		Servers:    opts.Info.Servers,
		Methods:    []method{},
		Components: components{Errors: errorComponents()},
	}
	sorted := slices.Clone(methods)
	slices.SortFunc(sorted, func(a, b protoreflect.MethodDescriptor) int {
		return strings.Compare(MethodName(a), MethodName(b))
	})
	for _, md := range sorted {
		m := s.method(md)
		if md.IsStreamingClient() || md.IsStreamingServer() {
			doc.Streaming = append(doc.Streaming, m.Name)
			s.streamingMethod(&m, md)
		}
		doc.Methods = append(doc.Methods, m)
	}
	doc.Components.Schemas = s.defs
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// document is the OpenRPC document object.
type document struct {
	OpenRPC    string     `json:"openrpc"`
	Info       infoObject `json:"info"`
	Servers    []Server   `json:"servers,omitempty"`
	Methods    []method   `json:"methods"`
	Components components `json:"components"`
	Streaming  []string   `json:"x-streaming-methods,omitempty"`
}

type infoObject struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version"`
}

type components struct {
	Schemas object            `json:"schemas"`
	Errors  map[string]errObj `json:"errors"`
}

type method struct {
	Name           string       `json:"name"`
	Summary        string       `json:"summary,omitempty"`
	Description    string       `json:"description,omitempty"`
	ParamStructure string       `json:"paramStructure"`
	Params         []descriptor `json:"params"`
	Result         descriptor   `json:"result"`
	Errors         []object     `json:"errors"`
	Deprecated     bool         `json:"deprecated,omitempty"`
	GRPCMethod     string       `json:"x-grpc-method"`
	Streaming      *streaming   `json:"x-grpc-streaming,omitempty"`
}

// descriptor is an OpenRPC content descriptor.
type descriptor struct {
	Name        string `json:"name"`
	Summary     string `json:"summary,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	Deprecated  bool   `json:"deprecated,omitempty"`
	Schema      object `json:"schema"`
}

type errObj struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// info fills the info object, taking defaults from the services.
func info(methods []protoreflect.MethodDescriptor, in DocumentInfo) infoObject {
	out := infoObject{Title: in.Title, Description: in.Description, Version: in.Version}
	if out.Title == "" {
		out.Title = DefaultTitle
	}
	if out.Version == "" {
		out.Version = DefaultVersion
	}
	if out.Description == "" {
		out.Description = serviceComments(methods)
	}
	return out
}

// serviceComments joins the comments of the services of methods, each
// under its service's name, in name order.
func serviceComments(methods []protoreflect.MethodDescriptor) string {
	seen := map[protoreflect.FullName]string{}
	for _, md := range methods {
		sd, ok := md.Parent().(protoreflect.ServiceDescriptor)
		if !ok {
			continue
		}
		if _, ok := seen[sd.FullName()]; !ok {
			seen[sd.FullName()] = comments(sd)
		}
	}
	var names []string
	for n, c := range seen {
		if c != "" {
			names = append(names, string(n))
		}
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, n+": "+seen[protoreflect.FullName(n)])
	}
	return strings.Join(parts, "\n\n")
}

// method describes one method as a unary method: params by name or by
// position, the response message as result. streamingMethod adjusts it for streams.
func (s *schemas) method(md protoreflect.MethodDescriptor) method {
	desc := comments(md)
	m := method{
		Name:           MethodName(md),
		Summary:        summary(desc),
		Description:    desc,
		ParamStructure: "either", // by name or by position (positional.go)
		Params:         []descriptor{},
		Result: descriptor{
			Name:   string(md.Output().Name()),
			Schema: s.ref(md.Output(), output),
		},
		Errors:     s.errors(md),
		Deprecated: isDeprecated(md),
		GRPCMethod: "/" + string(md.Parent().FullName()) + "/" + string(md.Name()),
	}
	if d := comments(md.Output()); d != "" {
		m.Result.Description = d
	}
	if m.Description == m.Summary {
		m.Description = ""
	}
	s.ref(md.Input(), input) // the params as one object, for reference
	fields := md.Input().Fields()
	for i := range fields.Len() {
		m.Params = append(m.Params, s.param(fields.Get(i)))
	}
	return m
}

// param describes one top-level field of a request message.
func (s *schemas) param(fd protoreflect.FieldDescriptor) descriptor {
	sch := s.fieldValue(fd, input)
	var notes []string
	if c := comments(fd); c != "" {
		notes = append(notes, c)
	}
	if fd.TextName() != fd.JSONName() {
		notes = append(notes, "The proto name "+fd.TextName()+" is accepted too.")
	}
	if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
		var members []string
		for i := range od.Fields().Len() {
			members = append(members, od.Fields().Get(i).JSONName())
		}
		notes = append(notes, "Member of oneof "+string(od.Name())+": give at most one of "+strings.Join(members, ", ")+".")
	}
	return descriptor{
		Name:        fd.JSONName(),
		Description: strings.Join(notes, "\n\n"),
		Required:    IsFieldRequired(fd),
		Deprecated:  isDeprecated(fd),
		Schema:      sch,
	}
}

// invalidParamsKey is the components.errors key of -32602.
const invalidParamsKey = "INVALID_PARAMS"

// errorComponents describes every error a method can return: -32602 for
// params the bridge cannot map (with no data: what it names depends on
// the method, whose own -32602 entry shows an example where it can), and
// each gRPC status code 1..16 as the bridge maps it (StatusError).
func errorComponents() map[string]errObj {
	errs := map[string]errObj{
		invalidParamsKey: {Code: CodeInvalidParams, Message: "Invalid params"},
	}
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		name := CodeName(c)
		errs[name] = errObj{
			Code:    Code(c),
			Message: name,
			Data:    object{"status": name, "details": []any{}},
		}
	}
	return errs
}

// errorRefs lists the errors of a method, each code once, as references
// into components.errors, in code order.
func errorRefs() []object {
	refs := []object{{"$ref": "#/components/errors/" + invalidParamsKey}}
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		refs = append(refs, object{"$ref": "#/components/errors/" + CodeName(c)})
	}
	return refs
}

// errors lists the errors of md: the shared references, with the -32602
// one replaced by an example that fits md's params where there is one.
func (s *schemas) errors(md protoreflect.MethodDescriptor) []object {
	e := invalidParamsExample(md)
	if e == nil {
		return s.errorRefs
	}
	errs := slices.Clone(s.errorRefs)
	errs[0] = object{"code": e.Code, "message": e.Message, "data": json.RawMessage(e.Data)}
	return errs
}

// invalidParamsExample is the -32602 error the bridge answers to a wrong
// value in the first field of md's request message that can be given one
// (going into a nested message's first field, up to a few levels), found
// by the same diagnosis as a real call; nil for a message without such a
// field. A client-streaming method's params are its request messages, so
// there the path starts at the first one ("[0].note").
func invalidParamsExample(md protoreflect.MethodDescriptor) *Error {
	var base *loc
	if md.IsStreamingClient() {
		base = index(nil, 0)
	}
	res := NewResolver(nil)
	fields := md.Input().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		val, ok := wrongValue(fd, 0)
		if !ok {
			continue
		}
		params, _ := json.Marshal(map[string]json.RawMessage{fd.JSONName(): val})
		w := &walker{b: params, res: res}
		if p := w.message(md.Input(), base, 0); p != nil && p.path != base {
			return invalidParams(p.path.String(), p.reason)
		}
	}
	return nil
}

// wrongValue is a JSON value that does not fit fd: a number for a string,
// a fraction for an integer, an unknown name for an enum; for a plain
// message, its first field's wrong value inside an object.
func wrongValue(fd protoreflect.FieldDescriptor, depth int) (json.RawMessage, bool) {
	if fd.IsList() || fd.IsMap() {
		return json.RawMessage(`1`), true
	}
	if md := fd.Message(); md != nil {
		name := md.FullName()
		switch {
		case name == "google.protobuf.Value":
			return nil, false // any JSON value fits
		case isWrapper(name):
			return wrongValue(md.Fields().ByName("value"), depth)
		case isWellKnown(name) || depth >= 2 || md.Fields().Len() == 0:
			return json.RawMessage(`1`), true
		}
		inner := md.Fields().Get(0)
		if v, ok := wrongValue(inner, depth+1); ok {
			obj, _ := json.Marshal(map[string]json.RawMessage{inner.JSONName(): v})
			return obj, true
		}
		return json.RawMessage(`1`), true
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
		return json.RawMessage(`1`), true
	case protoreflect.BoolKind:
		return json.RawMessage(`"yes"`), true
	case protoreflect.EnumKind:
		return json.RawMessage(`"NO_SUCH_VALUE"`), true
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return json.RawMessage(`true`), true
	}
	return json.RawMessage(`1.5`), true
}
