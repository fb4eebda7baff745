package mapping

import "google.golang.org/protobuf/reflect/protoreflect"

// The kinds of streaming methods, as "x-grpc-streaming" names them.
const (
	KindServerStreaming = "server-streaming"
	KindClientStreaming = "client-streaming"
	KindBidiStreaming   = "bidirectional-streaming"
)

// StreamingExtension is the member of a method object that describes a
// streaming method. OpenRPC has no streams, so the method's own params and
// result describe a call over HTTP (POST /), where a stream is one request
// and one reply; the extension tells the kind, the schema of one message
// each way, and how params and result differ over HTTP and WebSocket.
const StreamingExtension = "x-grpc-streaming"

// streaming is the value of StreamingExtension.
type streaming struct {
	Kind            string `json:"kind"`
	ClientStreaming bool   `json:"clientStreaming"`
	ServerStreaming bool   `json:"serverStreaming"`
	// Request and Response are the schemas of one message of each side.
	Request  object          `json:"request"`
	Response object          `json:"response"`
	HTTP     streamTransport `json:"http"`
	// HTTPLive, for methods whose responses stream, is a call over
	// POST / asking for its messages as they come (Accept).
	HTTPLive  *streamTransport `json:"httpLive,omitempty"`
	WebSocket streamTransport  `json:"websocket"`
}

// streamTransport is how a call goes over one transport: the schemas of
// the params and result members of the call and its reply, and over
// WebSocket the notifications and methods of an open stream.
type streamTransport struct {
	Description string `json:"description"`
	// ParamsOptional is true where params may be left out (over
	// WebSocket, to send the request messages one at a time).
	ParamsOptional bool           `json:"paramsOptional,omitempty"`
	Params         object         `json:"params"`
	Result         object         `json:"result"`
	Notifications  []notification `json:"notifications,omitempty"`
	Methods        []string       `json:"methods,omitempty"`
	// Accept lists the media types that ask for this form (httpLive).
	Accept []string `json:"accept,omitempty"`
}

// notification is a notification the bridge sends on an open stream.
type notification struct {
	Method string `json:"method"`
	Params object `json:"params"`
}

// streamingMethod turns m, described as unary by method, into the
// description of the streaming method md.
func (s *schemas) streamingMethod(m *method, md protoreflect.MethodDescriptor) {
	req, resp := s.ref(md.Input(), input), s.ref(md.Output(), output)
	messages := object{"type": "array", "items": req}
	responses := object{"type": "array", "items": resp}
	x := &streaming{
		ClientStreaming: md.IsStreamingClient(),
		ServerStreaming: md.IsStreamingServer(),
		Request:         req,
		Response:        resp,
	}
	if md.IsStreamingClient() {
		// By position: params is the array of the request messages. OpenRPC
		// cannot say "any number of", so the one param is the first.
		m.ParamStructure = "by-position"
		m.Params = []descriptor{{
			Name: string(md.Input().Name()),
			Description: "One request message. params is the array of every request message of the call, " +
				"in order, any number of them, each of this schema (" + StreamingExtension + ".http.params).",
			Schema: req,
		}}
	}
	// A server stream keeps "either" from method: its one request message
	// by name or by position, as for a unary call.
	if md.IsStreamingServer() {
		m.Result.Schema = responses
		m.Result.Description = joinText("Every response message of the stream, in order.", m.Result.Description)
	}
	opened := streamOpened()
	events := streamNotifications(resp)
	switch {
	case md.IsStreamingClient() && md.IsStreamingServer():
		x.Kind = KindBidiStreaming
		x.HTTP = streamTransport{
			Description: "Half-duplex: params is the array of the request messages, sent in order before the stream " +
				"is half-closed; result is the array of every response message, in order.",
			Params: messages, Result: responses,
		}
		x.WebSocket = streamTransport{
			Description: "The reply is the stream's id; each response message then arrives as an rpc.stream.message " +
				"notification, and the end as one rpc.stream.end notification. Leave params out for a full-duplex " +
				"stream: send each request message with rpc.stream.send and half-close with rpc.stream.close. " +
				"A params array is sent, and the stream half-closed, at once.",
			ParamsOptional: true, Params: messages, Result: opened, Notifications: events,
			Methods: []string{"rpc.stream.send", "rpc.stream.close", "rpc.stream.cancel"},
		}
	case md.IsStreamingClient():
		x.Kind = KindClientStreaming
		x.HTTP = streamTransport{
			Description: "params is the array of the request messages, in order ([] sends none); result is the one response message.",
			Params:      messages, Result: resp,
		}
		x.WebSocket = streamTransport{
			Description: "With a params array, answered at once as over HTTP. Leave params out to open a stream: the " +
				"reply is the stream's id; send each request message with rpc.stream.send and half-close with " +
				"rpc.stream.close; the response message then arrives as one rpc.stream.message notification, " +
				"followed by rpc.stream.end.",
			ParamsOptional: true, Params: messages, Result: object{"anyOf": []any{resp, opened}}, Notifications: events,
			Methods: []string{"rpc.stream.send", "rpc.stream.close", "rpc.stream.cancel"},
		}
	default:
		x.Kind = KindServerStreaming
		params := object{"anyOf": []any{req, positionalParams(m.Params)}}
		x.HTTP = streamTransport{
			Description: "params is the one request message, by name or by position, as for a unary call; result " +
				"is the array of every response message, in order, once the stream has ended.",
			Params: params, Result: responses,
		}
		x.WebSocket = streamTransport{
			Description: "params as over HTTP. The reply is the stream's id; each response message then arrives as an " +
				"rpc.stream.message notification, and the end as one rpc.stream.end notification.",
			Params: params, Result: opened, Notifications: events,
			Methods: []string{"rpc.stream.cancel"},
		}
	}
	if md.IsStreamingServer() {
		x.HTTPLive = &streamTransport{
			Description: "POST / asking for the messages as they come, with Accept: text/event-stream (Server-Sent Events, " +
				"each event's data one JSON-RPC message) or application/x-ndjson (application/jsonl; one JSON-RPC message " +
				"per line): params as over HTTP; each response message arrives as an rpc.stream.message notification " +
				"whose stream is the request's id, and the reply comes last, its result the number of those " +
				"notifications, or the call's error.",
			Params: x.HTTP.Params, Result: liveResult(), Notifications: liveNotifications(resp),
			Accept: []string{"text/event-stream", "application/x-ndjson", "application/jsonl"},
		}
	}
	m.Streaming = x
}

