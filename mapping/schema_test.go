package mapping_test

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// schemaCase is one value of one field of test.v1.AllTypes: whether the
// bridge accepts it in params. The params schema must agree, and when it
// is accepted the result the bridge sends back must match the result
// schema.
type schemaCase struct {
	name   string
	params string
	ok     bool
}

var allTypesCases = []schemaCase{
	{"double number", `{"fDouble": 1.5}`, true},
	{"double NaN", `{"fDouble": "NaN"}`, true},
	{"double Infinity", `{"fDouble": "Infinity"}`, true},
	{"double -Infinity", `{"fDouble": "-Infinity"}`, true},
	{"double numeric string", `{"fDouble": "2.5e3"}`, true},
	{"double word", `{"fDouble": "lots"}`, false},
	{"double bool", `{"fDouble": true}`, false},
	{"float number", `{"fFloat": 3.25}`, true},
	{"float max", `{"fFloat": 3.4028235e38}`, true},
	{"float out of range", `{"fFloat": 1e39}`, false},
	{"int32 number", `{"fInt32": -7}`, true},
	{"int32 string", `{"fInt32": "42"}`, true},
	{"int32 exponent", `{"fInt32": 1e2}`, true},
	{"int32 fraction", `{"fInt32": 1.5}`, false},
	{"int32 too big", `{"fInt32": 2147483648}`, false},
	{"int32 word", `{"fInt32": "seven"}`, false},
	{"int64 string", `{"fInt64": "-9223372036854775808"}`, true},
	{"int64 number", `{"fInt64": 12}`, true},
	{"int64 too big", `{"fInt64": 9223372036854775808}`, false},
	{"int64 word", `{"fInt64": "12a"}`, false},
	{"uint32 number", `{"fUint32": 4294967295}`, true},
	{"uint32 negative", `{"fUint32": -1}`, false},
	{"uint64 string", `{"fUint64": "18446744073709551615"}`, true},
	{"uint64 negative", `{"fUint64": -1}`, false},
	{"sint32", `{"fSint32": -5}`, true},
	{"sint64", `{"fSint64": "-5"}`, true},
	{"fixed32", `{"fFixed32": 5}`, true},
	{"fixed64", `{"fFixed64": "5"}`, true},
	{"sfixed32", `{"fSfixed32": -5}`, true},
	{"sfixed64", `{"fSfixed64": -5}`, true},
	{"bool", `{"fBool": true}`, true},
	{"bool string", `{"fBool": "true"}`, false},
	{"string", `{"fString": "héllo"}`, true},
	{"string number", `{"fString": 5}`, false},
	{"bytes", `{"fBytes": "aGVsbG8="}`, true},
	{"bytes url-safe unpadded", `{"fBytes": "_-8"}`, true},
	{"bytes not base64", `{"fBytes": "!!!"}`, false},
	{"enum name", `{"fEnum": "COLOR_RED"}`, true},
	{"enum number", `{"fEnum": 2}`, true},
	{"enum unknown name", `{"fEnum": "COLOR_BLUE"}`, false},
	{"message", `{"fMessage": {"name": "n", "big": "9"}}`, true},
	{"message proto names", `{"f_message": {"name": "n", "big": 9}}`, true},
	{"message unknown field", `{"fMessage": {"nick": "n"}}`, false},
	{"message as string", `{"fMessage": "n"}`, false},
	{"both names of one field", `{"fInt32": 1, "f_int32": 2}`, false},
	{"unknown field", `{"fNope": 1}`, false},
	{"null field", `{"fInt32": null, "fMessage": null, "rInt64": null}`, true},
	{"repeated int64", `{"rInt64": ["1", 2]}`, true},
	{"repeated null element", `{"rInt64": [null]}`, false},
	{"repeated as scalar", `{"rString": "a"}`, false},
	{"repeated message", `{"rMessage": [{"name": "a"}]}`, true},
	{"repeated enum", `{"rEnum": ["COLOR_GREEN", 1]}`, true},
	{"map string int64", `{"mStringInt64": {"a": "1", "b": 2}}`, true},
	{"map bad value", `{"mStringInt64": {"a": "x"}}`, false},
	{"map int32 keys", `{"mInt32Message": {"-3": {"name": "n"}}}`, true},
	{"map int32 bad key", `{"mInt32Message": {"three": {}}}`, false},
	{"map bool keys", `{"mBoolString": {"true": "y", "false": "n"}}`, true},
	{"map bool bad key", `{"mBoolString": {"yes": "y"}}`, false},
	{"oneof one member", `{"oString": "s"}`, true},
	{"oneof other member", `{"oMessage": {"name": "m"}}`, true},
	{"oneof two members", `{"oString": "s", "oMessage": {}}`, false},
	{"oneof two members by proto name", `{"o_string": "s", "oMessage": {}}`, false},
	{"oneof member and null", `{"oString": "s", "oMessage": null}`, true},
	{"recursive", `{"tree": {"value": "a", "children": [{"value": "b", "children": [{"value": "c"}]}]}}`, true},
	{"recursive bad leaf", `{"tree": {"children": [{"children": [{"value": 1}]}]}}`, false},
	{"proto3 optional", `{"optInt32": 0}`, true},
	{"timestamp", `{"wktTimestamp": "2024-05-01T12:00:00.5Z"}`, true},
	{"timestamp offset", `{"wktTimestamp": "2024-05-01T12:00:00+02:00"}`, true},
	{"timestamp no zone", `{"wktTimestamp": "2024-05-01T12:00:00"}`, false},
	{"timestamp number", `{"wktTimestamp": 1714564800}`, false},
	{"duration", `{"wktDuration": "1.5s"}`, true},
	{"duration negative", `{"wktDuration": "-3s"}`, true},
	{"duration no unit", `{"wktDuration": "1.5"}`, false},
	{"duration minutes", `{"wktDuration": "1m"}`, false},
	{"struct", `{"wktStruct": {"a": [1, "b", null, {"c": true}]}}`, true},
	{"struct as array", `{"wktStruct": [1]}`, false},
	{"value anything", `{"wktValue": {"x": [1, 2]}}`, true},
	{"value null", `{"wktValue": null}`, true},
	{"list", `{"wktList": [1, "a", null]}`, true},
	{"list as object", `{"wktList": {}}`, false},
	{"null value", `{"wktNull": null}`, true},
	{"null value name", `{"wktNull": "NULL_VALUE"}`, true},
	{"null value other", `{"wktNull": "NOTHING"}`, false},
	{"int64 wrapper", `{"wktInt64": "5"}`, true},
	{"int64 wrapper number", `{"wktInt64": 5}`, true},
	{"int64 wrapper object", `{"wktInt64": {"value": "5"}}`, false},
	{"string wrapper", `{"wktString": ""}`, true},
	{"bool wrapper", `{"wktBool": false}`, true},
	{"double wrapper", `{"wktDouble": "NaN"}`, true},
	{"bytes wrapper", `{"wktBytes": "AAE="}`, true},
	{"wrapper null", `{"wktString": null}`, true},
	{"field mask", `{"wktFieldMask": "fInt32,fMessage.name"}`, true},
	{"field mask array", `{"wktFieldMask": ["a"]}`, false},
	{"any", `{"wktAny": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "2s"}}`, true},
	{"any empty", `{"wktAny": {}}`, true},
	{"any without type", `{"wktAny": {"value": "2s"}}`, false},
	{"empty", `{"wktEmpty": {}}`, true},
	{"empty with field", `{"wktEmpty": {"a": 1}}`, false},
}

