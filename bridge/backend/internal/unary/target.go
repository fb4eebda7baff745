package unary

import (
	"errors"
	"net"
	"strings"
)

// ErrUnsupportedTarget is returned by New for a target that needs more of
// gRPC's name resolution than dialing one address (a custom resolver, a
// DNS server of its own, a list of addresses). Such backends are called
// through grpc-go.
var ErrUnsupportedTarget = errors.New("unary: target needs grpc-go's name resolution")

// endpoint is where a target dials, and the :authority its calls carry.
type endpoint struct {
	network, address, authority string
}

// parseTarget reads a gRPC target string as grpc-go does for the schemes
// that name a single endpoint: "host:port" (and a bare host, port 443),
// "dns:///host:port", "passthrough:///addr", "unix:path", "unix:///path",
// "unix-abstract:name", "ipv4:addr:port" and "ipv6:[addr]:port".
func parseTarget(target string) (endpoint, error) {
	scheme, rest, ok := strings.Cut(target, ":")
	if !ok {
		return tcpEndpoint(target)
	}
	switch scheme {
	case "unix":
		path := strings.TrimPrefix(rest, "//")
		if path == "" || strings.HasPrefix(rest, "//") && !strings.HasPrefix(path, "/") {
			return endpoint{}, ErrUnsupportedTarget // unix://authority/path
		}
		return endpoint{network: "unix", address: path, authority: "localhost"}, nil
	case "unix-abstract":
		name := strings.TrimPrefix(rest, "//")
		if name == "" {
			return endpoint{}, ErrUnsupportedTarget
		}
		return endpoint{network: "unix", address: "@" + strings.TrimPrefix(name, "/"), authority: "localhost"}, nil
	case "dns", "passthrough":
		if !strings.HasPrefix(rest, "///") {
			return endpoint{}, ErrUnsupportedTarget // dns://server/host: a DNS server of its own
		}
		return tcpEndpoint(rest[3:])
	case "ipv4", "ipv6":
		if strings.Contains(rest, ",") {
			return endpoint{}, ErrUnsupportedTarget
		}
		return tcpEndpoint(rest)
	}
	if strings.Contains(target, "://") {
		return endpoint{}, ErrUnsupportedTarget // a scheme grpc-go resolves with a registered resolver
	}
	return tcpEndpoint(target) // "localhost:50051": no scheme at all
}

func tcpEndpoint(hostport string) (endpoint, error) {
	if hostport == "" || strings.ContainsAny(hostport, "/,") {
		return endpoint{}, ErrUnsupportedTarget
	}
	addr := hostport
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		addr = net.JoinHostPort(strings.Trim(hostport, "[]"), "443") // grpc-go's default port
	}
	return endpoint{network: "tcp", address: addr, authority: hostport}, nil
}