// liveResult is the schema of the result of a stream answered live.
func liveResult() object {
	return object{
		"type": "object",
		"properties": object{"messages": object{
			"type": "integer", "minimum": 0, "description": "The rpc.stream.message notifications sent before the reply.",
		}},
		"required":             []any{"messages"},
		"additionalProperties": false,
	}
}

// liveNotifications describes the rpc.stream.message notification of a
// stream answered live, whose message is a response message of schema
// resp.
func liveNotifications(resp object) []notification {
	return []notification{{Method: "rpc.stream.message", Params: object{
		"type": "object",
		"properties": object{
			"stream":  object{"type": []any{"string", "number", "null"}, "description": "The id of the request, as it sent it."},
			"message": resp,
		},
		"required":             []any{"stream", "message"},
		"additionalProperties": false,
	}}}
}

// positionalParams is the schema of params by position whose elements are
// the params ps, in order: element i is the value of ps[i] (whose schema
// allows null, which leaves the field unset), and there are no more
// elements than params.
func positionalParams(ps []descriptor) object {
	items := make([]any, len(ps))
	for i, p := range ps {
		items[i] = p.Schema
	}
	return object{
		"type":            "array",
		"description":     "The request message by position: element i is the value of param i of the method; null or a missing element leaves its field unset.",
		"items":           items,
		"additionalItems": false,
	}
}

// streamOpened is the schema of the reply that opens a stream over
// WebSocket.
func streamOpened() object {
	return object{
		"type":                 "object",
		"properties":           object{"stream": streamID()},
		"required":             []any{"stream"},
		"additionalProperties": false,
	}
}

func streamID() object {
	return object{"type": "string", "description": "The stream's id, unique on the connection."}
}

// streamNotifications describes rpc.stream.message and rpc.stream.end,
// whose message is a response message of schema resp.
func streamNotifications(resp object) []notification {
	return []notification{
		{Method: "rpc.stream.message", Params: object{
			"type":                 "object",
			"properties":           object{"stream": streamID(), "message": resp},
			"required":             []any{"stream", "message"},
			"additionalProperties": false,
		}},
		{Method: "rpc.stream.end", Params: object{
			"type": "object",
			"properties": object{
				"stream": streamID(),
				"error": object{
					"description": "Present when the stream ended with an error, mapped as for a unary call.",
					"type":        "object",
					"properties": object{
						"code":    object{"type": "integer"},
						"message": object{"type": "string"},
						"data":    object{},
					},
					"required": []any{"code", "message"},
				},
			},
			"required":             []any{"stream"},
			"additionalProperties": false,
		}},
	}
}

// joinText joins two descriptions with a blank line, leaving out an empty
// one.
func joinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}
