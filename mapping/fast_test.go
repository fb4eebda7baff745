package mapping

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// fastProto has a message the fast path covers (Plain) and one it must
// leave to the general path (Fancy).
const fastProto = `
syntax = "proto3";
package fast;
import "google/protobuf/timestamp.proto";
import "google/protobuf/any.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/empty.proto";
enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; }
message Inner { string name = 1; int64 big = 2; repeated Inner kids = 3; }
message Plain {
  double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6;
  sint32 s32 = 7; sint64 s64 = 8; fixed32 fx32 = 9; fixed64 fx64 = 10; sfixed32 sf32 = 11;
  sfixed64 sf64 = 12; bool b = 13; string s = 14; bytes by = 15; Color color = 16; Inner inner = 17;
  repeated int64 r_i64 = 18; repeated string r_s = 19; repeated Inner r_inner = 20; repeated Color r_color = 21;
  repeated double r_d = 22; repeated bool r_b = 23; repeated bytes r_by = 24;
  oneof choice { string o_s = 25; Inner o_inner = 26; int32 o_i32 = 27; }
  optional int32 opt_i32 = 28; optional string opt_s = 29; Plain self = 30; repeated sint32 r_s32 = 31;
  repeated fixed32 r_fx32 = 32; repeated float r_f = 33;
}
message Fancy {
  map<string, int32> m = 1; google.protobuf.Timestamp ts = 2; google.protobuf.Duration dur = 3;
  google.protobuf.Struct st = 4; google.protobuf.Value val = 5; google.protobuf.ListValue lv = 6;
  google.protobuf.NullValue nv = 7; google.protobuf.Empty empty = 8;
  google.protobuf.BoolValue w_bool = 9; google.protobuf.Int32Value w_i32 = 10; google.protobuf.Int64Value w_i64 = 11;
  google.protobuf.UInt32Value w_u32 = 12; google.protobuf.UInt64Value w_u64 = 13; google.protobuf.FloatValue w_f = 14;
  google.protobuf.DoubleValue w_d = 15; google.protobuf.StringValue w_s = 16; google.protobuf.BytesValue w_by = 17;
  map<int32, Inner> m_i32 = 18; map<bool, string> m_bool = 19; map<sint64, int64> m_s64 = 20; map<uint32, Color> m_u32 = 21;
  map<string, google.protobuf.Value> m_val = 22; map<fixed64, bytes> m_fx64 = 23; map<sfixed32, double> m_sf32 = 24;
  map<string, google.protobuf.Timestamp> m_ts = 25; repeated google.protobuf.Timestamp r_ts = 26;
  repeated google.protobuf.Value r_val = 27; repeated google.protobuf.Int64Value r_w_i64 = 28; repeated google.protobuf.NullValue r_nv = 29;
  oneof pick { google.protobuf.Value o_val = 30; google.protobuf.NullValue o_nv = 31; google.protobuf.Duration o_dur = 32; }
  map<string, Fancy> m_self = 33; Plain plain = 34;
}
message WithAny { google.protobuf.Any a = 1; }
`

func compileFast(t testing.TB) protoreflect.FileDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"fast.proto": fastProto}),
	})}
	files, err := c.Compile(context.Background(), "fast.proto")
	if err != nil {
		t.Fatal(err)
	}
	return files[0]
}

// planOf is newPlan without the reason.
func planOf(md protoreflect.MessageDescriptor) *plan {
	pl, _ := newPlan(md)
	return pl
}

func TestFastPlanEligibility(t *testing.T) {
	fd := compileFast(t)
	for _, name := range []protoreflect.Name{"Plain", "Fancy"} {
		if pl, why := newPlan(fd.Messages().ByName(name)); pl == nil {
			t.Errorf("%s: got no plan (%s), want one", name, why)
		}
	}
	if pl, why := newPlan(fd.Messages().ByName("WithAny")); pl != nil || why == "" {
		t.Errorf("WithAny: got plan %v, reason %q, want none and a reason (Any)", pl != nil, why)
	}
}

