package unary

import (
	"testing"
	"time"
)

func TestEncodeTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{1, "1n"},
		{99999999, "99999999n"},
		{100000000, "100000u"},
		{50 * time.Millisecond, "50000000n"},
		{time.Second + 1, "1000001u"},
		{2 * time.Minute, "120000m"},
		{30 * 24 * time.Hour, "2592000S"},
		{3000 * 24 * time.Hour, "4320000M"},
		{time.Duration(1<<63 - 1), "2562048H"},
	}
	for _, tt := range tests {
		if got := string(appendTimeout(nil, tt.d)); got != tt.want {
			t.Errorf("appendTimeout(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestDecodeMessage(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"100%25", "100%"},
		{"caf%C3%A9", "café"},
		{"%41%42%43", "ABC"},
		{"%zz%4", "%zz%4"},
		{"%", "%"},
		{"a%2", "a%2"},
		{"%E2%9C%93 done", "✓ done"},
	}
	for _, tt := range tests {
		if got := decodeMessage(tt.in); got != tt.want {
			t.Errorf("decodeMessage(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
