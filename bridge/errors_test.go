package bridge_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

func TestEveryGRPCCodeIsMapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	names := []string{"", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
		"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}
	for code := 1; code <= 16; code++ {
		t.Run(names[code], func(t *testing.T) {
			msg := fmt.Sprintf("backend says %d", code)
			r := e.call(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"test.v1.TestService.Fail","params":{"code":%d,"message":%q},"id":%d}`, code, msg, code))
			if got := errCode(t, r); got != int64(code) {
				t.Fatalf("got code %d, want %d (%v)", got, code, r)
			}
			eo := r["error"].(map[string]any)
			if eo["message"] != msg {
				t.Errorf("got message %q, want %q", eo["message"], msg)
			}
			data := eo["data"].(map[string]any)
			if data["status"] != names[code] {
				t.Errorf("got status %v, want %s", data["status"], names[code])
			}
			if d, ok := data["details"].([]any); !ok || len(d) != 0 {
				t.Errorf("got details %v, want []", data["details"])
			}
		})
	}
	t.Run("OK is a result", func(t *testing.T) {
		r := e.call(t, `{"jsonrpc":"2.0","method":"test.v1.TestService.Fail","params":{"code":0},"id":1}`)
		if errCode(t, r) != 0 {
			t.Errorf("got %v, want a result", r)
		}
	})
}

func TestStatusDetailsAreRendered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	tests := []struct {
		name   string
		detail string
		want   string // the detail as JSON
	}{
		{"ErrorInfo", "error_info", `{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TEST","domain":"test.v1"}`},
		{"BadRequest", "bad_request", `{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"f_string","description":"bad"}]}`},
		{"type known only from the backend's descriptors", "custom", `{"@type":"type.googleapis.com/test.v1.CustomDetail","reason":"custom","retryAfterMs":"1500"}`},
		{"type nobody knows", "unknown", `{"@type":"type.googleapis.com/nobody.knows.This","value":"AQID"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, `{"jsonrpc":"2.0","method":"test.v1.TestService.Fail","params":{"code":3,"message":"bad","details":["`+tt.detail+`"]},"id":1}`)
			details := r["error"].(map[string]any)["data"].(map[string]any)["details"].([]any)
			if len(details) != 1 {
				t.Fatalf("got details %v, want one", details)
			}
			var want any
			d := json.NewDecoder(strings.NewReader(tt.want))
			d.UseNumber()
			d.Decode(&want)
			if err := match(want, details[0], "$"); err != nil {
				t.Errorf("got %v, want %s: %v", details[0], tt.want, err)
			}
		})
	}
}

func TestInt64LimitsRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	tests := []struct{ name, params, field, want string }{
		{"int64 max as string", `{"fInt64":"9223372036854775807"}`, "fInt64", "9223372036854775807"},
		{"int64 max as number", `{"fInt64":9223372036854775807}`, "fInt64", "9223372036854775807"},
		{"int64 min", `{"fInt64":"-9223372036854775808"}`, "fInt64", "-9223372036854775808"},
		{"uint64 max", `{"fUint64":"18446744073709551615"}`, "fUint64", "18446744073709551615"},
		{"sfixed64 max", `{"fSfixed64":"9223372036854775807"}`, "fSfixed64", "9223372036854775807"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":`+tt.params+`,"id":1}`)
			got, ok := r["result"].(map[string]any)[tt.field].(string)
			if !ok || got != tt.want {
				t.Errorf("got %v, want the string %q", r["result"], tt.want)
			}
		})
	}
	t.Run("int64 over max is invalid params", func(t *testing.T) {
		r := e.call(t, `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fInt64":"9223372036854775808"},"id":1}`)
		if got := errCode(t, r); got != -32602 {
			t.Errorf("got %v, want -32602", r)
		}
	})
}

func TestInvalidParamsNameTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	tests := []struct{ name, params, field string }{
		{"unknown field", `{"nope":1}`, "nope"},
		{"names match case exactly", `{"FInt32":1}`, "FInt32"},
		{"proto name in another case", `{"F_INT32":1}`, "F_INT32"},
		{"wrong type", `{"fInt32":"abc"}`, "fInt32"},
		{"int32 out of range", `{"fInt32":4294967296}`, "fInt32"},
		{"bad enum name", `{"fEnum":"COLOR_PURPLE"}`, "fEnum"},
		{"bad base64", `{"fBytes":"!!!"}`, "fBytes"},
		{"bad timestamp", `{"wktTimestamp":"yesterday"}`, "wktTimestamp"},
		{"nested field", `{"fMessage":{"big":"x"}}`, "big"},
		{"by position, wrong type", `[1, 2, "x"]`, `"field":"fInt32","position":2`},
		{"by position, nested", `[null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, {"big":"x"}]`, `position 16 (fMessage.big)`},
		{"by position, too many", `[` + strings.Repeat("null,", 42) + `0]`, `"position":42`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":`+tt.params+`,"id":1}`)
			if got := errCode(t, r); got != -32602 {
				t.Fatalf("got %v, want -32602", r)
			}
			eo := r["error"].(map[string]any)
			text := eo["message"].(string)
			if data, err := json.Marshal(eo["data"]); err == nil {
				text += string(data)
			}
			if !strings.Contains(text, tt.field) {
				t.Errorf("error %v does not name %q", eo, tt.field)
			}
		})
	}
}

func TestEmitUnpopulated(t *testing.T) {
	t.Parallel()
	for _, emit := range []bool{false, true} {
		t.Run(fmt.Sprint(emit), func(t *testing.T) {
			e := newEnv(t, bridge.Options{EmitUnpopulated: emit})
			r := e.call(t, `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{},"id":1}`)
			_, has := r["result"].(map[string]any)["fInt32"]
			if has != emit {
				t.Errorf("EmitUnpopulated %v: result %v has fInt32: %v", emit, r["result"], has)
			}
		})
	}
}
