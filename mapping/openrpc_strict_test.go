package mapping_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// draft07Keywords are the keywords of JSON Schema draft-07, the dialect of
// the OpenRPC meta-schema. A strict validator (ajv's strict mode) refuses
// a schema with any other keyword.
var draft07Keywords = map[string]bool{
	"$id": true, "$schema": true, "$ref": true, "$comment": true, "title": true, "description": true,
	"default": true, "readOnly": true, "writeOnly": true, "examples": true, "multipleOf": true,
	"maximum": true, "exclusiveMaximum": true, "minimum": true, "exclusiveMinimum": true,
	"maxLength": true, "minLength": true, "pattern": true, "additionalItems": true, "items": true,
	"maxItems": true, "minItems": true, "uniqueItems": true, "contains": true, "maxProperties": true,
	"minProperties": true, "required": true, "additionalProperties": true, "definitions": true,
	"properties": true, "patternProperties": true, "dependencies": true, "propertyNames": true,
	"const": true, "enum": true, "type": true, "format": true, "contentMediaType": true,
	"contentEncoding": true, "if": true, "then": true, "else": true, "allOf": true, "anyOf": true,
	"oneOf": true, "not": true, "deprecated": true,
}

// draft07Formats are the formats JSON Schema draft-07 defines. int32,
// int64, float and double are OpenAPI's, unknown to JSON Schema
// validators, and ajv (which @open-rpc/schema-utils-js uses) throws on a
// format it does not know.
var draft07Formats = map[string]bool{
	"date-time": true, "date": true, "time": true, "email": true, "idn-email": true, "hostname": true,
	"idn-hostname": true, "ipv4": true, "ipv6": true, "uri": true, "uri-reference": true, "iri": true,
	"iri-reference": true, "uri-template": true, "json-pointer": true, "relative-json-pointer": true,
	"regex": true,
}

// checkSchema walks the schema s at path, reporting keywords and formats a
// strict draft-07 validator refuses.
func checkSchema(t *testing.T, path string, s any) {
	t.Helper()
	obj, ok := s.(map[string]any)
	if !ok {
		if _, isBool := s.(bool); !isBool {
			t.Errorf("%s: %v is not a schema", path, s)
		}
		return
	}
	for k, v := range obj {
		if !draft07Keywords[k] {
			t.Errorf("%s: keyword %q is not JSON Schema draft-07", path, k)
		}
		switch k {
		case "format":
			if f, _ := v.(string); !draft07Formats[f] {
				t.Errorf("%s: format %q is not a format of JSON Schema draft-07", path, v)
			}
		case "properties", "patternProperties", "definitions":
			for name, sub := range v.(map[string]any) {
				checkSchema(t, path+"/"+k+"/"+name, sub)
			}
		case "additionalProperties", "additionalItems", "propertyNames", "contains", "not", "if", "then", "else":
			checkSchema(t, path+"/"+k, v)
		case "items":
			if list, ok := v.([]any); ok {
				for _, sub := range list {
					checkSchema(t, path+"/items", sub)
				}
			} else {
				checkSchema(t, path+"/items", v)
			}
		case "allOf", "anyOf", "oneOf":
			for _, sub := range v.([]any) {
				checkSchema(t, path+"/"+k, sub)
			}
		}
	}
}

