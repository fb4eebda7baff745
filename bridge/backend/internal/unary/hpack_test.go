package unary

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
)

// TestAppendNeverIndexed checks the hand-written literals against the
// HPACK decoder, around the lengths where the value's length takes a
// second byte.
func TestAppendNeverIndexed(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 126, 127, 128, 254, 255, 16383, 16384, 70000} {
		value := strings.Repeat("v", n)
		var b []byte
		b = appendNeverIndexed(b, "x-request-id", func(b []byte) []byte { return append(b, value...) })
		b = appendNeverIndexed(b, "grpc-timeout", func(b []byte) []byte { return appendTimeout(b, 1500*time.Millisecond) })
		d := hpack.NewDecoder(4096, nil)
		d.SetMaxStringLength(1 << 20)
		fields, err := d.DecodeFull(b)
		if err != nil {
			t.Fatalf("value of %d bytes: %v", n, err)
		}
		want := []hpack.HeaderField{{Name: "x-request-id", Value: value, Sensitive: true}, {Name: "grpc-timeout", Value: "1500000u", Sensitive: true}}
		if len(fields) != 2 || fields[0] != want[0] || fields[1] != want[1] {
			t.Errorf("value of %d bytes: got %d fields %.80v, want %.80v", n, len(fields), fields, want)
		}
	}
}
