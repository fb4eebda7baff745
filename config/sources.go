package config

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"time"

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

// Streaming are the limits of streaming calls and WebSocket connections;
// see bridge.Options for what each bounds.
type Streaming struct {
	// MaxStreamMessages bounds the messages of one streamed reply.
	MaxStreamMessages int
	// MaxStreamBytes bounds the JSON bytes of one streamed reply.
	MaxStreamBytes int64
	// WSMaxMessageBytes bounds one WebSocket frame from a client; zero
	// means MaxBodyBytes.
	WSMaxMessageBytes int64
	// StreamBuffer bounds the messages waiting in one WebSocket stream.
	StreamBuffer int
	// StreamBufferBytes bounds their bytes, each way.
	StreamBufferBytes int64
	// WSBufferBytes bounds the bytes waiting in all the streams of one
	// connection, each way.
	WSBufferBytes int64
	// SlowClientTimeout is how long a full stream buffer waits for the
	// client to read.
	SlowClientTimeout time.Duration
	// MaxStreamsPerConnection bounds the open streams of one connection.
	MaxStreamsPerConnection int
	// MaxCallsPerConnection bounds the frames of one connection being
	// answered at once.
	MaxCallsPerConnection int
	// WSPingInterval is how often idle clients are pinged; zero turns pings
	// and write timeouts off.
	WSPingInterval time.Duration
	// StreamKeepalive is how often an idle stream answered live over
	// POST / gets a keepalive; zero turns them off.
	StreamKeepalive time.Duration
	// StreamTimeout is the deadline of a stream answered live over POST /
	// whose request asks for none; zero means the call timeout.
	StreamTimeout time.Duration
	// WSOriginPatterns are the origins, besides the request's host, whose
	// pages may open WebSocket connections; empty allows none.
	WSOriginPatterns []string
}

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
