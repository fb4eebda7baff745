package config

import (
	"errors"
	"os"
	"path/filepath"
	goreflect "reflect"
	"strings"
	"testing"
	"time"
)

// withStreamingDefaults gives s, built from a literal, the default
// streaming limits.
func (s Settings) withStreamingDefaults() Settings {
	s.Streaming = Defaults().Streaming
	return s
}

func (s Settings) withOpenRPCDefaults() Settings {
	s.OpenRPC = Defaults().OpenRPC
	return s
}

func TestLoadSources(t *testing.T) {
	dir := t.TempDir()
	protoset := filepath.Join(dir, "api.protoset")
	if err := os.WriteFile(protoset, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want func(*Settings)
	}{
		{
			name: "protoset and OpenRPC info by flags",
			args: []string{"--protoset", protoset, "--openrpc-title", "Notes API", "--openrpc-version", "1.2.3",
				"--openrpc-description", "All the notes.", "--openrpc-servers", "https://a.example/,https://b.example/rpc"},
			want: func(s *Settings) {
				s.Descriptors.Protoset = protoset
				s.OpenRPC = OpenRPC{Title: "Notes API", Version: "1.2.3", Description: "All the notes.",
					Servers: []string{"https://a.example/", "https://b.example/rpc"}}
			},
		},
		{
			name: "proto files with -I and --import-path",
			args: []string{"--proto", "a.proto", "--proto", "b/c.proto", "-I", dir, "--import-path", "."},
			want: func(s *Settings) {
				s.Descriptors.Proto = []string{"a.proto", "b/c.proto"}
				s.Descriptors.ImportPath = []string{dir, "."}
			},
		},
		{
			name: "proto files by env",
			env:  map[string]string{"BRIDGE_PROTO": "a.proto, b.proto", "BRIDGE_IMPORT_PATH": dir},
			want: func(s *Settings) {
				s.Descriptors.Proto = []string{"a.proto", "b.proto"}
				s.Descriptors.ImportPath = []string{dir}
			},
		},
		{
			name: "streaming limits by file",
			args: []string{"--config", "$FILE"},
			file: "max_stream_messages: 5\nmax_stream_bytes: 1000\nws_max_message_bytes: 2000\nstream_buffer: 3\n" +
				"stream_buffer_bytes: 4096\nws_buffer_bytes: 8192\n" +
				"slow_client_timeout: 1s\nmax_streams_per_connection: 7\nmax_calls_per_connection: 8\n" +
				"ws_ping_interval: 0s\nws_origin_patterns: [\"*.example.com\", app.example.org]\n" +
				"stream_keepalive: 0s\nstream_timeout: 1h\n",
			want: func(s *Settings) {
				s.Streaming = Streaming{MaxStreamMessages: 5, MaxStreamBytes: 1000, WSMaxMessageBytes: 2000,
					StreamBuffer: 3, StreamBufferBytes: 4096, WSBufferBytes: 8192, SlowClientTimeout: time.Second, MaxStreamsPerConnection: 7,
					MaxCallsPerConnection: 8, WSOriginPatterns: []string{"*.example.com", "app.example.org"}, StreamTimeout: time.Hour}
			},
		},
		{
			name: "streaming limits by env",
			env: map[string]string{"BRIDGE_WS_PING_INTERVAL": "5s", "BRIDGE_WS_ORIGIN_PATTERNS": "a.example,b.example",
				"BRIDGE_STREAM_KEEPALIVE": "1m", "BRIDGE_STREAM_TIMEOUT": "10m"},
			want: func(s *Settings) {
				s.Streaming.WSPingInterval = 5 * time.Second
				s.Streaming.StreamKeepalive = time.Minute
				s.Streaming.StreamTimeout = 10 * time.Minute
				s.Streaming.WSOriginPatterns = []string{"a.example", "b.example"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := load(t, tt.args, tt.env, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			tt.want(&want)
			if !goreflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestLoadSourcesErrors(t *testing.T) {
	dir := t.TempDir()
	protoset := filepath.Join(dir, "api.protoset")
	if err := os.WriteFile(protoset, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		file    string
		wantKey string
		want    string // in the message
	}{
		{name: "protoset and proto", args: []string{"--protoset", protoset, "--proto", "a.proto"}, wantKey: "protoset", want: "not both"},
		{name: "missing protoset", args: []string{"--protoset", filepath.Join(dir, "none.protoset")}, wantKey: "protoset", want: "none.protoset"},
		{name: "import path not a directory", args: []string{"-I", protoset}, wantKey: "import_path", want: "not a directory"},
		{name: "protoset with two backends", args: []string{"--config", "$FILE", "--protoset", protoset},
			file:    "backends:\n  - {name: a, address: a:1, plaintext: true}\n  - {name: b, address: b:1, plaintext: true}\n",
			wantKey: "protoset", want: "one backend"},
		{name: "relative server", args: []string{"--openrpc-servers", "/rpc"}, wantKey: "openrpc_servers", want: "absolute URL"},
		{name: "zero stream messages", args: []string{"--max-stream-messages", "0"}, wantKey: "max_stream_messages", want: "at least 1"},
		{name: "zero stream bytes", env: map[string]string{"BRIDGE_MAX_STREAM_BYTES": "0"}, wantKey: "max_stream_bytes", want: "at least 1"},
		{name: "negative ws message", args: []string{"--ws-max-message-bytes", "-1"}, wantKey: "ws_max_message_bytes", want: "positive"},
		{name: "zero stream buffer", args: []string{"--config", "$FILE"}, file: "stream_buffer: 0\n", wantKey: "stream_buffer", want: "at least 1"},
		{name: "zero slow client timeout", args: []string{"--slow-client-timeout", "0s"}, wantKey: "slow_client_timeout", want: "positive"},
		{name: "zero streams", args: []string{"--max-streams-per-connection", "0"}, wantKey: "max_streams_per_connection", want: "at least 1"},
		{name: "zero calls", args: []string{"--max-calls-per-connection", "0"}, wantKey: "max_calls_per_connection", want: "at least 1"},
		{name: "negative ping", args: []string{"--ws-ping-interval", "-1s"}, wantKey: "ws_ping_interval", want: "0s (off)"},
		{name: "negative keepalive", args: []string{"--stream-keepalive", "-1s"}, wantKey: "stream_keepalive", want: "0s (off)"},
		{name: "negative stream timeout", env: map[string]string{"BRIDGE_STREAM_TIMEOUT": "-1m"}, wantKey: "stream_timeout", want: "0s (call_timeout)"},
		{name: "bad origin pattern", args: []string{"--ws-origin-patterns", "[a"}, wantKey: "ws_origin_patterns", want: `"[a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := load(t, tt.args, tt.env, tt.file)
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