// TestDocumentIsStrictJSONSchema: every schema of the document (params,
// results, components, the streaming extension) uses only draft-07
// keywords and formats, so that strict validators accept it.
func TestDocumentIsStrictJSONSchema(t *testing.T) {
	files := protosetFiles(t)
	for _, opts := range []mapping.DocumentOptions{{}, {EmitUnpopulated: true}} {
		doc := document(t, serviceMethods(t, files, "demo.v1.Notes", "helloworld.Greeter", "rpc.ops.Ops", "test.v1.TestService"), opts)
		var d struct {
			Methods []struct {
				Name   string `json:"name"`
				Params []struct {
					Schema any `json:"schema"`
				} `json:"params"`
				Result struct {
					Schema any `json:"schema"`
				} `json:"result"`
				Streaming map[string]any `json:"x-grpc-streaming"`
			} `json:"methods"`
			Components struct {
				Schemas map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		for name, s := range d.Components.Schemas {
			checkSchema(t, "components.schemas."+name, s)
		}
		for _, m := range d.Methods {
			for _, p := range m.Params {
				checkSchema(t, m.Name+" params", p.Schema)
			}
			checkSchema(t, m.Name+" result", m.Result.Schema)
			if x := m.Streaming; x != nil {
				checkSchema(t, m.Name+" x-grpc-streaming.request", x["request"])
				checkSchema(t, m.Name+" x-grpc-streaming.response", x["response"])
				for _, way := range []string{"http", "httpLive", "websocket"} {
					w, ok := x[way].(map[string]any)
					if !ok {
						continue // httpLive: methods whose responses stream
					}
					checkSchema(t, m.Name+" x-grpc-streaming."+way+".params", w["params"])
					checkSchema(t, m.Name+" x-grpc-streaming."+way+".result", w["result"])
				}
			}
		}
	}
}

// TestSixtyFourBitFieldsSayTheirType: without a format, the schema of a
// 64-bit field still names its type, in its description, on both sides.
func TestSixtyFourBitFieldsSayTheirType(t *testing.T) {
	d := parseDoc(t, document(t, serviceMethods(t, protosetFiles(t), "test.v1.TestService"), mapping.DocumentOptions{}))
	for _, name := range []string{"test.v1.AllTypes", "test.v1.AllTypes-input"} {
		props := d.Components.Schemas[name]["properties"].(map[string]any)
		for _, tt := range []struct {
			field, path, want string
		}{
			{"fInt64", "", "int64"}, {"fSint64", "", "int64"}, {"fSfixed64", "", "int64"},
			{"fUint64", "", "uint64"}, {"fFixed64", "", "uint64"},
			{"rInt64", "items", "int64"}, {"mStringInt64", "additionalProperties", "int64"},
			{"fInt32", "", "int32"}, {"fUint32", "", "uint32"}, {"fFloat", "", "float"}, {"fDouble", "", "double"},
		} {
			s := props[tt.field].(map[string]any)
			if tt.path != "" {
				s = s[tt.path].(map[string]any)
			}
			desc, _ := s["description"].(string)
			if !strings.Contains(desc, " "+tt.want+" ") && !strings.Contains(desc, " "+tt.want+":") && !strings.Contains(desc, " "+tt.want+".") {
				t.Errorf("%s.%s: description %q does not name %s", name, tt.field, desc, tt.want)
			}
			if _, has := s["format"]; has {
				t.Errorf("%s.%s: has format %v", name, tt.field, s["format"])
			}
		}
	}
	// A field's comment comes first, its type after it.
	note := d.Components.Schemas["test.v1.Inner"]["properties"].(map[string]any)["big"].(map[string]any)
	if desc := note["description"].(string); !strings.HasSuffix(desc, "An int64 as a decimal string (protojson writes 64-bit integers as strings).") {
		t.Errorf("test.v1.Inner.big: description %q, want the type at its end", desc)
	}
}

// TestInvalidParamsExamplesFitTheirMethod: the -32602 entry of each
// method's errors is the generic component (without data), or an example
// naming a field the method's params have, in the form the bridge answers.
func TestInvalidParamsExamplesFitTheirMethod(t *testing.T) {
	doc := document(t, serviceMethods(t, protosetFiles(t), "demo.v1.Notes", "helloworld.Greeter", "rpc.ops.Ops", "test.v1.TestService"), mapping.DocumentOptions{})
	d := parseDoc(t, doc)
	var raw struct {
		Components struct {
			Errors map[string]map[string]any `json:"errors"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		t.Fatal(err)
	}
	if generic := raw.Components.Errors["INVALID_PARAMS"]; generic["data"] != nil || generic["code"] != float64(-32602) {
		t.Errorf("components.errors.INVALID_PARAMS = %v, want -32602 without data", generic)
	}
	examples := 0
	for _, m := range d.Methods {
		e := m.Errors[0]
		if ref, ok := e["$ref"]; ok {
			if ref != "#/components/errors/INVALID_PARAMS" {
				t.Errorf("%s: first error %v, want -32602", m.Name, e)
			}
			continue
		}
		examples++
		data, _ := e["data"].(map[string]any)
		field, _ := data["field"].(string)
		reason, _ := data["reason"].(string)
		if e["code"] != float64(-32602) || field == "" || reason == "" || e["message"] != "Invalid params: "+field+": "+reason {
			t.Errorf("%s: -32602 example %v, want code, message and data as the bridge sends them", m.Name, e)
			continue
		}
		// The field's first segment is one of the method's params, or, for
		// a client stream, a field of its first request message.
		var names []string
		top := field
		if x := m.Streaming; x != nil && x.ClientStreaming {
			top = strings.TrimPrefix(top, "[0].")
			ref := m.Params[0].Schema["$ref"].(string)
			for name := range d.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]["properties"].(map[string]any) {
				names = append(names, name)
			}
		} else {
			for _, p := range m.Params {
				names = append(names, p.Name)
			}
		}
		top, _, _ = strings.Cut(top, ".")
		top, _, _ = strings.Cut(top, "[")
		if !slices.Contains(names, top) {
			t.Errorf("%s: -32602 example names %q, which is not among its params %v", m.Name, field, names)
		}
	}
	if examples < 10 {
		t.Errorf("only %d methods have a -32602 example", examples)
	}
}