// TestSchemaMatchesProtojson runs every case through the bridge's codec and
// through the Echo method's params schema: they must agree, and the
// echoed result must match the result schema.
func TestSchemaMatchesProtojson(t *testing.T) {
	files := protosetFiles(t)
	mds := serviceMethods(t, files, "test.v1.TestService")
	var echo protoreflect.MethodDescriptor
	for _, md := range mds {
		if md.Name() == "Echo" {
			echo = md
		}
	}
	for _, emit := range []bool{false, true} {
		doc := document(t, mds, mapping.DocumentOptions{EmitUnpopulated: emit})
		s := newDocSchemas(t, doc)
		in := s.component("test.v1.AllTypes-input")
		out := s.component("test.v1.AllTypes")
		codec := mapping.NewCodec(echo, nil, mapping.Options{EmitUnpopulated: emit})
		for _, tt := range allTypesCases {
			m, rpcErr := codec.Request([]byte(tt.params))
			if (rpcErr == nil) != tt.ok {
				t.Fatalf("%s: the bridge accepts %s = %v, want %v (%v): fix the case", tt.name, tt.params, rpcErr == nil, tt.ok, rpcErr)
			}
			if err := in.Validate(unmarshalJSON(t, []byte(tt.params))); (err == nil) != tt.ok {
				t.Errorf("%s (emitUnpopulated=%v): params schema accepts %s = %v, want %v as the bridge (%v)", tt.name, emit, tt.params, err == nil, tt.ok, err)
			}
			if !tt.ok {
				continue
			}
			res, err := codec.AppendResult(nil, m)
			if err != nil {
				t.Fatal(err)
			}
			if err := out.Validate(unmarshalJSON(t, res)); err != nil {
				t.Errorf("%s (emitUnpopulated=%v): result %s does not match the result schema: %v", tt.name, emit, res, err)
			}
		}
	}
}

// The result schema describes what protojson writes, which is narrower
// than what it reads.
func TestResultSchemaRejectsInputForms(t *testing.T) {
	mds := serviceMethods(t, protosetFiles(t), "test.v1.TestService")
	out := newDocSchemas(t, document(t, mds, mapping.DocumentOptions{})).component("test.v1.AllTypes")
	for _, res := range []string{
		`{"fInt64": 5}`,           // 64-bit integers are strings in results
		`{"fInt32": "5"}`,         // 32-bit integers are numbers
		`{"fEnum": "COLOR_BLUE"}`, // not a name of the enum
		`{"f_int32": 5}`,          // results use JSON names
		`{"fDouble": "1.5"}`,      // finite floats are numbers
		`{"wktDuration": "1.50s"}`,
		`{"fInt32": null}`, // no nulls without EmitUnpopulated
	} {
		if err := out.Validate(unmarshalJSON(t, []byte(res))); err == nil {
			t.Errorf("result schema accepts %s, want it rejected", res)
		}
	}
}

