package mapping

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// byPosition rewrites a params object of one field as params by position:
// nulls up to the field's position, then its value.
func byPosition(t testing.TB, md protoreflect.MessageDescriptor, params string) (string, bool) {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(params), &obj); err != nil || len(obj) != 1 {
		return "", false
	}
	for key, val := range obj {
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByTextName(key)
		}
		if fd == nil {
			t.Fatalf("%s: no field %q", params, key)
		}
		return "[" + strings.Repeat("null,", fd.Index()) + string(val) + "]", true
	}
	return "", false
}

// TestRequestByPosition: every round-trip case by name, rewritten by
// position, makes the same message, on both the general path (Request)
// and AppendRequest.
func TestRequestByPosition(t *testing.T) {
	for _, cc := range echoCodecs() {
		t.Run(cc.name, func(t *testing.T) {
			c := cc.codec(t, Options{})
			md := c.in.Descriptor()
			for _, tc := range roundTrips {
				arr, ok := byPosition(t, md, tc.params)
				if !ok || strings.HasSuffix(tc.params, ": null}") {
					continue // null by position leaves a Value unset: below
				}
				t.Run(tc.name, func(t *testing.T) {
					want, e := c.Request([]byte(tc.params))
					if e != nil {
						t.Fatalf("by name %s: %v", tc.params, e)
					}
					got, e := c.Request([]byte(arr))
					if e != nil {
						t.Fatalf("by position %s: %v", arr, e)
					}
					if !proto.Equal(got, want) {
						t.Errorf("%s made %v, want %v (from %s)", arr, got, want, tc.params)
					}
					wire, e := c.AppendRequest(nil, []byte(arr))
					if e != nil {
						t.Fatalf("AppendRequest %s: %v", arr, e)
					}
					m := c.in.New().Interface()
					if err := proto.Unmarshal(wire, m); err != nil || !proto.Equal(m, want) {
						t.Errorf("AppendRequest %s made %v (%v), want %v", arr, m, err, want)
					}
				})
			}
		})
	}
}

