package mapping

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzRequest feeds arbitrary bytes to Codec.Request of test.v1.AllTypes:
// it must not panic, and every failure must be a -32602 *Error with a
// message and valid JSON data.
func FuzzRequest(f *testing.F) {
	for _, tc := range roundTrips {
		f.Add([]byte(tc.params))
	}
	for _, s := range []string{`[]`, `[1.5, 2, 3, "4"]`, `[null, null, "x"]`, `[` + strings.Repeat("null,", 24) + `"a", {}]`} {
		f.Add([]byte(s)) // params by position
	}
	b := loadBackend(f)
	codecs := []*Codec{
		NewCodec(generatedEcho(), NewResolver(nil), Options{}),
		NewCodec(b.method(f, "test.v1.TestService.Echo"), NewResolver(b.types), Options{}),
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		for _, c := range codecs {
			m, jerr := c.Request(params)
			if jerr == nil {
				if m == nil {
					t.Fatal("got nil message and nil error")
				}
				if _, err := c.AppendResult(nil, m); err != nil {
					t.Fatalf("AppendResult of an accepted request: %v", err)
				}
				continue
			}
			var e *Error
			if !errors.As(error(jerr), &e) || e.Code != CodeInvalidParams {
				t.Fatalf("got %v, want a -32602 *Error", jerr)
			}
			if e.Message == "" || !json.Valid(e.Data) {
				t.Fatalf("got message %q data %q, want both set and valid", e.Message, e.Data)
			}
		}
	})
}
