package config

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// validateRateLimitStore checks the rate limit store's keys: the URL's
// form (never whether the store answers: the bridge starts without it)
// and that the password file can be read.
func (s Settings) validateRateLimitStore(e Engine) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	if s.RateLimitStore != "" && e.CheckStoreURL != nil {
		if err := e.CheckStoreURL(s.RateLimitStore); err != nil {
			bad("rate_limit_store", "%v", err)
		}
	}
	if f := s.RateLimitStorePasswordFile; f != "" {
		if _, err := s.RateLimitStorePassword(); err != nil {
			bad("rate_limit_store_password_file", "%v", err)
		} else if s.RateLimitStore == "" {
			bad("rate_limit_store_password_file", "%s is set but rate_limit_store is not", f)
		}
	}
	if s.RateLimitStoreTimeout <= 0 {
		bad("rate_limit_store_timeout", "must be positive, got %s", s.RateLimitStoreTimeout)
	}
	if e.Fallbacks != nil && !slices.Contains(e.Fallbacks, s.RateLimitStoreFallback) {
		bad("rate_limit_store_fallback", "want one of %v, got %q", e.Fallbacks, s.RateLimitStoreFallback)
	}
	return errs
}

// RateLimitStorePassword reads RateLimitStorePasswordFile: its text less
// the line ending a Secret's file may have; empty when no file is set.
func (s Settings) RateLimitStorePassword() (string, error) {
	if s.RateLimitStorePasswordFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(s.RateLimitStorePasswordFile)
	if err != nil {
		return "", fmt.Errorf("cannot read the password: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("%s is empty", s.RateLimitStorePasswordFile)
	}
	return pw, nil
}
