package config

import (
	"errors"
	goreflect "reflect"
	"slices"
	"strings"
	"testing"
)

func TestLoadOrigins(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		file      string
		want      Origins
		wantHosts []string // EffectiveAllowedHosts
	}{
		{name: "defaults", wantHosts: []string{"localhost", "127.0.0.1", "::1"}},
		{name: "flags", args: []string{"--cors-origins", "https://app.example.com,https://*.example.org", "--allowed-hosts", "api.example.com"},
			want:      Origins{CORSOrigins: []string{"https://app.example.com", "https://*.example.org"}, AllowedHosts: []string{"api.example.com"}},
			wantHosts: []string{"api.example.com"}},
		{name: "env", env: map[string]string{"BRIDGE_CORS_ORIGINS": "*", "BRIDGE_ALLOWED_HOSTS": "*.example.com, [::1]"},
			want: Origins{CORSOrigins: []string{"*"}, AllowedHosts: []string{"*.example.com", "[::1]"}}, wantHosts: []string{"*.example.com", "[::1]"}},
		{name: "file", args: []string{"--config", "$FILE"}, file: "cors_origins: [\"null\", \"http://localhost:*\"]\nallowed_hosts: [\"*\"]\nlisten: 0.0.0.0:8080\n",
			want: Origins{CORSOrigins: []string{"null", "http://localhost:*"}, AllowedHosts: []string{"*"}}, wantHosts: []string{"*"}},
		{name: "empty lists", args: []string{"--config", "$FILE"}, file: "cors_origins: []\nallowed_hosts: []\nlisten: \":9000\"\n", wantHosts: []string{"*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := load(t, tt.args, tt.env, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if !goreflect.DeepEqual(got.Origins, tt.want) {
				t.Errorf("got %+v, want %+v", got.Origins, tt.want)
			}
			if h := got.EffectiveAllowedHosts(); !slices.Equal(h, tt.wantHosts) {
				t.Errorf("allowed hosts: got %q, want %q", h, tt.wantHosts)
			}
		})
	}
}

func TestLoadOriginsErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantKey string
		want    string
	}{
		{"origin without scheme", []string{"--cors-origins", "app.example.com"}, "cors_origins", "want an origin such as https://app.example.com"},
		{"origin with a path", []string{"--cors-origins", "https://app.example.com/"}, "cors_origins", "no path"},
		{"bad origin pattern", []string{"--cors-origins", "https://[a"}, "cors_origins", `bad origin pattern "https://[a"`},
		{"host with a port", []string{"--allowed-hosts", "api.example.com:8080"}, "allowed_hosts", "without a port"},
		{"host with a path", []string{"--allowed-hosts", "api.example.com/x"}, "allowed_hosts", "want a host name"},
		{"wildcard inside", []string{"--allowed-hosts", "api.*.com"}, "allowed_hosts", "wildcard stands only first"},
		{"wildcard without dot", []string{"--allowed-hosts", "*example.com"}, "allowed_hosts", "wildcard stands only first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := load(t, tt.args, nil, "")
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tt.wantKey || !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("got %v, want an invalid value of %s", err, tt.wantKey)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDefaultAllowedHosts(t *testing.T) {
	loopback := []string{"localhost", "127.0.0.1", "::1"}
	for listen, want := range map[string][]string{
		"127.0.0.1:8080":  loopback,
		"localhost:8080":  loopback,
		"LocalHost:0":     loopback,
		"[::1]:8080":      loopback,
		"127.0.0.2:8080":  append(slices.Clone(loopback), "127.0.0.2"),
		":8080":           {"*"},
		"0.0.0.0:8080":    {"*"},
		"[::]:8080":       {"*"},
		"10.1.2.3:8080":   {"*"},
		"bridge.svc:8080": {"*"},
		"nonsense":        {"*"},
	} {
		if got := DefaultAllowedHosts(listen); !slices.Equal(got, want) {
			t.Errorf("DefaultAllowedHosts(%q) = %q, want %q", listen, got, want)
		}
	}
}
