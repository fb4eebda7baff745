package config

import (
	"fmt"
	"net/url"
	"os"
	"path"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config/defaults"
)

// Descriptors are files describing one backend's services, for backends
// without server reflection. The zero value means discovery by reflection.
type Descriptors struct {
	// Protoset is a FileDescriptorSet file, as `protoc --descriptor_set_out
	// --include_imports` writes it. Empty means unset.
	Protoset string
	// Proto are .proto source files, each found in ImportPath (none means
	// the current directory). Empty means unset.
	Proto []string
	// ImportPath lists the directories .proto files and their imports are
	// found in. The well-known google/protobuf/*.proto are always found.
	ImportPath []string
}

// Enabled reports whether the services come from files, not reflection.
func (d Descriptors) Enabled() bool { return d.Protoset != "" || len(d.Proto) > 0 }

// OpenRPC fills the info object and servers of the OpenRPC document.
type OpenRPC struct {
	// Title, Version and Description of the API. Defaults gives
	// mapping's DefaultTitle and DefaultVersion; an empty value means them
	// too, and an empty Description means the services' comments.
	Title, Version, Description string
	// Servers are the URLs of the JSON-RPC endpoint. Empty means the
	// bridge's own address, http://<listen>/ (https with TLS).
	Servers []string
}

// Streaming are the limits of streaming calls and WebSocket connections,
// as bridge.Options takes them (package defaults declares them once, for
// both). Here a 0s ws_ping_interval or stream_keepalive turns them off.
type Streaming = defaults.Streaming

// defaultStreaming are the defaults of bridge.Options (package defaults).
func defaultStreaming() Streaming {
	return Streaming{
		MaxStreamMessages:       defaults.MaxStreamMessages,
		MaxStreamBytes:          defaults.MaxStreamBytes,
		StreamBuffer:            defaults.StreamBuffer,
		StreamBufferBytes:       defaults.StreamBufferBytes,
		WSBufferBytes:           defaults.WSBufferBytes,
		SlowClientTimeout:       defaults.SlowClientTimeout,
		MaxStreamsPerConnection: defaults.MaxStreamsPerConnection,
		MaxCallsPerConnection:   defaults.MaxCallsPerConnection,
		WSPingInterval:          defaults.WSPingInterval,
		StreamKeepalive:         defaults.StreamKeepalive,
	}
}

// validateSources checks the descriptor files, the OpenRPC servers and the
// streaming limits of s.
func (s Settings) validateSources() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	d := s.Descriptors
	if d.Protoset != "" && len(d.Proto) > 0 {
		bad("protoset", "give either protoset or proto, not both")
	}
	if d.Protoset != "" {
		if _, err := os.Stat(d.Protoset); err != nil {
			bad("protoset", "%s", readError(err))
		}
	}
	for _, dir := range d.ImportPath {
		if fi, err := os.Stat(dir); err != nil {
			bad("import_path", "%s", readError(err))
		} else if !fi.IsDir() {
			bad("import_path", "%s is not a directory", dir)
		}
	}
	if n := len(s.BackendList()); d.Enabled() && n > 1 {
		key := "proto"
		if d.Protoset != "" {
			key = "protoset"
		}
		bad(key, "descriptor files describe the services of one backend, and %d are configured", n)
	}
	for _, u := range s.OpenRPC.Servers {
		if p, err := url.Parse(u); err != nil || p.Scheme == "" || p.Host == "" {
			bad("openrpc_servers", "want an absolute URL such as https://api.example.com/, got %q", u)
		}
	}
	st := s.Streaming
	for _, c := range [...]struct {
		key string
		n   int64
	}{
		{"max_stream_messages", int64(st.MaxStreamMessages)},
		{"max_stream_bytes", st.MaxStreamBytes},
		{"stream_buffer", int64(st.StreamBuffer)},
		{"stream_buffer_bytes", st.StreamBufferBytes},
		{"ws_buffer_bytes", st.WSBufferBytes},
		{"max_streams_per_connection", int64(st.MaxStreamsPerConnection)},
		{"max_calls_per_connection", int64(st.MaxCallsPerConnection)},
	} {
		if c.n < 1 {
			bad(c.key, "must be at least 1, got %d", c.n)
		}
	}
	if st.WSMaxMessageBytes < 0 {
		bad("ws_max_message_bytes", "must be 0 (max_body_bytes) or positive, got %d", st.WSMaxMessageBytes)
	}
	if st.SlowClientTimeout <= 0 {
		bad("slow_client_timeout", "must be positive, got %s", st.SlowClientTimeout)
	}
	if st.StreamKeepalive < 0 {
		bad("stream_keepalive", "must be 0s (off) or positive, got %s", st.StreamKeepalive)
	}
	if st.StreamTimeout < 0 {
		bad("stream_timeout", "must be 0s (call_timeout) or positive, got %s", st.StreamTimeout)
	}
	if st.WSPingInterval < 0 {
		bad("ws_ping_interval", "must be 0s (off) or positive, got %s", st.WSPingInterval)
	}
	for _, p := range st.WSOriginPatterns {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			bad("ws_origin_patterns", "bad origin pattern %q", p)
		}
	}
	return errs
}
