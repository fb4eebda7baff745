package backend

import (
	"slices"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		kind         targetKind
		host, port   string
		server       string
		fixed        []string
		authority    string
		err          bool
	}{
		{name: "host and port", target: "users:50051", kind: named, host: "users", port: "50051", authority: "users:50051"},
		{name: "bare host", target: "users", kind: named, host: "users", port: "443", authority: "users"},
		{name: "dns", target: "dns:///users.ns.svc:50051", kind: named, host: "users.ns.svc", port: "50051", authority: "users.ns.svc:50051"},
		{name: "dns server", target: "dns://10.0.0.10:5353/users:50051", kind: named, host: "users", port: "50051", server: "10.0.0.10:5353", authority: "users:50051"},
		{name: "dns server without port", target: "dns://10.0.0.10/users:50051", kind: named, host: "users", port: "50051", server: "10.0.0.10:53", authority: "users:50051"},
		{name: "ip literal", target: "127.0.0.1:50051", kind: fixed, fixed: []string{"127.0.0.1:50051"}, authority: "127.0.0.1:50051"},
		{name: "ipv6 literal", target: "[::1]:50051", kind: fixed, fixed: []string{"[::1]:50051"}, authority: "[::1]:50051"},
		{name: "dns of an ip", target: "dns:///10.1.2.3:7", kind: fixed, fixed: []string{"10.1.2.3:7"}, authority: "10.1.2.3:7"},
		{name: "ipv4 list", target: "ipv4:10.0.0.2:1,10.0.0.1:1,10.0.0.3", kind: fixed, fixed: []string{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:443"}, authority: "10.0.0.1:1"},
		{name: "ipv6 list", target: "ipv6:[::1]:5,::2", kind: fixed, fixed: []string{"[::1]:5", "[::2]:443"}, authority: "[::1]:5"},
		{name: "unix", target: "unix:///run/users.sock", kind: fixed, fixed: []string{"unix:/run/users.sock"}, authority: "localhost"},
		{name: "unix path", target: "unix:/run/users.sock", kind: fixed, fixed: []string{"unix:/run/users.sock"}, authority: "localhost"},
		{name: "unix relative", target: "unix:users.sock", kind: fixed, fixed: []string{"unix:users.sock"}, authority: "localhost"},
		{name: "unix abstract", target: "unix-abstract:users", kind: fixed, fixed: []string{"unix:@users"}, authority: "localhost"},
		{name: "passthrough", target: "passthrough:///users:1", kind: fixed, fixed: []string{"users:1"}, authority: "users:1"},
		{name: "passthrough without port", target: "passthrough:///users", kind: fixed, fixed: []string{"users:443"}, authority: "users"},
		{name: "unix with an authority", target: "unix://host/run/users.sock", kind: opaque, fixed: []string{"unix://host/run/users.sock"}, authority: "unix://host/run/users.sock"},
		{name: "passthrough with an authority", target: "passthrough://auth/users:1", kind: opaque, fixed: []string{"passthrough://auth/users:1"}, authority: "passthrough://auth/users:1"},
		{name: "other scheme", target: "xds:///users", kind: opaque, fixed: []string{"xds:///users"}, authority: "xds:///users"},
		{name: "bad list", target: "ipv4:users:1", err: true},
		{name: "empty", target: "", err: true},
		{name: "dns without path", target: "dns://server", err: true},
		{name: "dns without host", target: "dns:///", err: true},
		{name: "unix without path", target: "unix:", err: true},
		{name: "unix abstract without name", target: "unix-abstract:", err: true},
		{name: "passthrough without address", target: "passthrough:///", err: true},
		{name: "passthrough of a list", target: "passthrough:///a:1,b:2", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTarget(tc.target)
			if tc.err {
				if err == nil {
					t.Fatalf("got %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.kind != tc.kind || got.host != tc.host || got.port != tc.port || got.server != tc.server ||
				!slices.Equal(got.fixed, tc.fixed) || got.authority != tc.authority {
				t.Fatalf("got %+v, want %+v", got, tc)
			}
		})
	}
}

// FuzzParseTarget: any target string (from the configuration) parses
// without panicking, and a fixed one into at least one HOST:PORT.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"users:50051", "dns://1.2.3.4/users:1", "ipv4:1.2.3.4:5,6.7.8.9", "ipv6:[::1]:5", "unix:/x", "unix-abstract:x", "passthrough:///x:1", "[::1]", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTarget(s)
		if err != nil {
			return
		}
		if got.kind == fixed && (len(got.fixed) == 0 || !strings.Contains(got.fixed[0], ":")) {
			t.Fatalf("%q: %+v", s, got)
		}
	})
}
