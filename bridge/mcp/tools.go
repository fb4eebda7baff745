package mcp

import (
	"encoding/json"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// The members of structuredContent that hold a result that is not a JSON
// object: the array of a server stream's messages, and the JSON of a
// well-known type such as google.protobuf.Timestamp.
const (
	MessagesKey = "messages"
	ResultKey   = "result"
)

// tool is one method served as a tool.
type tool struct {
	method string // the JSON-RPC name
	stream bool   // server-streaming: the result collects the messages
	// wrap is the member of structuredContent that holds the result, or
	// "" when the result is the object itself.
	wrap string
	def  *sdk.Tool
	json []byte // def's JSON, to tell a changed tool from the same one
}

// Tools returns the tools of methods: one per unary and server-streaming
// method (client and bidirectional streams are left out), named by
// ToolNames, keyed by name. emitUnpopulated is the bridge's, which shapes
// the result schemas.
func Tools(methods []protoreflect.MethodDescriptor, emitUnpopulated bool) map[string]*sdk.Tool {
	out := make(map[string]*sdk.Tool)
	for name, t := range buildTools(methods, emitUnpopulated) {
		out[name] = t.def
	}
	return out
}

func buildTools(methods []protoreflect.MethodDescriptor, emitUnpopulated bool) map[string]*tool {
	var served []protoreflect.MethodDescriptor
	var names []string
	for _, md := range methods {
		if md.IsStreamingClient() {
			continue
		}
		served = append(served, md)
		names = append(names, mapping.MethodName(md))
	}
	byMethod, _ := ToolNames(names)
	tools := make(map[string]*tool, len(served))
	for _, md := range served {
		method := mapping.MethodName(md)
		name, ok := byMethod[method]
		if !ok || !ValidName(name) {
			continue
		}
		t := newTool(md, name, emitUnpopulated)
		tools[name] = t
	}
	return tools
}

func newTool(md protoreflect.MethodDescriptor, name string, emitUnpopulated bool) *tool {
	params, result := mapping.MethodSchemas(md, emitUnpopulated)
	t := &tool{method: mapping.MethodName(md), stream: md.IsStreamingServer()}
	if params["type"] != "object" { // a well-known type taken as params: MCP wants an object
		params = map[string]any{"type": "object", "allOf": []any{params}}
	}
	switch {
	case t.stream:
		t.wrap = MessagesKey
	case result["type"] != "object":
		t.wrap = ResultKey
	}
	if t.wrap != "" {
		defs := result["$defs"]
		delete(result, "$defs")
		result = map[string]any{"type": "object", "properties": map[string]any{t.wrap: result}, "required": []any{t.wrap}}
		if defs != nil {
			result["$defs"] = defs
		}
	}
	t.def = &sdk.Tool{
		Name:         name,
		Title:        t.method,
		Description:  description(md),
		InputSchema:  params,
		OutputSchema: result,
		Annotations:  annotations(md),
	}
	t.json, _ = json.Marshal(t.def)
	return t
}

// description is the tool's description: the comments of the method and
// of its service, and what a server stream's result holds.
func description(md protoreflect.MethodDescriptor) string {
	grpcMethod := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	var parts []string
	if c := mapping.Comments(md); c != "" {
		parts = append(parts, c)
	} else {
		parts = append(parts, "Calls the gRPC method "+grpcMethod+".")
	}
	if opts, ok := md.Options().(*descriptorpb.MethodOptions); ok && opts.GetDeprecated() {
		parts = append(parts, "Deprecated.")
	}
	if md.IsStreamingServer() {
		parts = append(parts, "Server streaming: the result's "+MessagesKey+" are every response message, in order, "+
			"once the stream has ended; each is reported as a progress notification as it arrives.")
	}
	if sd, ok := md.Parent().(protoreflect.ServiceDescriptor); ok {
		if c := mapping.Comments(sd); c != "" {
			parts = append(parts, "Service "+string(sd.FullName())+": "+c)
		}
	}
	return strings.Join(parts, "\n\n")
}

// annotations are the hints protobuf's idempotency_level gives, nil when
// it gives none.
func annotations(md protoreflect.MethodDescriptor) *sdk.ToolAnnotations {
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok {
		return nil
	}
	switch opts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
		return &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	case descriptorpb.MethodOptions_IDEMPOTENT:
		return &sdk.ToolAnnotations{IdempotentHint: true}
	}
	return nil
}
