package main

import (
	"fmt"
	"io"
	"log/slog"

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
