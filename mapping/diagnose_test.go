package mapping

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestRequestInvalidParams(t *testing.T) {
	tests := []struct {
		name       string
		params     string
		wantField  string
		wantReason string // exact reason
	}{
		{"unknown field", `{"fOops": 1}`, "fOops", "unknown field of test.v1.AllTypes"},
		{"unknown nested field", `{"fMessage": {"nom": "x"}}`, "fMessage.nom", "unknown field of test.v1.Inner"},
		{"unknown field after good ones", `{"fInt32": 1, "rString": ["a"], "zzz": {}}`, "zzz", "unknown field of test.v1.AllTypes"},
		{"unknown field with odd name", `{"a.b": 1}`, `["a.b"]`, "unknown field of test.v1.AllTypes"},
		{"string for int32", `{"fInt32": "abc"}`, "fInt32", `want an integer (int32), got the string "abc"`},
		{"padded string for int32", `{"fInt32": " 1"}`, "fInt32", `want an integer (int32), got the string " 1"`},
		{"object for string", `{"fString": {}}`, "fString", "want a string, got object"},
		{"number for string", `{"fString": 5}`, "fString", "want a string, got number"},
		{"number for bool", `{"fBool": 1}`, "fBool", "want true or false, got number"},
		{"string for bool", `{"fBool": "true"}`, "fBool", "want true or false, got string"},
		{"array for message", `{"fMessage": []}`, "fMessage", "want an object (test.v1.Inner), got array"},
		{"object for repeated", `{"rString": {}}`, "rString", "want an array of a string, got object"},
		{"array for map", `{"mStringInt64": []}`, "mStringInt64", "want an object (map), got array"},
		{"bool for double", `{"fDouble": true}`, "fDouble", "want a number (double), got boolean"},
		{"int32 too big", `{"fInt32": 2147483648}`, "fInt32", "value 2147483648 is out of range for int32"},
		{"int32 too small", `{"fInt32": -2147483649}`, "fInt32", "value -2147483649 is out of range for int32"},
		{"int32 fraction", `{"fInt32": 1.5}`, "fInt32", "value 1.5 is not an integer"},
		{"int32 huge exponent", `{"fInt32": 1e999}`, "fInt32", "value 1e999 is out of range for int32"},
		{"uint32 negative", `{"fUint32": -1}`, "fUint32", "value -1 is out of range for uint32"},
		{"int64 too big in string", `{"fInt64": "9223372036854775808"}`, "fInt64", "value 9223372036854775808 is out of range for int64"},
		{"uint64 too big", `{"fUint64": "18446744073709551616"}`, "fUint64", "value 18446744073709551616 is out of range for uint64"},
		{"sfixed32 too big", `{"fSfixed32": 3000000000}`, "fSfixed32", "value 3000000000 is out of range for sfixed32"},
		{"float out of range", `{"fFloat": 1e39}`, "fFloat", "value 1e39 is out of range for float"},
		{"double out of range", `{"fDouble": "1e999"}`, "fDouble", "value 1e999 is out of range for double"},
		{"double bad word", `{"fDouble": "nan"}`, "fDouble", `want a number (double), got the string "nan"`},
		{"bad enum name", `{"fEnum": "COLOR_PURPLE"}`, "fEnum", `unknown value "COLOR_PURPLE" of enum test.v1.Color`},
		{"enum number too big", `{"fEnum": 2147483648}`, "fEnum", "value 2147483648 is out of range for int32"},
		{"enum of wrong type", `{"fEnum": true}`, "fEnum", "want a value name of enum test.v1.Color or its number, got boolean"},
		{"bad base64", `{"fBytes": "!!!"}`, "fBytes", "invalid base64"},
		{"bad timestamp", `{"wktTimestamp": "yesterday"}`, "wktTimestamp", `want an RFC 3339 timestamp string such as "2006-01-02T15:04:05Z", got "yesterday"`},
		{"timestamp as number", `{"wktTimestamp": 12}`, "wktTimestamp", `want an RFC 3339 timestamp string such as "2006-01-02T15:04:05Z", got 12`},
		{"bad duration", `{"wktDuration": "5m"}`, "wktDuration", `want a duration string in seconds such as "1.5s", got "5m"`},
		{"bad field mask", `{"wktFieldMask": "a_b"}`, "wktFieldMask", `want a field mask string of comma-separated lowerCamelCase paths such as "name,note.tags", got "a_b"`},
		{"struct not object", `{"wktStruct": [1]}`, "wktStruct", "want an object (google.protobuf.Struct), got array"},
		{"list not array", `{"wktList": {}}`, "wktList", "want an array (google.protobuf.ListValue), got object"},
		{"wrapper of wrong type", `{"wktBool": "yes"}`, "wktBool", "want true or false, got string"},
		{"int64 wrapper out of range", `{"wktInt64": "9223372036854775808"}`, "wktInt64", "value 9223372036854775808 is out of range for int64"},
		{"empty with a field", `{"wktEmpty": {"a": 1}}`, "wktEmpty", `unknown field "a"`},
		{"duplicate field", `{"fString": "a", "fString": "b"}`, "fString", "duplicate field"},
		{"json and proto name", `{"fString": "a", "f_string": "b"}`, "f_string", `duplicate field, already set as "fString"`},
		{"duplicate null field", `{"fMessage": null, "f_message": {}}`, "f_message", `duplicate field, already set as "fMessage"`},
		{"oneof twice", `{"oString": "a", "oMessage": {}}`, "oMessage", `oneof choice is already set by "oString"`},
		{"nested wrong type", `{"fMessage": {"name": 1}}`, "fMessage.name", "want a string, got number"},
		{"deep nested", `{"tree": {"children": [{"value": "a"}, {"children": [{"value": 3}]}]}}`, "tree.children[1].children[0].value", "want a string, got number"},
		{"repeated element", `{"rString": ["a", 2]}`, "rString[1]", "want a string, got number"},
		{"repeated null element", `{"rInt64": ["1", null]}`, "rInt64[1]", "want an integer (int64), got null"},
		{"repeated message element", `{"rMessage": [{}, {"big": "x"}]}`, "rMessage[1].big", `want an integer (int64), got the string "x"`},
		{"repeated enum element", `{"rEnum": ["COLOR_RED", "RED"]}`, "rEnum[1]", `unknown value "RED" of enum test.v1.Color`},
		{"map value", `{"mStringInt64": {"k": "x"}}`, "mStringInt64.k", `want an integer (int64), got the string "x"`},
		{"map message value", `{"mInt32Message": {"3": {"name": false}}}`, `mInt32Message["3"].name`, "want a string, got boolean"},
		{"map bad key", `{"mInt32Message": {"x": {}}}`, `mInt32Message.x`, `invalid map key "x", want int32`},
		{"map bool key", `{"mBoolString": {"yes": "a"}}`, `mBoolString.yes`, `invalid map key "yes", want bool`},
		{"map duplicate key", `{"mInt32Message": {"1": {}, "01": {}}}`, `mInt32Message["01"]`, "duplicate map key"},
		{"invalid UTF-8", "{\"fString\": \"a\xffb\"}", "fString", "invalid UTF-8 in string"},
		{"lone surrogate", `{"fString": "a\ud800b"}`, "fString", "invalid UTF-16 surrogate escape in string"},
		{"invalid UTF-8 in map key", "{\"mStringInt64\": {\"\xff\": \"1\"}}", "mStringInt64", "invalid UTF-8 in string (member name)"},
		{"any without type", `{"wktAny": {"name": "x"}}`, "wktAny", `missing "@type" of google.protobuf.Any`},
		{"any unknown type", `{"wktAny": {"@type": "type.googleapis.com/no.Such"}}`, `wktAny["@type"]`, `unknown type "type.googleapis.com/no.Such"`},
		{"any field error", `{"wktAny": {"@type": "type.googleapis.com/test.v1.Inner", "name": 5}}`, "wktAny.name", "want a string, got number"},
		{"any unknown field", `{"wktAny": {"@type": "type.googleapis.com/test.v1.Inner", "x": 5}}`, "wktAny.x", "unknown field of test.v1.Inner"},
		{"any wkt without value", `{"wktAny": {"@type": "type.googleapis.com/google.protobuf.Duration"}}`, "wktAny", `missing "value" of google.protobuf.Any holding google.protobuf.Duration`},
		{"any wkt bad value", `{"wktAny": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "x"}}`, "wktAny.value", `want a duration string in seconds such as "1.5s", got "x"`},
		{"syntax error", `{"fString": "a",}`, "", `invalid JSON: want a quoted member name, got invalid JSON`},
		{"missing colon", `{"fString" "a"}`, "fString", `invalid JSON: want ':' after the member name`},
		{"long path", `{"tree": {"children": [{"children": [{"children": [{"children": [{"children": [{"children": [{"children": [{"children": [{"children": [{"value": 1}]}]}]}]}]}]}]}]}]}}`, "tree.children[0].children[0].children[0].children...[0].children[0].children[0].children[0].value", "want a string, got number"},
		{"unterminated", `{"fString": "a`, "fString", `invalid JSON: unterminated string`},
	}
	for _, cc := range echoCodecs() {
		t.Run(cc.name, func(t *testing.T) {
			c := cc.codec(t, Options{})
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					m, jerr := c.Request([]byte(tc.params))
					if jerr == nil {
						t.Fatalf("Request(%s): got %v, want an error", tc.params, m)
					}
					checkInvalidParams(t, jerr, tc.wantField, tc.wantReason)
				})
			}
		})
	}
}

