package mapping

import (
	"encoding/json"
	"testing"
)

func TestRequestElementAndMember(t *testing.T) {
	b := loadBackend(t)
	c := NewCodec(b.method(t, "test.v1.TestService.BidiStream"), NewResolver(b.types), Options{})
	tests := []struct {
		name      string
		element   bool // RequestElement(2, ...) rather than RequestMember("message", ...)
		json      string
		wantField string // "" for success
	}{
		{"element", true, `{"seq":1,"text":"a"}`, ""},
		{"element empty", true, `{}`, ""},
		{"element bad field", true, `{"seq":"x"}`, "[2].seq"},
		{"element unknown field", true, `{"nope":1}`, "[2].nope"},
		{"element not an object", true, `[1]`, "[2]"},
		{"element null", true, `null`, "[2]"},
		{"member", false, `{"text":"b"}`, ""},
		{"member bad field", false, `{"text":1}`, "message.text"},
		{"member not an object", false, `"x"`, "message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := func(raw []byte) (any, *Error) {
				if tt.element {
					return c.RequestElement(2, raw)
				}
				return c.RequestMember("message", raw)
			}
			m, e := call([]byte(tt.json))
			if tt.wantField == "" {
				if e != nil || m == nil {
					t.Fatalf("got error %v, want a message", e)
				}
				return
			}
			if e == nil {
				t.Fatalf("got %v, want an error at %s", m, tt.wantField)
			}
			var data struct{ Field, Reason string }
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatal(err)
			}
			if e.Code != CodeInvalidParams || data.Field != tt.wantField || data.Reason == "" {
				t.Errorf("got code %d field %q reason %q, want -32602 at %q", e.Code, data.Field, data.Reason, tt.wantField)
			}
		})
	}
}
