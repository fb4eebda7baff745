package mapping_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// TestStreamingMethods: each streaming method of the demo is a method of
// the document whose params and result describe a call over HTTP, and whose
// x-grpc-streaming tells its kind and the WebSocket forms. Real values of
// each form validate against the schemas, and values of the other forms
// do not.
func TestStreamingMethods(t *testing.T) {
	doc := document(t, serviceMethods(t, protosetFiles(t), "demo.v1.Notes"), mapping.DocumentOptions{})
	if err := metaSchema(t).Validate(unmarshalJSON(t, doc)); err != nil {
		t.Fatalf("document does not validate against the meta-schema: %v", err)
	}
	d := parseDoc(t, doc)
	s := newDocSchemas(t, doc)
	const (
		note     = `{"id": "n1", "title": "Welcome", "tags": ["intro"], "createdAt": "2026-01-02T03:04:05Z", "views": "1"}`
		opened   = `{"stream": "s1"}`
		imported = `{"ids": ["n2", "n3"], "count": "2"}`
	)
	type sample struct {
		json string
		ok   bool
	}
	tests := []struct {
		method, kind, structure string
		client, server          bool
		params                  []string // JSON names of the method's params
		httpParams, httpResult  []sample
		wsParamsOptional        bool
		wsResult                []sample
		wsMethods               []string
	}{
		{
			method: "demo.v1.Notes.WatchNotes", kind: mapping.KindServerStreaming, structure: "either", server: true,
			params: []string{"tags", "follow"},
			httpParams: []sample{{`{"tags": ["intro"], "follow": false}`, true}, {`{}`, true}, {`{"tag": "x"}`, false},
				{`[["intro"], false]`, true}, {`[]`, true}, {`[null, true]`, true}, {`[{"tags": ["intro"]}]`, false}, {`[["intro"], false, 1]`, false}, {`["intro"]`, false}},
			httpResult: []sample{{`[` + note + `, ` + note + `]`, true}, {`[]`, true}, {note, false}, {opened, false}},
			wsResult:   []sample{{opened, true}, {`[]`, false}, {`{"stream": 1}`, false}},
			wsMethods:  []string{"rpc.stream.cancel"},
		},
		{
			method: "demo.v1.Notes.ImportNotes", kind: mapping.KindClientStreaming, structure: "by-position", client: true,
			params:           []string{"CreateNoteRequest"},
			httpParams:       []sample{{`[{"note": {"title": "Milk"}}, {"note": {"title": "Eggs"}}]`, true}, {`[]`, true}, {`{"note": {"title": "Milk"}}`, false}, {`[{"title": "Milk"}]`, false}},
			httpResult:       []sample{{imported, true}, {`{}`, true}, {`[` + imported + `]`, false}, {`{"count": 2}`, false}},
			wsParamsOptional: true,
			wsResult:         []sample{{opened, true}, {imported, true}, {`[]`, false}},
			wsMethods:        []string{"rpc.stream.send", "rpc.stream.close", "rpc.stream.cancel"},
		},
		{
			method: "demo.v1.Notes.TagNotes", kind: mapping.KindBidiStreaming, structure: "by-position", client: true, server: true,
			params:           []string{"TagNoteRequest"},
			httpParams:       []sample{{`[{"id": "n1", "tag": "pinned"}, {"id": "n1", "tag": "todo"}]`, true}, {`[]`, true}, {`{"id": "n1", "tag": "x"}`, false}, {`[{"id": 1}]`, false}},
			httpResult:       []sample{{`[` + note + `]`, true}, {`[]`, true}, {note, false}},
			wsParamsOptional: true,
			wsResult:         []sample{{opened, true}, {`[` + note + `]`, false}},
			wsMethods:        []string{"rpc.stream.send", "rpc.stream.close", "rpc.stream.cancel"},
		},
	}
	index := map[string]int{}
	for i, m := range d.Methods {
		index[m.Name] = i
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			i, ok := index[tt.method]
			if !ok {
				t.Fatalf("methods lack %s", tt.method)
			}
			m := d.Methods[i]
			x := m.Streaming
			if x == nil {
				t.Fatalf("%s has no x-grpc-streaming", tt.method)
			}
			if x.Kind != tt.kind || x.ClientStreaming != tt.client || x.ServerStreaming != tt.server {
				t.Errorf("kind = %s client %v server %v, want %s %v %v", x.Kind, x.ClientStreaming, x.ServerStreaming, tt.kind, tt.client, tt.server)
			}
			if m.ParamStructure != tt.structure {
				t.Errorf("paramStructure = %s, want %s", m.ParamStructure, tt.structure)
			}
			var names []string
			for _, p := range m.Params {
				names = append(names, p.Name)
			}
			if !slices.Equal(names, tt.params) {
				t.Errorf("params %v, want %v", names, tt.params)
			}
			if x.WebSocket.ParamsOptional != tt.wsParamsOptional {
				t.Errorf("websocket.paramsOptional = %v, want %v", x.WebSocket.ParamsOptional, tt.wsParamsOptional)
			}
			if !slices.Equal(x.WebSocket.Methods, tt.wsMethods) {
				t.Errorf("websocket.methods = %v, want %v", x.WebSocket.Methods, tt.wsMethods)
			}
			if x.HTTP.Description == "" || x.WebSocket.Description == "" {
				t.Error("a transport has no description")
			}
			base := "/methods/" + strconv.Itoa(i)
			check := func(what, ptr string, samples []sample) {
				t.Helper()
				sch := s.pointer(ptr)
				for _, c := range samples {
					err := sch.Validate(unmarshalJSON(t, []byte(c.json)))
					if (err == nil) != c.ok {
						t.Errorf("%s %s: valid = %v, want %v (%v)", what, c.json, err == nil, c.ok, err)
					}
				}
			}
			check("http params", base+"/x-grpc-streaming/http/params", tt.httpParams)
			check("websocket params", base+"/x-grpc-streaming/websocket/params", tt.httpParams)
			check("result", base+"/result/schema", tt.httpResult)
			check("http result", base+"/x-grpc-streaming/http/result", tt.httpResult)
			check("websocket result", base+"/x-grpc-streaming/websocket/result", tt.wsResult)
			response := note
			if tt.method == "demo.v1.Notes.ImportNotes" {
				response = imported
			}
			check("response message", base+"/x-grpc-streaming/response", []sample{{response, true}, {`[` + response + `]`, false}})
			var events []string
			for _, n := range x.WebSocket.Notifications {
				events = append(events, n.Method)
			}
			if !slices.Equal(events, []string{"rpc.stream.message", "rpc.stream.end"}) {
				t.Fatalf("websocket notifications %v, want rpc.stream.message and rpc.stream.end", events)
			}
			check("rpc.stream.message params", base+"/x-grpc-streaming/websocket/notifications/0/params", []sample{
				{`{"stream": "s1", "message": ` + response + `}`, true},
				{`{"stream": "s1"}`, false},
			})
			check("rpc.stream.end params", base+"/x-grpc-streaming/websocket/notifications/1/params", []sample{
				{`{"stream": "s1"}`, true},
				{`{"stream": "s1", "error": {"code": 5, "message": "gone", "data": {"status": "NOT_FOUND", "details": []}}}`, true},
				{`{"stream": "s1", "error": {"code": "5"}}`, false},
			})
			// httpLive: the methods whose responses stream can stream over
			// POST / (Accept), with the params of HTTP.
			if (x.HTTPLive != nil) != tt.server {
				t.Fatalf("httpLive = %+v, want it exactly for methods whose responses stream", x.HTTPLive)
			}
			if !tt.server {
				return
			}
			if !slices.Equal(x.HTTPLive.Accept, []string{"text/event-stream", "application/x-ndjson", "application/jsonl"}) || x.HTTPLive.Description == "" {
				t.Errorf("httpLive: accept %v, description %q, want the three media types and a description", x.HTTPLive.Accept, x.HTTPLive.Description)
			}
			check("httpLive params", base+"/x-grpc-streaming/httpLive/params", tt.httpParams)
			check("httpLive result", base+"/x-grpc-streaming/httpLive/result", []sample{
				{`{"messages": 3}`, true}, {`{"messages": 0}`, true}, {`{"messages": -1}`, false}, {`{"messages": "3"}`, false}, {`{}`, false}, {`[]`, false},
			})
			if len(x.HTTPLive.Notifications) != 1 || x.HTTPLive.Notifications[0].Method != "rpc.stream.message" {
				t.Fatalf("httpLive notifications %+v, want rpc.stream.message", x.HTTPLive.Notifications)
			}
			check("httpLive rpc.stream.message params", base+"/x-grpc-streaming/httpLive/notifications/0/params", []sample{
				{`{"stream": 1, "message": ` + response + `}`, true},
				{`{"stream": "a", "message": ` + response + `}`, true},
				{`{"stream": 1}`, false},
				{`{"stream": {}, "message": ` + response + `}`, false},
			})
		})
	}
	for _, m := range d.Methods {
		if m.Name == "demo.v1.Notes.GetNote" && m.Streaming != nil {
			t.Errorf("unary GetNote has x-grpc-streaming %+v", m.Streaming)
		}
	}
	if want := []string{"demo.v1.Notes.ImportNotes", "demo.v1.Notes.TagNotes", "demo.v1.Notes.WatchNotes"}; !slices.Equal(d.Streaming, want) {
		t.Errorf("x-streaming-methods = %v, want %v", d.Streaming, want)
	}
}