// checkInvalidParams checks the code, message and data of a -32602 error.
func checkInvalidParams(t *testing.T, jerr *Error, wantField, wantReason string) {
	t.Helper()
	if jerr.Code != CodeInvalidParams {
		t.Errorf("got code %d, want %d", jerr.Code, CodeInvalidParams)
	}
	wantMsg := "Invalid params: " + wantReason
	if wantField != "" {
		wantMsg = "Invalid params: " + wantField + ": " + wantReason
	}
	if jerr.Message != wantMsg {
		t.Errorf("got message %q, want %q", jerr.Message, wantMsg)
	}
	var data struct {
		Field  *string `json:"field"`
		Reason string  `json:"reason"`
	}
	if err := json.Unmarshal(jerr.Data, &data); err != nil {
		t.Fatalf("got data %s: %v", jerr.Data, err)
	}
	gotField := ""
	if data.Field != nil {
		gotField = *data.Field
		if gotField == "" {
			t.Errorf(`got data %s, want "field" left out rather than empty`, jerr.Data)
		}
	}
	if gotField != wantField || data.Reason != wantReason {
		t.Errorf("got data field %q reason %q, want %q %q", gotField, data.Reason, wantField, wantReason)
	}
	for _, leak := range []string{"proto:", "(line ", ".go:", "\u00a0"} {
		if strings.Contains(jerr.Message, leak) || strings.Contains(string(jerr.Data), leak) {
			t.Errorf("got %q / %s, want no %q in it", jerr.Message, jerr.Data, leak)
		}
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"prefix and position", "proto: (line 1:11): invalid value for int32 field fInt32: \" 1\"", `invalid value for int32 field fInt32: " 1"`},
		{"no-break space", "proto:\u00a0(line 3:4): unknown field \"x\"", `unknown field "x"`},
		{"syntax error", "proto: syntax error (line 1:5): unexpected token ]", "syntax error: unexpected token ]"},
		{"nested prefix", "proto: unable to resolve \"x\": \"proto: not found\"", `unable to resolve "x": "not found"`},
		{"plain", "exceeded max recursion depth", "exceeded max recursion depth"},
		{"nothing left", "proto: (line 1:1)", "params do not match the request message"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sanitize(errors.New(tc.in)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequestDeepNesting(t *testing.T) {
	c := NewCodec(generatedEcho(), NewResolver(nil), Options{})
	tests := []struct {
		name   string
		params string
	}{
		{"deep tree", `{"tree":` + strings.Repeat(`{"children":[`, 12000) + strings.Repeat(`]}`, 12000) + `}`},
		{"deep value", `{"wktValue":` + strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `}`},
		{"unterminated deep array", `{"wktValue":` + strings.Repeat(`[`, 20000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, jerr := c.Request([]byte(tc.params))
			if jerr == nil {
				t.Fatal("got no error, want one")
			}
			if jerr.Code != CodeInvalidParams {
				t.Errorf("got code %d, want -32602", jerr.Code)
			}
			if len(jerr.Message) > 400 {
				t.Errorf("got a message of %d bytes, want at most 400", len(jerr.Message))
			}
		})
	}
}
