package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// sourceKeys are the settings that say where the services come from, the
// flags of list and describe.
var sourceKeys = []string{config.KeyBackend, "protoset", "proto", "import_path", "call_timeout"}

// sourcesHelp ends the help of list and describe.
const sourcesHelp = "The services come from a FileDescriptorSet (--protoset), .proto sources\n" +
	"(--proto, with -I import paths) or a backend's server reflection (--backend, or\n" +
	"the backends of --config FILE), as for openrpc."

func newListCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [SERVICE] (--backend HOST:PORT | --protoset FILE | --proto FILE [-I DIR])",
		Short: "Print the name of every JSON-RPC method and exit",
		Long: "list prints the JSON-RPC name of every method the bridge would serve, one per\n" +
			"line, sorted: the names to call, such as helloworld.Greeter.SayHello (a\n" +
			"package named rpc gets a leading dot: .rpc.ops.Ops.Ping). With SERVICE (a\n" +
			"full service name, such as helloworld.Greeter), only that service's methods.\n\n" + sourcesHelp,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("list takes at most one SERVICE, such as helloworld.Greeter, and got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			_, methods, err := sourceMethods(cmd, stderr)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if methods, err = serviceMethods(methods, args[0]); err != nil {
					return usageError(err)
				}
			}
			names := methodNames(methods)
			slices.Sort(names)
			var b strings.Builder
			for _, n := range names {
				b.WriteString(n + "\n")
			}
			_, err = io.WriteString(stdout, b.String())
			return err
		},
	}
	config.RegisterOnly(cmd.Flags(), sourceKeys...)
	return cmd
}

func newDescribeCmd(stdout, stderr io.Writer) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "describe METHOD [--format json|proto] (--backend HOST:PORT | --protoset FILE | --proto FILE [-I DIR])",
		Short: "Print the params and result schemas of a method, with example params, or its .proto source, and exit",
		Long: "describe prints, as one JSON object, what the bridge serves as METHOD (a name\n" +
			"list prints, or the gRPC name as grpcurl takes it: helloworld.Greeter/SayHello):\n" +
			"its gRPC method, streaming kind and comments, an example params\n" +
			"object (exampleParams: every field with a placeholder of its type), and the\n" +
			"JSON Schemas of its params and result, the same as in the OpenRPC document,\n" +
			"with the component schemas they refer to.\n\n" +
			"With --format proto it prints .proto source instead, as grpcurl's describe does,\n" +
			"with the comments the descriptors carry: for METHOD its rpc line and its request\n" +
			"and response messages; the name may also be a SERVICE (helloworld.Greeter) or a\n" +
			"MESSAGE or enum that the services use (helloworld.HelloRequest).\n\n" + sourcesHelp,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("describe takes one METHOD, such as helloworld.Greeter.SayHello, and got %d arguments (list prints the methods)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return usageError(err)
			}
			s, methods, err := sourceMethods(cmd, stderr)
			if err != nil {
				return err
			}
			var out []byte
			if format == "proto" {
				d, err := findDefinition(methods, args[0])
				if err != nil {
					return usageError(err)
				}
				if out, err = protoText(d); err != nil {
					return failure(err)
				}
			} else {
				md, err := findMethod(methods, args[0])
				if err != nil {
					return usageError(withProtoHint(err, methods, args[0]))
				}
				if out, err = describe(md, s.EmitUnpopulated); err != nil {
					return failure(err)
				}
			}
			_, err = stdout.Write(out)
			return err
		},
	}
	config.RegisterOnly(cmd.Flags(), append(slices.Clone(sourceKeys), "emit_unpopulated")...)
	cmd.Flags().StringVar(&format, "format", describeFormats[0],
		"what to print: json (the method's schemas and example params) or proto (the .proto source of a method, service, message or enum)")
	return cmd
}

// sourceMethods are the methods of the descriptor source the settings of
// cmd give, as openrpc finds them.
func sourceMethods(cmd *cobra.Command, stderr io.Writer) (config.Settings, []protoreflect.MethodDescriptor, error) {
	s, log, err := settingsAndLogger(cmd, stderr)
	if err != nil {
		return s, nil, err
	}
	methods, err := documentMethods(cmd.Context(), s, log)
	return s, methods, err
}

func methodNames(methods []protoreflect.MethodDescriptor) []string {
	names := make([]string, len(methods))
	for i, md := range methods {
		names[i] = mapping.MethodName(md)
	}
	return names
}

// serviceName is the full name of md's service as list and describe take
// it: protobuf's, with the leading dot where the JSON-RPC name has one
// (a package named rpc).
func serviceName(md protoreflect.MethodDescriptor) string {
	name := mapping.MethodName(md)
	return name[:len(name)-len(md.Name())-1]
}

