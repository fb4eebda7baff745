package mapping

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// roundTrip is params in protojson's own output form, so that Request then
// AppendResult gives the same JSON back.
var roundTrips = []struct {
	name   string
	params string
}{
	{"empty", `{}`},
	{"double", `{"fDouble": 1.25}`},
	{"double NaN", `{"fDouble": "NaN"}`},
	{"double Infinity", `{"fDouble": "Infinity"}`},
	{"double -Infinity", `{"fDouble": "-Infinity"}`},
	{"float", `{"fFloat": -2.5}`},
	{"float NaN", `{"fFloat": "NaN"}`},
	{"int32 min", `{"fInt32": -2147483648}`},
	{"int32 max", `{"fInt32": 2147483647}`},
	{"int64 max", `{"fInt64": "9223372036854775807"}`},
	{"int64 min", `{"fInt64": "-9223372036854775808"}`},
	{"uint32 max", `{"fUint32": 4294967295}`},
	{"uint64 max", `{"fUint64": "18446744073709551615"}`},
	{"sint32", `{"fSint32": -7}`},
	{"sint64", `{"fSint64": "-9223372036854775808"}`},
	{"fixed32", `{"fFixed32": 4294967295}`},
	{"fixed64", `{"fFixed64": "18446744073709551615"}`},
	{"sfixed32", `{"fSfixed32": -1}`},
	{"sfixed64", `{"fSfixed64": "9223372036854775807"}`},
	{"bool", `{"fBool": true}`},
	{"string", `{"fString": "héllo \u2603 \"q\""}`},
	{"bytes", `{"fBytes": "AAECA/8="}`},
	{"enum", `{"fEnum": "COLOR_GREEN"}`},
	{"message", `{"fMessage": {"name": "n", "big": "9223372036854775807"}}`},
	{"repeated int64", `{"rInt64": ["1", "-2", "9223372036854775807"]}`},
	{"repeated string", `{"rString": ["a", "", "c"]}`},
	{"repeated message", `{"rMessage": [{"name": "a"}, {}, {"big": "3"}]}`},
	{"repeated enum", `{"rEnum": ["COLOR_RED", "COLOR_UNSPECIFIED"]}`},
	{"map string int64", `{"mStringInt64": {"a": "1", "b.c": "-9223372036854775808"}}`},
	{"map int32 message", `{"mInt32Message": {"-1": {"name": "x"}, "7": {}}}`},
	{"map bool string", `{"mBoolString": {"true": "yes", "false": "no"}}`},
	{"oneof string", `{"oString": "o"}`},
	{"oneof message", `{"oMessage": {"name": "o"}}`},
	{"recursive", `{"tree": {"value": "root", "children": [{"value": "a", "children": [{"value": "b"}]}]}}`},
	{"optional zero", `{"optInt32": 0}`},
	{"timestamp", `{"wktTimestamp": "2024-01-02T03:04:05.123Z"}`},
	{"duration", `{"wktDuration": "-1.500s"}`},
	{"struct", `{"wktStruct": {"a": 1, "b": [true, null, "x"], "c": {"d": {}}}}`},
	{"value", `{"wktValue": {"k": [1, "two"]}}`},
	{"value null", `{"wktValue": null}`},
	{"list", `{"wktList": [1, "a", null, {"b": false}]}`},
	{"int64 wrapper", `{"wktInt64": "9223372036854775807"}`},
	{"string wrapper", `{"wktString": ""}`},
	{"bool wrapper", `{"wktBool": false}`},
	{"double wrapper", `{"wktDouble": "NaN"}`},
	{"bytes wrapper", `{"wktBytes": "aGk="}`},
	{"field mask", `{"wktFieldMask": "fString,fMessage.name"}`},
	{"any of backend type", `{"wktAny": {"@type": "type.googleapis.com/test.v1.Inner", "name": "in", "big": "5"}}`},
	{"any of well-known type", `{"wktAny": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "2s"}}`},
	{"empty", `{"wktEmpty": {}}`},
}

func TestRequestRoundTrip(t *testing.T) {
	for _, cc := range echoCodecs() {
		t.Run(cc.name, func(t *testing.T) {
			c := cc.codec(t, Options{})
			for _, tc := range roundTrips {
				t.Run(tc.name, func(t *testing.T) {
					m, jerr := c.Request([]byte(tc.params))
					if jerr != nil {
						t.Fatalf("Request(%s): got error %v, want none", tc.params, jerr)
					}
					got, err := c.AppendResult(nil, m)
					if err != nil {
						t.Fatalf("AppendResult: %v", err)
					}
					if !jsonEqual(t, got, []byte(tc.params)) {
						t.Errorf("got %s, want %s", got, tc.params)
					}
				})
			}
		})
	}
}

