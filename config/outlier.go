package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config/defaults"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Outlier is how a backend's outlier detection takes an address that
// keeps failing out of the rotation (docs/backends.md#outlier-detection).
type Outlier struct {
	// ConsecutiveFailures ejects an address whose last N calls failed;
	// 0 turns outlier detection off.
	ConsecutiveFailures int
	// Codes are the statuses from an address that count as failures, by
	// name (UNAVAILABLE, any case) or number (14).
	Codes []string
	// EjectionTime is how long an ejected address takes no calls, times
	// the times it was ejected since its last success, up to
	// MaxEjectionTime (or EjectionTime, when larger).
	EjectionTime    time.Duration
	MaxEjectionTime time.Duration
	// MaxEjectionPercent bounds the share of a backend's addresses ejected
	// at once; one of two or more may be whatever it says, never the last.
	MaxEjectionPercent int
}

func defaultOutlier() Outlier {
	return Outlier{ConsecutiveFailures: defaults.OutlierConsecutiveFailures, Codes: []string{defaults.OutlierCode},
		EjectionTime: defaults.OutlierEjectionTime, MaxEjectionTime: defaults.OutlierMaxEjectionTime,
		MaxEjectionPercent: defaults.OutlierMaxEjectionPercent}
}

// StatusCodes returns the Codes of o as codes; o must be valid.
func (o Outlier) StatusCodes() []codes.Code {
	var out []codes.Code
	for _, s := range o.Codes {
		if c, ok := ParseCode(s); ok {
			out = append(out, c)
		}
	}
	return out
}

// ParseCode reads a gRPC status code by its canonical name
// ("UNAVAILABLE", any case) or its number ("14"); OK is none.
func ParseCode(s string) (codes.Code, bool) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return codes.Code(n), n >= 1 && n <= 16
	}
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		if strings.EqualFold(s, mapping.CodeName(c)) {
			return c, true
		}
	}
	return 0, false
}

// validate reports the bad values of o, named with prefix
// ("outlier_", or "backends[1].outlier_").
func (o Outlier) validate(prefix string) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: prefix + key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	if o.ConsecutiveFailures < 0 {
		bad("consecutive_failures", "must be 0 (off) or more, got %d", o.ConsecutiveFailures)
	}
	for _, s := range o.Codes {
		if _, ok := ParseCode(s); !ok {
			bad("codes", "%q is no gRPC status code that fails a call: want a name such as UNAVAILABLE or a number from 1 to 16", s)
		}
	}
	if o.EjectionTime <= 0 {
		bad("ejection_time", "must be positive, got %s", o.EjectionTime)
	}
	if o.MaxEjectionTime <= 0 {
		bad("max_ejection_time", "must be positive, got %s", o.MaxEjectionTime)
	}
	if o.MaxEjectionPercent < 0 || o.MaxEjectionPercent > 100 {
		bad("max_ejection_percent", "must be 0 to 100, got %d", o.MaxEjectionPercent)
	}
	return errs
}