// TestSchemaShapes pins the schema of each kind of field, as docs/openrpc.md
// describes it.
func TestSchemaShapes(t *testing.T) {
	d := parseDoc(t, document(t, serviceMethods(t, protosetFiles(t), "test.v1.TestService"), mapping.DocumentOptions{}))
	out := d.Components.Schemas["test.v1.AllTypes"]["properties"].(map[string]any)
	in := d.Components.Schemas["test.v1.AllTypes-input"]["properties"].(map[string]any)
	tests := []struct {
		field    string
		key      string
		wantOut  any
		wantIn   any
		inSchema map[string]any // when set, compares the whole param schema
	}{
		{field: "fInt32", key: "type", wantOut: "integer", wantIn: []any{"integer", "string", "null"}},
		{field: "fInt64", key: "type", wantOut: "string", wantIn: []any{"integer", "string", "null"}},
		{field: "fUint64", key: "type", wantOut: "string", wantIn: []any{"integer", "string", "null"}},
		{field: "fBool", key: "type", wantOut: "boolean", wantIn: []any{"boolean", "null"}},
		{field: "fString", key: "type", wantOut: "string", wantIn: []any{"string", "null"}},
		{field: "fBytes", key: "contentEncoding", wantOut: "base64", wantIn: "base64"},
		{field: "rInt64", key: "type", wantOut: "array", wantIn: []any{"array", "null"}},
		{field: "mStringInt64", key: "type", wantOut: "object", wantIn: []any{"object", "null"}},
		{field: "fEnum", key: "$ref", wantOut: "#/components/schemas/test.v1.Color"},
		{field: "fMessage", key: "$ref", wantOut: "#/components/schemas/test.v1.Inner"},
		{field: "tree", key: "$ref", wantOut: "#/components/schemas/test.v1.Tree"},
		{field: "wktTimestamp", key: "$ref", wantOut: "#/components/schemas/google.protobuf.Timestamp"},
		{field: "wktNull", key: "type", wantOut: "null"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			o := out[tt.field].(map[string]any)
			if got := o[tt.key]; !reflect.DeepEqual(got, tt.wantOut) {
				t.Errorf("result %s = %v, want %v", tt.key, got, tt.wantOut)
			}
			if tt.wantIn != nil {
				if got := in[tt.field].(map[string]any)[tt.key]; !reflect.DeepEqual(got, tt.wantIn) {
					t.Errorf("params %s = %v, want %v", tt.key, got, tt.wantIn)
				}
			}
		})
	}
	schemas := d.Components.Schemas
	for name, want := range map[string]map[string]any{
		"google.protobuf.Timestamp":   {"type": "string", "format": "date-time"},
		"google.protobuf.Duration":    {"type": "string"},
		"google.protobuf.FieldMask":   {"type": "string"},
		"google.protobuf.Struct":      {"type": "object"},
		"google.protobuf.ListValue":   {"type": "array"},
		"google.protobuf.Empty":       {"type": "object", "additionalProperties": false},
		"google.protobuf.Any":         {"type": "object"},
		"google.protobuf.Int64Value":  {"type": "string", "description": "The wrapped int64 value itself.\n\nAn int64 as a decimal string (protojson writes 64-bit integers as strings)."},
		"google.protobuf.StringValue": {"type": "string"},
		"google.protobuf.BoolValue":   {"type": "boolean"},
		"test.v1.Color":               {"title": "test.v1.Color"},
		"test.v1.Tree":                {"type": "object", "additionalProperties": false},
	} {
		got, ok := schemas[name]
		if !ok {
			t.Errorf("components.schemas has no %s", name)
			continue
		}
		for k, v := range want {
			if !reflect.DeepEqual(got[k], v) {
				t.Errorf("%s.%s = %v, want %v", name, k, got[k], v)
			}
		}
	}
	if _, ok := schemas["google.protobuf.Value"]; !ok {
		t.Error("components.schemas has no google.protobuf.Value")
	}
	colors := schemas["test.v1.Color"]["anyOf"].([]any)[0].(map[string]any)["enum"]
	if !reflect.DeepEqual(colors, []any{"COLOR_UNSPECIFIED", "COLOR_RED", "COLOR_GREEN"}) {
		t.Errorf("test.v1.Color names = %v", colors)
	}
	if one, ok := schemas["test.v1.AllTypes"]["allOf"]; !ok || len(one.([]any)) != 1 {
		t.Errorf("test.v1.AllTypes allOf = %v, want the oneof constraint", one)
	}
}