// serviceMethods returns the methods of the service named service (with
// or without the leading dot of a package named rpc), or an error
// suggesting the nearest service names.
func serviceMethods(methods []protoreflect.MethodDescriptor, service string) ([]protoreflect.MethodDescriptor, error) {
	var out []protoreflect.MethodDescriptor
	var services []string
	for _, md := range methods {
		s := serviceName(md)
		if s == service || string(md.Parent().FullName()) == service {
			out = append(out, md)
		}
		if !slices.Contains(services, s) {
			services = append(services, s)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	msg := fmt.Sprintf("no service %q", service)
	slices.Sort(services)
	if near := config.Suggest(service, services); len(near) > 0 {
		msg += ": " + config.DidYouMean(near, strconv.Quote)
	} else if _, err := findMethod(methods, service); err == nil {
		msg += ": it is a method (describe prints it)"
	}
	if len(services) == 0 {
		return nil, errors.New(msg + ": there are no services")
	}
	return nil, errors.New(msg + " (list without SERVICE prints every method)")
}

// findMethod returns the method of methods whose JSON-RPC name is name, or
// whose gRPC name is (as grpcurl spells it: helloworld.Greeter/SayHello,
// with or without the leading slash), or an error suggesting the nearest
// names.
func findMethod(methods []protoreflect.MethodDescriptor, name string) (protoreflect.MethodDescriptor, error) {
	names := methodNames(methods)
	if i := slices.Index(names, name); i >= 0 {
		return methods[i], nil
	}
	if strings.Contains(name, "/") {
		path := "/" + strings.TrimPrefix(name, "/")
		for _, md := range methods {
			if path == "/"+string(md.Parent().FullName())+"/"+string(md.Name()) {
				return md, nil
			}
		}
	}
	var ofService []string // name is a service: its methods
	for i, md := range methods {
		if serviceName(md) == name || string(md.Parent().FullName()) == name {
			ofService = append(ofService, names[i])
		}
	}
	if len(ofService) > 0 {
		slices.Sort(ofService)
		return nil, fmt.Errorf("%q is a service, not a method: describe one of its methods, %s", name, strings.Join(ofService, ", "))
	}
	slices.Sort(names)
	near := config.Suggest(name, names)
	if len(near) == 0 { // the same method name in another service or package
		last := name[strings.LastIndexAny(name, "./")+1:]
		for _, n := range names {
			if strings.EqualFold(n[strings.LastIndex(n, ".")+1:], last) && len(near) < 3 {
				near = append(near, n)
			}
		}
	}
	msg := fmt.Sprintf("no method %q", name)
	if len(near) > 0 {
		msg += ": " + config.DidYouMean(near, strconv.Quote)
	}
	if len(names) == 0 {
		return nil, errors.New(msg + ": the services have no methods")
	}
	return nil, errors.New(msg + " (list prints every method)")
}

// description is what describe prints.
type description struct {
	Name        string          `json:"name"`
	GRPCMethod  string          `json:"x-grpc-method"`
	Streaming   string          `json:"streaming,omitempty"` // the kind, for streaming methods
	Summary     string          `json:"summary,omitempty"`
	Description string          `json:"description,omitempty"`
	Example     json.RawMessage `json:"exampleParams"`
	Params      any             `json:"params"`
	Result      any             `json:"result"`
	Components  struct {
		Schemas map[string]any `json:"schemas"`
	} `json:"components"`
}

// describe renders the description of md. Its schemas are those of the
// OpenRPC document of md: the whole params of a call over HTTP (the
// request message by name; for a client or bidirectional stream, the
// array x-grpc-streaming.http gives) and the method's result, with every component they refer
// to, so that "#/components/schemas/..." references resolve in it.
func describe(md protoreflect.MethodDescriptor, emitUnpopulated bool) ([]byte, error) {
	raw, err := mapping.Document([]protoreflect.MethodDescriptor{md}, mapping.DocumentOptions{EmitUnpopulated: emitUnpopulated})
	if err != nil {
		return nil, err
	}
	var doc struct {
		Methods []struct {
			Name        string `json:"name"`
			Summary     string `json:"summary"`
			Description string `json:"description"`
			GRPCMethod  string `json:"x-grpc-method"`
			Result      struct {
				Schema any `json:"schema"`
			} `json:"result"`
			Streaming *struct {
				Kind string `json:"kind"`
				HTTP struct {
					Params any `json:"params"`
				} `json:"http"`
			} `json:"x-grpc-streaming"`
		} `json:"methods"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if len(doc.Methods) != 1 {
		return nil, fmt.Errorf("describe: the document of %s has %d methods", md.FullName(), len(doc.Methods))
	}
	m := doc.Methods[0]
	d := description{Name: m.Name, GRPCMethod: m.GRPCMethod, Summary: m.Summary, Description: m.Description,
		Example: exampleParams(md), Result: m.Result.Schema}
	if m.Streaming != nil {
		d.Streaming = m.Streaming.Kind
	}
	if md.IsStreamingClient() {
		d.Params = m.Streaming.HTTP.Params // the array of the request messages
	} else { // one request message, shown by name as for a unary method
		input := string(md.Input().FullName()) + mapping.InputSuffix
		if _, ok := doc.Components.Schemas[input]; !ok {
			return nil, fmt.Errorf("describe: the document of %s has no schema %s", md.FullName(), input)
		}
		d.Params = map[string]any{"$ref": schemaRef + input}
	}
	d.Components.Schemas = map[string]any{}
	pending := []any{d.Params, d.Result}
	for len(pending) > 0 {
		v := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		for _, name := range refs(v, nil) {
			if _, done := d.Components.Schemas[name]; done {
				continue
			}
			sch, ok := doc.Components.Schemas[name]
			if !ok {
				return nil, fmt.Errorf("describe: the document of %s refers to a missing schema %s", md.FullName(), name)
			}
			d.Components.Schemas[name] = sch
			pending = append(pending, sch)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// schemaRef starts every reference into components.schemas.
const schemaRef = "#/components/schemas/"

// refs appends to out the component names that the schema v refers to.
func refs(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" && strings.HasPrefix(s, schemaRef) {
				out = append(out, strings.TrimPrefix(s, schemaRef))
			} else {
				out = refs(x, out)
			}
		}
	case []any:
		for _, x := range v {
			out = refs(x, out)
		}
	}
	return out
}