func TestRequestByPositionShapes(t *testing.T) {
	c := NewCodec(generatedEcho(), NewResolver(nil), Options{})
	tests := []struct {
		name   string
		params string
		want   string // the same message by name
	}{
		{"empty array", `[]`, `{}`},
		{"empty array with spaces", " [ \n ] ", `{}`},
		{"first field", `[1.5]`, `{"fDouble": 1.5}`},
		{"several", `[1, 2, 3, "4"]`, `{"fDouble": 1, "fFloat": 2, "fInt32": 3, "fInt64": "4"}`},
		{"null leaves a field unset", `[null, null, 7]`, `{"fInt32": 7}`},
		{"all null", `[null, null, null]`, `{}`},
		{"null leaves a Value unset", `[` + strings.Repeat("null,", 31) + `null]`, `{}`},
		{"null leaves a NullValue unset", `[` + strings.Repeat("null,", 33) + `null]`, `{}`},
		{"oneof member", `[` + strings.Repeat("null,", 25) + `{"name": "x"}]`, `{"oMessage": {"name": "x"}}`},
		{"oneof with the other member null", `[` + strings.Repeat("null,", 24) + `"a", null]`, `{"oString": "a"}`},
		{"string for int64 and number for int64", `[null, null, null, 9007199254740993]`, `{"fInt64": "9007199254740993"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, e := c.Request([]byte(tc.params))
			if e != nil {
				t.Fatalf("%s: %v", tc.params, e)
			}
			want, e := c.Request([]byte(tc.want))
			if e != nil {
				t.Fatal(e)
			}
			if !proto.Equal(got, want) {
				t.Errorf("%s made %v, want %v", tc.params, got, want)
			}
		})
	}
}

func TestRequestByPositionErrors(t *testing.T) {
	n := generatedEcho().Input().Fields().Len()
	tests := []struct {
		name         string
		params       string
		wantPosition int
		wantField    string // "" for none
		wantReason   string
	}{
		{"wrong type", `["x"]`, 0, "fDouble", `want a number (double), got the string "x"`},
		{"wrong type later", `[1, 2, "three"]`, 2, "fInt32", `want an integer (int32), got the string "three"`},
		{"out of range", `[null, null, 2147483648]`, 2, "fInt32", "value 2147483648 is out of range for int32"},
		{"nested", `[` + strings.Repeat("null,", 16) + `{"name": 1}]`, 16, "fMessage.name", "want a string, got number"},
		{"unknown nested field", `[` + strings.Repeat("null,", 16) + `{"nom": "x"}]`, 16, "fMessage.nom", "unknown field of test.v1.Inner"},
		{"deep", `[` + strings.Repeat("null,", 26) + `{"children": [{}, {"value": 3}]}]`, 26, "tree.children[1].value", "want a string, got number"},
		{"bad enum", `[` + strings.Repeat("null,", 15) + `"COLOR_PURPLE"]`, 15, "fEnum", `unknown value "COLOR_PURPLE" of enum test.v1.Color`},
		{"timestamp", `[` + strings.Repeat("null,", 28) + `"yesterday"]`, 28, "wktTimestamp", `want an RFC 3339 timestamp string such as "2006-01-02T15:04:05Z", got "yesterday"`},
		{"two oneof members", `[` + strings.Repeat("null,", 24) + `"a", {}]`, 25, "oMessage", "oneof choice is already set by position 24 (oString); give at most one of its members"},
		{"too many", `[` + strings.Repeat("null,", n) + `1]`, n, "", "too many params by position: test.v1.AllTypes has 42 fields"},
		{"too many, all null", `[` + strings.Repeat("null,", n) + `null]`, n, "", "too many params by position: test.v1.AllTypes has 42 fields"},
		{"invalid JSON in an element", `[1, tru]`, 1, "fFloat", "invalid JSON: unknown literal"},
	}
	for _, cc := range echoCodecs() {
		t.Run(cc.name, func(t *testing.T) {
			c := cc.codec(t, Options{})
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					for _, via := range []string{"Request", "AppendRequest"} {
						var e *Error
						if via == "Request" {
							_, e = c.Request([]byte(tc.params))
						} else {
							_, e = c.AppendRequest(nil, []byte(tc.params))
						}
						if e == nil {
							t.Fatalf("%s(%s): got no error", via, tc.params)
						}
						var data map[string]any
						if err := json.Unmarshal(e.Data, &data); err != nil {
							t.Fatalf("data %s: %v", e.Data, err)
						}
						field, _ := data["field"].(string)
						if e.Code != CodeInvalidParams || data["position"] != float64(tc.wantPosition) || field != tc.wantField || data["reason"] != tc.wantReason {
							t.Errorf("%s(%s): got %d %s, want -32602 at position %d field %q reason %q",
								via, tc.params, e.Code, e.Data, tc.wantPosition, tc.wantField, tc.wantReason)
						}
						wantMsg := "Invalid params: position " + strconv.Itoa(tc.wantPosition)
						if tc.wantField != "" {
							wantMsg += " (" + tc.wantField + ")"
						}
						wantMsg += ": " + tc.wantReason
						if e.Message != wantMsg {
							t.Errorf("%s(%s): message %q, want %q", via, tc.params, e.Message, wantMsg)
						}
					}
				})
			}
		})
	}
}

// TestStreamingMethodsByPosition: a server-streaming method takes its one
// request message by position, as a unary method does; for a client- or
// bidirectional-streaming method an array is its request messages, never
// one message by position, and Request refuses it.
func TestStreamingMethodsByPosition(t *testing.T) {
	b := loadBackend(t)
	server := NewCodec(b.method(t, "test.v1.TestService.ServerStream"), NewResolver(b.types), Options{})
	for _, tc := range []struct{ params, want string }{
		{`[]`, `{}`},
		{`[3]`, `{"count": 3}`},
		{`[3, 5, null, null, "k"]`, `{"count": 3, "failCode": 5, "key": "k"}`},
	} {
		got, e := server.Request([]byte(tc.params))
		if e != nil {
			t.Fatalf("ServerStream %s: %v", tc.params, e)
		}
		want, e := server.Request([]byte(tc.want))
		if e != nil {
			t.Fatal(e)
		}
		if !proto.Equal(got, want) {
			t.Errorf("ServerStream %s made %v, want %v", tc.params, got, want)
		}
		wire, e := server.AppendRequest(nil, []byte(tc.params))
		if e != nil {
			t.Fatalf("ServerStream AppendRequest %s: %v", tc.params, e)
		}
		m := server.in.New().Interface()
		if err := proto.Unmarshal(wire, m); err != nil || !proto.Equal(m, want) {
			t.Errorf("ServerStream AppendRequest %s made %v (%v), want %v", tc.params, m, err, want)
		}
	}
	if _, e := server.Request([]byte(`["three"]`)); e == nil || e.Message != "Invalid params: position 0 (count): want an integer (int32), got the string \"three\"" {
		t.Errorf("ServerStream [\"three\"]: got %v, want the error naming position 0 (count)", e)
	}
	for _, name := range []protoreflect.FullName{"test.v1.TestService.ClientStream", "test.v1.TestService.BidiStream"} {
		c := NewCodec(b.method(t, name), NewResolver(b.types), Options{})
		for _, params := range []string{`[]`, `[1]`} {
			_, e := c.Request([]byte(params))
			if e == nil || e.Message != "Invalid params: params of a client- or bidirectional-streaming method are the array of its request messages, not one message by position" {
				t.Errorf("%s %s: got %v, want the error of a client stream", name, params, e)
			}
		}
	}
}

// checkPositional compares the fast path by position with the general
// path on params, and reports whether the fast path took them.
func checkPositional(t testing.TB, c *Codec, params []byte) bool {
	t.Helper()
	wire, ok, _ := c.inPlan.appendPositional(nil, params)
	slow, slowErr := c.requestPositional(params)
	if !ok {
		return false
	}
	if slowErr != nil {
		t.Fatalf("%s: fast path accepted what the general path refuses: %v", params, slowErr)
	}
	fast := dynamicpb.NewMessage(c.in.Descriptor())
	if err := proto.Unmarshal(wire, fast); err != nil {
		t.Fatalf("%s: fast path wrote bad wire bytes: %v", params, err)
	}
	if !proto.Equal(fast, slow) {
		t.Fatalf("%s: fast path made %v, general path %v", params, fast, slow)
	}
	return true
}

// plainCodec is the codec of a unary method taking fast.Plain, which the
// fast path covers.
func plainCodec(t testing.TB) *Codec {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{
			"fast.proto": fastProto,
			"svc.proto":  `syntax = "proto3"; package fast; import "fast.proto"; service S { rpc M(Plain) returns (Plain); }`,
		}),
	})}
	files, err := c.Compile(context.Background(), "svc.proto")
	if err != nil {
		t.Fatal(err)
	}
	codec := NewCodec(files[0].Services().Get(0).Methods().Get(0), NewResolver(nil), Options{})
	if codec.inPlan == nil || !codec.byPosition {
		t.Fatal("fast.Plain has no fast path by position")
	}
	return codec
}

func TestFastRequestByPosition(t *testing.T) {
	c := plainCodec(t)
	tests := []struct {
		name   string
		params string
		fast   bool
	}{
		{"empty", `[]`, true},
		{"empty with spaces", ` [ ] `, true},
		{"scalars", `[1.5, -2.25, -7, "-9223372036854775808", 4294967295, "18446744073709551615", -3, "-4", 5, "6", -8, "-9", true, "hé", "AQID", "GREEN"]`, true},
		{"nulls", `[null, null, 3, null]`, true},
		{"nested", `[` + strings.Repeat("null,", 16) + `{"name": "x", "kids": [{}]}]`, true},
		{"oneof", `[` + strings.Repeat("null,", 24) + `"a", null, null]`, true},
		{"zero values", `[0, 0, 0, "0", 0, "0", 0, "0", 0, "0", 0, "0", false, "", "", "COLOR_UNSPECIFIED"]`, true},
		{"every field", `[` + strings.Repeat("null,", 32) + `[1.5]]`, true},
		{"too many", `[` + strings.Repeat("null,", 33) + `1]`, false},
		{"two oneof members", `[` + strings.Repeat("null,", 24) + `"a", {}]`, false},
		{"wrong type", `["x"]`, false},
		{"int as float", `[null, null, 1.0]`, false},
		{"enum number", `[` + strings.Repeat("null,", 15) + `1]`, true},
		{"bad null", `[nul]`, false},
		{"trailing comma", `[1,]`, false},
		{"trailing data", `[1] 2`, false},
		{"object", `{"d": 1}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkPositional(t, c, []byte(tt.params)); got != tt.fast {
				t.Errorf("fast path taken: got %v, want %v", got, tt.fast)
			}
		})
	}
}
