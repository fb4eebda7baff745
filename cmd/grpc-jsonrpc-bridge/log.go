package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// newLogger writes records of s.LogLevel and above to w, as text or JSON.
func newLogger(s config.Settings, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil {
		return nil, fmt.Errorf("log_level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch s.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log_format: want text or json, got %q", s.LogFormat)
	}
}
