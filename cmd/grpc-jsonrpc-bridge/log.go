package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/observe"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// newLogger writes records of s.LogLevel and above to w, as text or JSON,
// as slog's handlers write them (observe.NewLineHandler: the same bytes,
// at less cost for the access log's records).
func newLogger(s config.Settings, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil {
		return nil, fmt.Errorf("log_level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch s.LogFormat {
	case "json":
		return slog.New(observe.NewLineHandler(w, true, opts)), nil
	case "text":
		return slog.New(observe.NewLineHandler(w, false, opts)), nil
	default:
		return nil, fmt.Errorf("log_format: want text or json, got %q", s.LogFormat)
	}
}

// commandLogger is the logger of a command, newLogger's on w, which first
// warns of the BRIDGE_* variables that look like misspelt settings (they
// are not read).
func commandLogger(s config.Settings, w io.Writer) (*slog.Logger, error) {
	log, err := newLogger(s, w)
	if err != nil {
		return nil, err
	}
	for _, warning := range config.UnknownEnv(os.Environ()) {
		log.Warn("config: environment variable " + warning + " (it is not read)")
	}
	return log, nil
}
