package unary

import (
	"errors"
	"testing"
	"time"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		target string
		want   endpoint
		err    error
	}{
		{"localhost:50051", endpoint{"tcp", "localhost:50051", "localhost:50051"}, nil},
		{"127.0.0.1:1", endpoint{"tcp", "127.0.0.1:1", "127.0.0.1:1"}, nil},
		{"[::1]:50051", endpoint{"tcp", "[::1]:50051", "[::1]:50051"}, nil},
		{"dns:///host:1", endpoint{"tcp", "host:1", "host:1"}, nil},
		{"dns:///example.com", endpoint{"tcp", "example.com:443", "example.com"}, nil},
		{"passthrough:///host:1", endpoint{"tcp", "host:1", "host:1"}, nil},
		{"unix:/tmp/x.sock", endpoint{"unix", "/tmp/x.sock", "localhost"}, nil},
		{"unix:///tmp/x.sock", endpoint{"unix", "/tmp/x.sock", "localhost"}, nil},
		{"unix:relative.sock", endpoint{"unix", "relative.sock", "localhost"}, nil},
		{"unix-abstract:name", endpoint{"unix", "@name", "localhost"}, nil},
		{"ipv4:1.2.3.4:5", endpoint{"tcp", "1.2.3.4:5", "1.2.3.4:5"}, nil},
		{"ipv4:1.2.3.4", endpoint{"tcp", "1.2.3.4:443", "1.2.3.4"}, nil},
		{"ipv6:[::1]:5", endpoint{"tcp", "[::1]:5", "[::1]:5"}, nil},
		{"example.com", endpoint{"tcp", "example.com:443", "example.com"}, nil},
		{"[::1]", endpoint{"tcp", "[::1]:443", "[::1]"}, nil},

		{"dns://8.8.8.8/host:1", endpoint{}, ErrUnsupportedTarget},
		{"xds:///svc", endpoint{}, ErrUnsupportedTarget},
		{"ipv4:1.1.1.1:1,2.2.2.2:2", endpoint{}, ErrUnsupportedTarget},
		{"ipv6:[::1]:1,[::2]:2", endpoint{}, ErrUnsupportedTarget},
		{"", endpoint{}, ErrUnsupportedTarget},
		{"unix:", endpoint{}, ErrUnsupportedTarget},
		{"unix://host/tmp/x.sock", endpoint{}, ErrUnsupportedTarget},
		{"unix-abstract:", endpoint{}, ErrUnsupportedTarget},
		{"dns:", endpoint{}, ErrUnsupportedTarget},
		{"dns:///", endpoint{}, ErrUnsupportedTarget},
		{"passthrough:///", endpoint{}, ErrUnsupportedTarget},
		{"custom:///whatever", endpoint{}, ErrUnsupportedTarget},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			got, err := parseTarget(tt.target)
			if !errors.Is(err, tt.err) {
				t.Fatalf("parseTarget(%q) error %v, want %v", tt.target, err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("parseTarget(%q) = %+v, want %+v", tt.target, got, tt.want)
			}
			_, err = New(tt.target, Options{})
			if !errors.Is(err, tt.err) {
				t.Fatalf("New(%q) error %v, want %v", tt.target, err, tt.err)
			}
		})
	}
}

func TestEncodeTimeout(t *testing.T) {
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
