package backend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// A target is a backend's address as the bridge resolves it itself.
type target struct {
	kind targetKind
	// host and port, for a named target: what DNS resolves.
	host, port string
	// server is the DNS server of dns://SERVER/name targets, HOST:PORT;
	// empty means the system's resolver.
	server string
	// fixed are the addresses of a fixed target, HOST:PORT.
	fixed []string
	// authority is the :authority of calls (unless the TLS server name
	// says otherwise): the target's host:port, as grpc-go takes it.
	authority string
}

type targetKind uint8

const (
	// opaque targets are left to grpc-go's name resolution and balancing
	// (schemes of registered resolvers, such as xds:///): one address, the
	// target itself, called through grpc-go alone.
	opaque targetKind = iota
	// fixed targets list their addresses: ipv4:, ipv6:, IP literals, and
	// the one address of unix:, unix-abstract: and passthrough:///.
	fixed
	// named targets are DNS names: every A and AAAA record is an address.
	named
)

// defaultPort is grpc-go's, for a target without one.
const defaultPort = "443"

// unixPrefix begins the addresses of Unix sockets ("unix:/run/x.sock",
// "unix:@abstract"), as grpc-go's dialer reads them too.
const unixPrefix = "unix:"

// parseTarget reads a gRPC target string: "host:port" and "dns:///host:port"
// (every A and AAAA record of host), "dns://SERVER:PORT/host:port" (asking
// that DNS server), "ipv4:a:p,b:p" and "ipv6:[a]:p,[b]:p" (fixed lists),
// IP literals, "unix:PATH", "unix:///PATH", "unix-abstract:NAME" and
// "passthrough:///ADDR" (one address, dialed as it is); anything else with
// a scheme ("xds:///users", "unix://host/path") is opaque.
func parseTarget(s string) (target, error) {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok {
		return hostTarget(s, "")
	}
	switch scheme {
	case "dns":
		if !strings.HasPrefix(rest, "//") {
			return hostTarget(rest, "")
		}
		server, hostport, ok := strings.Cut(rest[2:], "/")
		if !ok {
			return target{}, fmt.Errorf("backend: target %q: want dns://[SERVER]/HOST:PORT", s)
		}
		if server != "" {
			if _, _, err := net.SplitHostPort(server); err != nil {
				server = net.JoinHostPort(strings.Trim(server, "[]"), "53")
			}
		}
		return hostTarget(hostport, server)
	case "ipv4", "ipv6":
		return listTarget(s, rest)
	case "unix":
		path := rest
		if strings.HasPrefix(rest, "//") {
			path = rest[2:]
			if !strings.HasPrefix(path, "/") {
				return opaqueTarget(s), nil // unix://authority/path: grpc-go's to read
			}
		}
		if path == "" {
			return target{}, fmt.Errorf("backend: target %q: want unix:PATH", s)
		}
		return target{kind: fixed, fixed: []string{unixPrefix + path}, authority: "localhost"}, nil
	case "unix-abstract":
		name := strings.TrimPrefix(strings.TrimPrefix(rest, "//"), "/")
		if name == "" {
			return target{}, fmt.Errorf("backend: target %q: want unix-abstract:NAME", s)
		}
		return target{kind: fixed, fixed: []string{unixPrefix + "@" + name}, authority: "localhost"}, nil
	case "passthrough":
		addr, ok := strings.CutPrefix(rest, "///")
		if !ok {
			return opaqueTarget(s), nil // passthrough://authority/addr: grpc-go's to read
		}
		if addr == "" || strings.ContainsAny(addr, "/,") {
			return target{}, fmt.Errorf("backend: target %q: want passthrough:///HOST:PORT", s)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			addr = net.JoinHostPort(strings.Trim(addr, "[]"), defaultPort)
		}
		return target{kind: fixed, fixed: []string{addr}, authority: rest[3:]}, nil
	}
	if strings.Contains(s, "://") {
		return opaqueTarget(s), nil
	}
	return hostTarget(s, "") // "localhost:50051": no scheme at all
}

func opaqueTarget(s string) target {
	return target{kind: opaque, fixed: []string{s}, authority: s}
}

// dialAddress is the network and address the direct client dials for an
// address of a target's set.
func dialAddress(a string) (network, address string) {
	if path, ok := strings.CutPrefix(a, unixPrefix); ok {
		return "unix", path
	}
	return "tcp", a
}

// CheckTarget reports why the bridge cannot read target, or nil.
func CheckTarget(target string) error {
	_, err := parseTarget(target)
	return err
}

// hostTarget is the target of HOST[:PORT], resolved by server when not
// an IP literal.
func hostTarget(hostport, server string) (target, error) {
	if hostport == "" || strings.ContainsAny(hostport, "/,") {
		return target{}, fmt.Errorf("backend: target %q: want HOST:PORT", hostport)
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.Trim(hostport, "[]"), defaultPort
	}
	if host == "" {
		return target{}, fmt.Errorf("backend: target %q: no host", hostport)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return target{kind: fixed, fixed: []string{netip.AddrPortFrom(ip.Unmap(), portNumber(port)).String()}, authority: hostport}, nil
	}
	return target{kind: named, host: host, port: port, server: server, authority: hostport}, nil
}

// listTarget reads the addresses of "ipv4:a[:p],b[:p]" or
// "ipv6:a,[a]:p", whose port is 443 when missing.
func listTarget(s, list string) (target, error) {
	t := target{kind: fixed}
	for item := range strings.SplitSeq(list, ",") {
		host, port, err := net.SplitHostPort(item)
		if err != nil {
			host, port = strings.Trim(item, "[]"), defaultPort
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || portNumber(port) == 0 && port != "0" {
			return target{}, fmt.Errorf("backend: target %q: %q is no IP address and port", s, item)
		}
		t.fixed = append(t.fixed, netip.AddrPortFrom(ip.Unmap(), portNumber(port)).String())
	}
	slices.Sort(t.fixed)
	t.fixed = slices.Compact(t.fixed)
	t.authority = t.fixed[0]
	return t, nil
}

func portNumber(p string) uint16 {
	var n uint16
	for _, c := range []byte(p) {
		if c < '0' || c > '9' || n > 6553 || n == 6553 && c > '5' {
			return 0
		}
		n = n*10 + uint16(c-'0')
	}
	return n
}

// errNoAddresses is a resolution that found no address.
var errNoAddresses = errors.New("no A or AAAA record")

// resolveTimeout bounds one resolution.
const resolveTimeout = 10 * time.Second

// resolve returns the addresses of t, sorted (IPv4 first), without
// duplicates.
func (t target) resolve(ctx context.Context, r *net.Resolver) ([]string, error) {
	if t.kind != named {
		return t.fixed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ips, err := r.LookupNetIP(ctx, "ip", t.host)
	if err != nil {
		return nil, err
	}
	for i, ip := range ips {
		ips[i] = ip.Unmap()
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	if len(ips) == 0 {
		return nil, errNoAddresses
	}
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = net.JoinHostPort(ip.String(), t.port)
	}
	return out, nil
}

// resolver is the DNS resolver of t: its own server's, or the system's.
func (t target) resolver() *net.Resolver {
	if t.server == "" {
		return net.DefaultResolver
	}
	server := t.server
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// String is the target as logs name it.
func (t target) String() string {
	return cmp.Or(t.authority, strings.Join(t.fixed, ","))
}