// jsonEqual compares two JSON texts as values.
func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	da := json.NewDecoder(bytes.NewReader(a))
	da.UseNumber()
	db := json.NewDecoder(bytes.NewReader(b))
	db.UseNumber()
	if err := da.Decode(&va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := db.Decode(&vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// checkRequest asserts the fast path's soundness on one input: when it
// accepts params, protojson accepts them too and both make the same message.
func checkRequest(t testing.TB, md protoreflect.MessageDescriptor, pl *plan, params []byte) bool {
	t.Helper()
	wire, ok := pl.appendRequest(nil, params)
	slow := dynamicpb.NewMessage(md)
	slowErr := protojson.Unmarshal(params, slow)
	if !ok {
		return false
	}
	if slowErr != nil {
		t.Fatalf("%s: fast path accepted what protojson refuses: %v", params, slowErr)
	}
	fast := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(wire, fast); err != nil {
		t.Fatalf("%s: fast path wrote bad wire bytes: %v", params, err)
	}
	if !proto.Equal(fast, slow) {
		t.Fatalf("%s: fast path made %v, protojson %v", params, fast, slow)
	}
	return true
}

func TestFastRequest(t *testing.T) {
	md := compileFast(t).Messages().ByName("Plain")
	pl := planOf(md)
	tests := []struct {
		name   string
		params string
		fast   bool // the fast path takes it
	}{
		{"empty", `{}`, true},
		{"scalars", `{"d":1.5,"f":-2.25,"i32":-7,"i64":"-9223372036854775808","u32":4294967295,"u64":"18446744073709551615","s32":-3,"s64":"-4","fx32":5,"fx64":"6","sf32":-8,"sf64":"-9","b":true,"s":"hé\"\n","by":"AQID","color":"GREEN"}`, true},
		{"proto names", `{"r_i64":["1",2],"r_s":["a"],"opt_i32":0}`, true},
		{"int64 as number", `{"i64":9223372036854775807}`, true},
		{"zero values", `{"i32":0,"s":"","b":false,"color":"COLOR_UNSPECIFIED","d":0}`, true},
		{"nested and recursive", `{"inner":{"name":"x","kids":[{"name":"y","kids":[{}]}]},"self":{"self":{"i32":1}}}`, true},
		{"long nested", `{"inner":{"name":"` + string(bytes.Repeat([]byte("x"), 300)) + `"}}`, true},
		{"oneof", `{"oInner":{"name":"z"}}`, true},
		{"oneof zero", `{"oI32":0}`, true},
		{"repeated messages and enums", `{"rInner":[{},{"big":"3"}],"rColor":["RED","GREEN"],"rD":[1,2.5],"rB":[true,false],"rBy":["","AA=="]}`, true},
		{"url base64 without padding", `{"by":"-_8"}`, true},
		{"escapes", `{"s":"\u00e9\t\/"}`, true},
		{"float exponent", `{"d":1e300}`, true},
		{"unknown field", `{"nope":1}`, false},
		{"duplicate", `{"i32":1,"i32":2}`, false},
		{"json and proto name", `{"rI64":[],"r_i64":[]}`, false},
		{"two oneof members", `{"oS":"a","oI32":1}`, false},
		{"null", `{"s":null}`, true},
		{"null oneof member", `{"oS":null,"oI32":1}`, true},
		{"int as float", `{"i32":1.0}`, false},
		{"int exponent", `{"i32":1e2}`, false},
		{"int32 overflow", `{"i32":2147483648}`, false},
		{"uint negative", `{"u32":-1}`, false},
		{"float overflow", `{"f":1e39}`, false},
		{"double NaN string", `{"d":"NaN","f":"-Infinity"}`, true},
		{"double as string", `{"d":"1.5e3"}`, true},
		{"enum number", `{"color":1}`, true},
		{"enum unknown number", `{"color":7}`, true},
		{"enum number as string", `{"color":"1"}`, false},
		{"enum unknown", `{"color":"BLUE"}`, false},
		{"bad base64", `{"by":"!!"}`, false},
		{"wrong type", `{"s":1}`, false},
		{"lone surrogate", `{"s":"\ud800"}`, false},
		{"escaped key", `{"\u0073":"a"}`, false},
		{"leading zero string", `{"i64":"01"}`, false},
		{"space in number string", `{"i64":" 1"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkRequest(t, md, pl, []byte(tt.params)); got != tt.fast {
				t.Errorf("fast path taken: got %v, want %v", got, tt.fast)
			}
		})
	}
}

// fill sets random fields of m.
func fill(r *rand.Rand, m protoreflect.Message, depth int) {
	fds := m.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if r.IntN(3) == 0 || (fd.Kind() == protoreflect.MessageKind && depth > 3) {
			continue
		}
		if fd.IsList() {
			l := m.Mutable(fd).List()
			for range r.IntN(4) {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(r, e.Message(), depth+1)
					l.Append(e)
				} else {
					l.Append(randomScalar(r, fd))
				}
			}
			continue
		}
		if fd.Kind() == protoreflect.MessageKind {
			fill(r, m.Mutable(fd).Message(), depth+1)
			continue
		}
		m.Set(fd, randomScalar(r, fd))
	}
}

func randomScalar(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	zero := r.IntN(4) == 0
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(!zero && r.IntN(2) == 0)
	case protoreflect.EnumKind:
		if zero {
			return protoreflect.ValueOfEnum(0)
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(r.IntN(4))) // 3 is unknown
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if zero {
			return protoreflect.ValueOfInt32(0)
		}
		return protoreflect.ValueOfInt32(int32(r.Uint32()))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if zero {
			return protoreflect.ValueOfInt64(0)
		}
		return protoreflect.ValueOfInt64(int64(r.Uint64()))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(r.Uint32() * uint32(r.IntN(2)))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(r.Uint64() * uint64(r.IntN(2)))
	case protoreflect.FloatKind:
		vals := []float32{0, 1.5, -3.25e-10, 3.4e38, float32(math.Inf(1)), float32(math.NaN()), 1e-7, 123456789}
		return protoreflect.ValueOfFloat32(vals[r.IntN(len(vals))])
	case protoreflect.DoubleKind:
		vals := []float64{0, 1.5, -3.25e-10, 1e21, 1e20, math.Inf(-1), math.NaN(), 5e-324, r.NormFloat64()}
		return protoreflect.ValueOfFloat64(vals[r.IntN(len(vals))])
	case protoreflect.StringKind:
		vals := []string{"", "a", "hé", "quote\"back\\slash\n\x01\x7f", "\u2028<&>", "𝄞"}
		return protoreflect.ValueOfString(vals[r.IntN(len(vals))])
	case protoreflect.BytesKind:
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return protoreflect.ValueOfBytes(b)
	}
	panic("unhandled kind " + fd.Kind().String())
}

func TestFastResultMatchesProtojson(t *testing.T) {
	md := compileFast(t).Messages().ByName("Plain")
	pl := planOf(md)
	r := rand.New(rand.NewPCG(1, 2))
	fastCount := 0
	for i := range 3000 {
		m := dynamicpb.NewMessage(md)
		fill(r, m, 0)
		wire, err := proto.MarshalOptions{Deterministic: i%2 == 0}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if checkResult(t, md, pl, wire) {
			fastCount++
		}
		// and the JSON of m goes back through the request fast path
		js, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		checkRequest(t, md, pl, js)
	}
	if fastCount < 2900 {
		t.Errorf("the fast path rendered %d of 3000 results, want nearly all", fastCount)
	}
}

// checkResult asserts that when the fast path renders wire, protojson
// renders the same JSON value.
func checkResult(t testing.TB, md protoreflect.MessageDescriptor, pl *plan, wire []byte) bool {
	t.Helper()
	fast, ok := pl.appendResult(nil, wire)
	if !ok {
		return false
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(wire, m); err != nil {
		t.Fatalf("fast path rendered wire bytes proto refuses (%v): %x", err, wire)
	}
	slow, err := protojson.Marshal(m)
	if err != nil {
		t.Fatalf("fast path rendered wire bytes protojson refuses (%v): %x", err, wire)
	}
	if !sameJSON(t, fast, slow) {
		t.Fatalf("fast %s\nslow %s\nwire %x", fast, slow, wire)
	}
	return true
}

func TestFastResultEdgeCases(t *testing.T) {
	md := compileFast(t).Messages().ByName("Plain")
	pl := planOf(md)
	tests := []struct {
		name string
		wire []byte
		fast bool
	}{
		{"empty", nil, true},
		{"explicit zero without presence", []byte{0x18, 0x00}, true},
		{"explicit zero with presence", []byte{0xe0, 0x01, 0x00}, true},
		{"unknown field", []byte{0xf8, 0x07, 0x01}, true},
		{"packed repeated", []byte{0x92, 0x01, 0x02, 0x01, 0x02}, true},
		{"unpacked repeated", []byte{0x90, 0x01, 0x01, 0x90, 0x01, 0x02}, true},
		{"empty packed", []byte{0x92, 0x01, 0x00}, true},
		{"singular twice", []byte{0x18, 0x01, 0x18, 0x02}, false},
		{"repeated split", []byte{0x90, 0x01, 0x01, 0x18, 0x01, 0x90, 0x01, 0x02}, false},
		{"wrong wire type", []byte{0x1d, 0, 0, 0, 0}, false},
		{"invalid UTF-8", []byte{0x72, 0x01, 0xff}, false},
		{"truncated", []byte{0x72, 0x05, 'a'}, false},
		{"unknown enum value", []byte{0x80, 0x01, 0x09}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkResult(t, md, pl, tt.wire); got != tt.fast {
				t.Errorf("fast path taken: got %v, want %v", got, tt.fast)
			}
		})
	}
}

func FuzzFastRequest(f *testing.F) {
	md := compileFast(f).Messages().ByName("Plain")
	pl := planOf(md)
	byPos := plainCodec(f) // the same message as a unary method's request, for params by position
	for _, s := range []string{`{}`, `{"i32":1,"s":"x","inner":{"kids":[{}]}}`, `{"rD":[1e5,-0.0],"by":"AQ=="}`, `{"oS":"a"}`,
		`[]`, `[1, 2, 3]`, `[null, null, 3, "4", 5]`, `[` + strings.Repeat("null,", 16) + `{"kids": [{}]}]`, `[` + strings.Repeat("null,", 24) + `"a", {}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		checkRequest(t, md, pl, params)
		checkPositional(t, byPos, params)
	})
}

func FuzzFastResult(f *testing.F) {
	md := compileFast(f).Messages().ByName("Plain")
	pl := planOf(md)
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		m := dynamicpb.NewMessage(md)
		fill(r, m, 0)
		wire, _ := proto.Marshal(m)
		f.Add(wire)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		checkResult(t, md, pl, wire)
	})
}