// TestRequestDynamicAny proves that Any resolves a type known only from the
// backend's files: rpc.ops.PingRequest has no generated code linked here.
func TestRequestDynamicAny(t *testing.T) {
	b := loadBackend(t)
	c := NewCodec(b.method(t, "test.v1.TestService.Echo"), NewResolver(b.types), Options{})
	params := `{"wktAny": {"@type": "type.googleapis.com/rpc.ops.PingRequest", "text": "hi"}}`
	m, jerr := c.Request([]byte(params))
	if jerr != nil {
		t.Fatalf("got error %v, want none", jerr)
	}
	if _, ok := m.(*dynamicpb.Message); !ok {
		t.Errorf("got %T, want *dynamicpb.Message", m)
	}
	got, err := c.AppendResult(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, got, []byte(params)) {
		t.Errorf("got %s, want %s", got, params)
	}

	// Without the backend's types the same params name an unknown type.
	c = NewCodec(b.method(t, "test.v1.TestService.Echo"), NewResolver(nil), Options{})
	_, jerr = c.Request([]byte(params))
	if jerr == nil || jerr.Code != CodeInvalidParams {
		t.Fatalf("got %v, want -32602", jerr)
	}
	if want := `wktAny["@type"]`; !strings.Contains(jerr.Message, want) {
		t.Errorf("got message %q, want it to name %s", jerr.Message, want)
	}
}

func TestRequestNames(t *testing.T) {
	tests := []struct {
		name   string
		params string
		want   string
	}{
		{"json names", `{"fInt32": 1, "rString": ["a"], "wktTimestamp": "1970-01-01T00:00:01Z"}`, `{"fInt32": 1, "rString": ["a"], "wktTimestamp": "1970-01-01T00:00:01Z"}`},
		{"proto names", `{"f_int32": 1, "r_string": ["a"], "wkt_timestamp": "1970-01-01T00:00:01Z"}`, `{"fInt32": 1, "rString": ["a"], "wktTimestamp": "1970-01-01T00:00:01Z"}`},
		{"mixed names", `{"f_int32": 1, "rString": ["a"]}`, `{"fInt32": 1, "rString": ["a"]}`},
		{"numbers as strings", `{"fInt32": "-5", "fUint64": "7", "fDouble": "1.5"}`, `{"fInt32": -5, "fUint64": "7", "fDouble": 1.5}`},
		{"integral floats and exponents", `{"fInt32": 1.0, "fInt64": 1e3, "fUint32": "2e1"}`, `{"fInt32": 1, "fInt64": "1000", "fUint32": 20}`},
		{"enum by number", `{"fEnum": 2}`, `{"fEnum": "COLOR_GREEN"}`},
		{"url-safe base64 without padding", `{"fBytes": "_-8"}`, `{"fBytes": "/+8="}`},
		{"NullValue is its zero value", `{"wktNull": null}`, `{}`},
		{"null leaves fields unset", `{"fInt32": null, "fMessage": null, "rString": null, "mBoolString": null, "wktInt64": null}`, `{}`},
		{"whitespace before object", " \n\t{\"fBool\": true}", `{"fBool": true}`},
	}
	for _, cc := range echoCodecs() {
		t.Run(cc.name, func(t *testing.T) {
			c := cc.codec(t, Options{})
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					m, jerr := c.Request([]byte(tc.params))
					if jerr != nil {
						t.Fatalf("got error %v, want none", jerr)
					}
					got, err := c.AppendResult(nil, m)
					if err != nil {
						t.Fatal(err)
					}
					if !jsonEqual(t, got, []byte(tc.want)) {
						t.Errorf("got %s, want %s", got, tc.want)
					}
				})
			}
		})
	}
}

func TestRequestShape(t *testing.T) {
	tests := []struct {
		name    string
		params  []byte
		wantErr string // "" for success
	}{
		{"absent", nil, ""},
		{"empty", []byte{}, ""},
		{"empty array (by position)", []byte("[]"), ""},
		{"empty array after space", []byte(" [ ]"), ""},
		{"null", []byte(`null`), "Invalid params: params must be an object of named fields, got null"},
		{"string", []byte(`"x"`), "Invalid params: params must be an object of named fields, got string"},
		{"number", []byte(`12`), "Invalid params: params must be an object of named fields, got number"},
		{"bool", []byte(`true`), "Invalid params: params must be an object of named fields, got boolean"},
		{"blank", []byte("  "), "Invalid params: params must be an object of named fields, got nothing"},
		{"trailing data", []byte(`{} {}`), "Invalid params: invalid JSON: unexpected data after the params object"},
	}
	c := NewCodec(generatedEcho(), NewResolver(nil), Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, jerr := c.Request(tc.params)
			if tc.wantErr == "" {
				if jerr != nil {
					t.Fatalf("got error %v, want none", jerr)
				}
				if n := proto.Size(m); n != 0 {
					t.Errorf("got message of %d bytes, want empty", n)
				}
				if got := m.ProtoReflect().Descriptor().FullName(); got != "test.v1.AllTypes" {
					t.Errorf("got %s, want test.v1.AllTypes", got)
				}
				return
			}
			if jerr == nil {
				t.Fatalf("got message %v, want error %q", m, tc.wantErr)
			}
			if jerr.Code != CodeInvalidParams || jerr.Message != tc.wantErr {
				t.Errorf("got %d %q, want -32602 %q", jerr.Code, jerr.Message, tc.wantErr)
			}
			if !errors.Is(jerr, &Error{Code: CodeInvalidParams}) {
				t.Errorf("errors.Is(%v, -32602) = false, want true", jerr)
			}
		})
	}
}

