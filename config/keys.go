package config

import "strings"

// FileFlag is the flag naming the YAML file to read; its environment
// variable is BRIDGE_CONFIG.
const FileFlag = "config"

// Key names for RegisterExcept.
const (
	KeyBackend = "backend"
)

// envPrefix prefixes every environment variable: BRIDGE_LISTEN.
const envPrefix = "BRIDGE"

// key describes one setting: its snake_case name (the YAML key), its help
// text and where it lives in Settings.
type key struct {
	name  string
	usage string
	field func(*Settings) any // a pointer into the Settings
}

// keys lists every setting, in the order of the help text and the docs.
func keys() []key {
	return []key{
		{"backend", "gRPC backend target, HOST:PORT", func(s *Settings) any { return &s.Backend }},
		{"listen", "HTTP listen address, HOST:PORT (port 0 picks a free port)", func(s *Settings) any { return &s.Listen }},
		{"max_body_bytes", "largest HTTP request body in bytes", func(s *Settings) any { return &s.MaxBodyBytes }},
		{"max_batch_size", "most calls in one JSON-RPC batch", func(s *Settings) any { return &s.MaxBatchSize }},
		{"batch_parallelism", "most calls of one batch running at once", func(s *Settings) any { return &s.BatchParallelism }},
		{"call_timeout", "deadline of each backend call, e.g. 30s", func(s *Settings) any { return &s.CallTimeout }},
		{"emit_unpopulated", "include fields holding default values in results", func(s *Settings) any { return &s.EmitUnpopulated }},
		{"log_level", "log level: debug, info, warn or error", func(s *Settings) any { return &s.LogLevel }},
		{"log_format", "log format: text or json", func(s *Settings) any { return &s.LogFormat }},
		{"shutdown_timeout", "wait for in-flight requests on shutdown, e.g. 15s", func(s *Settings) any { return &s.ShutdownTimeout }},
	}
}

// flagName is the kebab-case flag of a key: max_body_bytes -> max-body-bytes.
func flagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// envName is the environment variable of a key: max_body_bytes -> BRIDGE_MAX_BODY_BYTES.
func envName(key string) string { return envPrefix + "_" + strings.ToUpper(key) }
