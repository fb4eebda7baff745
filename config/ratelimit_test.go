package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidateRateLimitStore(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		set  func(*Settings)
		key  string // the key the error names; empty: valid
	}{
		{"none", func(*Settings) {}, ""},
		{"redis", func(s *Settings) { s.RateLimitStore = "redis://127.0.0.1:6379/0" }, ""},
		{"rediss with password", func(s *Settings) { s.RateLimitStore = "rediss://:pw@redis:6380/2" }, ""},
		{"password file", func(s *Settings) { s.RateLimitStore, s.RateLimitStorePasswordFile = "redis://r/0", pwFile }, ""},
		{"http", func(s *Settings) { s.RateLimitStore = "http://redis:6379/0" }, "rate_limit_store"},
		{"no scheme", func(s *Settings) { s.RateLimitStore = "redis:6379" }, "rate_limit_store"},
		{"bad db", func(s *Settings) { s.RateLimitStore = "redis://r:6379/x" }, "rate_limit_store"},
		{"bad port", func(s *Settings) { s.RateLimitStore = "redis://r:http/0" }, "rate_limit_store"},
		{"missing password file", func(s *Settings) {
			s.RateLimitStore, s.RateLimitStorePasswordFile = "redis://r/0", filepath.Join(dir, "nope")
		}, "rate_limit_store_password_file"},
		{"empty password file", func(s *Settings) { s.RateLimitStore, s.RateLimitStorePasswordFile = "redis://r/0", empty }, "rate_limit_store_password_file"},
		{"password file without store", func(s *Settings) { s.RateLimitStorePasswordFile = pwFile }, "rate_limit_store_password_file"},
		{"zero timeout", func(s *Settings) { s.RateLimitStoreTimeout = 0 }, "rate_limit_store_timeout"},
		{"bad fallback", func(s *Settings) { s.RateLimitStoreFallback = "open" }, "rate_limit_store_fallback"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := Defaults()
			tt.set(&s)
			errs := s.validateRateLimitStore(testEngine)
			if tt.key == "" {
				if len(errs) > 0 {
					t.Fatalf("got %v, want valid", errs)
				}
				return
			}
			var ke *KeyError
			if len(errs) != 1 || !errors.As(errs[0], &ke) || ke.Key != tt.key {
				t.Fatalf("got %v, want one error naming %s", errs, tt.key)
			}
			if strings.Contains(errs[0].Error(), "pw") {
				t.Errorf("the error shows the password: %v", errs[0])
			}
		})
	}
	s := Defaults()
	s.RateLimitStore, s.RateLimitStorePasswordFile = "redis://r/0", pwFile
	if pw, err := s.RateLimitStorePassword(); pw != "s3cret" || err != nil {
		t.Errorf("got password %q, %v, want s3cret without the line break", pw, err)
	}
	if d := Defaults(); d.RateLimitStoreTimeout != 50*time.Millisecond || d.RateLimitStoreFallback != "local" {
		t.Errorf("defaults: %s %s, want 50ms local", d.RateLimitStoreTimeout, d.RateLimitStoreFallback)
	}
}

// TestRateLimitStoreMasked: --print-config shows the store's URL without
// its password.
func TestRateLimitStoreMasked(t *testing.T) {
	s := Defaults()
	s.RateLimitStore = "redis://user:s3cret@redis:6379/1"
	out, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret") || !strings.Contains(string(out), "rate_limit_store: redis://user:%2A%2A%2A%2A%2A%2A%2A%2A@redis:6379/1") {
		t.Errorf("got:\n%s\nwant the URL with its password masked", out)
	}
}