func TestAppendResult(t *testing.T) {
	b := loadBackend(t)
	md := b.method(t, "test.v1.TestService.Echo")
	tests := []struct {
		name string
		opts Options
		set  func(m protoreflect.Message)
		want string
	}{
		{"zero omits", Options{}, func(protoreflect.Message) {}, `{}`},
		{"int64 as strings", Options{}, func(m protoreflect.Message) {
			fields := m.Descriptor().Fields()
			m.Set(fields.ByName("f_int64"), protoreflect.ValueOfInt64(math.MaxInt64))
			m.Set(fields.ByName("f_uint64"), protoreflect.ValueOfUint64(math.MaxUint64))
			m.Set(fields.ByName("f_double"), protoreflect.ValueOfFloat64(math.Inf(-1)))
		}, `{"fInt64": "9223372036854775807", "fUint64": "18446744073709551615", "fDouble": "-Infinity"}`},
		{"emit unpopulated", Options{EmitUnpopulated: true}, func(m protoreflect.Message) {
			m.Set(m.Descriptor().Fields().ByName("f_string"), protoreflect.ValueOfString("x"))
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCodec(md, NewResolver(b.types), tc.opts)
			m := c.NewResponse()
			if got := m.ProtoReflect().Descriptor().FullName(); got != "test.v1.AllTypes" {
				t.Fatalf("got response type %s, want test.v1.AllTypes", got)
			}
			tc.set(m.ProtoReflect())
			got, err := c.AppendResult([]byte("prefix:"), m)
			if err != nil {
				t.Fatal(err)
			}
			body, ok := strings.CutPrefix(string(got), "prefix:")
			if !ok {
				t.Fatalf("got %q, want it to start with the dst bytes", got)
			}
			if tc.want == "" {
				for _, key := range []string{`"fString":"x"`, `"fInt32":0`, `"rString":[]`, `"mBoolString":{}`, `"fMessage":null`} {
					if !strings.Contains(strings.ReplaceAll(body, " ", ""), key) {
						t.Errorf("got %s, want it to contain %s", body, key)
					}
				}
				return
			}
			if !jsonEqual(t, []byte(body), []byte(tc.want)) {
				t.Errorf("got %s, want %s", body, tc.want)
			}
		})
	}
}

func TestNewResponseOfOtherMethods(t *testing.T) {
	b := loadBackend(t)
	tests := []struct {
		method   protoreflect.FullName
		in, outT protoreflect.FullName
	}{
		{"test.v1.TestService.Fail", "test.v1.FailRequest", "google.protobuf.Empty"},
		{"test.v1.TestService.Count", "test.v1.CountRequest", "test.v1.CountReply"},
		{"rpc.ops.Ops.Ping", "rpc.ops.PingRequest", "rpc.ops.PingReply"},
		{"helloworld.Greeter.SayHello", "helloworld.HelloRequest", "helloworld.HelloReply"},
	}
	for _, tc := range tests {
		t.Run(string(tc.method), func(t *testing.T) {
			c := NewCodec(b.method(t, tc.method), NewResolver(b.types), Options{})
			m, jerr := c.Request(nil)
			if jerr != nil {
				t.Fatal(jerr)
			}
			if got := m.ProtoReflect().Descriptor().FullName(); got != tc.in {
				t.Errorf("got request %s, want %s", got, tc.in)
			}
			if got := c.NewResponse().ProtoReflect().Descriptor().FullName(); got != tc.outT {
				t.Errorf("got response %s, want %s", got, tc.outT)
			}
		})
	}
}

func TestCodecConcurrent(t *testing.T) {
	c := NewCodec(generatedEcho(), nil, Options{})
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				m, jerr := c.Request([]byte(`{"fString": "x", "rInt64": ["1"]}`))
				if jerr != nil {
					t.Error(jerr)
					return
				}
				if _, err := c.AppendResult(nil, m); err != nil {
					t.Error(err)
					return
				}
				if _, jerr := c.Request([]byte(`{"fString": 1}`)); jerr == nil {
					t.Error("got no error for a number in a string field")
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}
