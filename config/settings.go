package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// Settings is everything the bridge can be configured with. The zero value
// is not usable; start from Defaults or Load.
type Settings struct {
	// Backend is the gRPC backend's target, HOST:PORT or any grpc-go
	// target such as "dns:///backend:50051". Empty means unset; `serve`
	// refuses that.
	Backend string
	// Listen is the HTTP listen address, HOST:PORT. Port 0 picks a free one.
	Listen string
	// MaxBodyBytes bounds one HTTP request body.
	MaxBodyBytes int64
	// MaxBatchSize bounds the number of calls in one JSON-RPC batch.
	MaxBatchSize int
	// BatchParallelism bounds the calls of one batch running at once.
	BatchParallelism int
	// CallTimeout bounds each backend call.
	CallTimeout time.Duration
	// EmitUnpopulated makes results carry fields holding default values.
	EmitUnpopulated bool
	// LogLevel is one of debug, info, warn, error.
	LogLevel string
	// LogFormat is text or json.
	LogFormat string
	// ShutdownTimeout bounds the wait for in-flight requests on shutdown.
	ShutdownTimeout time.Duration
}

// Defaults returns the settings used where nothing else is given.
func Defaults() Settings {
	return Settings{
		Listen:           "127.0.0.1:8080",
		MaxBodyBytes:     4 << 20,
		MaxBatchSize:     100,
		BatchParallelism: 16,
		CallTimeout:      30 * time.Second,
		LogLevel:         "info",
		LogFormat:        "text",
		ShutdownTimeout:  15 * time.Second,
	}
}

// LogLevels lists the accepted values of Settings.LogLevel.
func LogLevels() []string { return []string{"debug", "info", "warn", "error"} }

// LogFormats lists the accepted values of Settings.LogFormat.
func LogFormats() []string { return []string{"text", "json"} }

// Validate reports every bad value of s, each as a *KeyError naming the
// key. An empty Backend is valid here: only `serve` needs one.
func (s Settings) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		bad("listen", "want HOST:PORT, got %q", s.Listen)
	}
	if s.MaxBodyBytes <= 0 {
		bad("max_body_bytes", "must be positive, got %d", s.MaxBodyBytes)
	}
	if s.MaxBatchSize < 1 {
		bad("max_batch_size", "must be at least 1, got %d", s.MaxBatchSize)
	}
	if s.BatchParallelism < 1 {
		bad("batch_parallelism", "must be at least 1, got %d", s.BatchParallelism)
	}
	if s.CallTimeout <= 0 {
		bad("call_timeout", "must be positive, got %s", s.CallTimeout)
	}
	if s.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", "must be positive, got %s", s.ShutdownTimeout)
	}
	if !slices.Contains(LogLevels(), s.LogLevel) {
		bad("log_level", "want one of %v, got %q", LogLevels(), s.LogLevel)
	}
	if !slices.Contains(LogFormats(), s.LogFormat) {
		bad("log_format", "want one of %v, got %q", LogFormats(), s.LogFormat)
	}
	return errors.Join(errs...)
}
