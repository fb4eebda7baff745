package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // grpc-go's client health checking (healthCheckConfig)
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	grpcstats "google.golang.org/grpc/stats"

	_ "google.golang.org/grpc/balancer/leastrequest" // least_request_experimental

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// A Conn is the connection to one backend, over all the addresses its
// target resolves to. Its unary calls go through the bridge's own HTTP/2
// client when it has the direct path (one connection per address, whose
// writer writes the frames of concurrent calls together, and a batch's
// calls in one write per connection), through grpc-go otherwise. Other
// streaming calls, reflection and the connection's state stay with the
// *grpc.ClientConn it embeds, whose balancer spreads them over the same
// addresses by the same policy.
type Conn struct {
	*grpc.ClientConn
	pool    *pool
	direct  bool
	stop    context.CancelFunc // ends watch
	watched chan struct{}      // closed when watch has returned
}

// DirectConn is the Conn of NewDirectConn.
type DirectConn = Conn

// Options configure Dial.
type Options struct {
	// Name names the backend in logs and metrics; "" means the target.
	Name string
	// Balance is LeastRequest (the default, for ""), RoundRobin or
	// PickFirst.
	Balance string
	// ResolveInterval is how often a DNS target is resolved again; 0
	// resolves it again only when a connection fails or drains.
	ResolveInterval time.Duration
	// HealthCheck watches grpc.health.v1.Health/Watch for HealthService
	// on each address: only SERVING addresses take calls.
	HealthCheck   bool
	HealthService string
	// Direct gives the Conn the direct path for unary calls, when the
	// target allows it (see ErrUnsupportedTarget).
	Direct bool
	// DialOptions are grpc-go's, for the ClientConn, after the bridge's.
	DialOptions []grpc.DialOption
	DirectOptions
}

// DirectOptions configure the direct path.
type DirectOptions struct {
	// Creds secure the connections, both paths'; nil means plaintext.
	Creds credentials.TransportCredentials
	// MaxRecvMsgSize bounds a response message; 0 means 4 MiB, as
	// grpc-go's default.
	MaxRecvMsgSize int
	// Logger receives connection events at debug level, and the changes
	// of the addresses at info; nil discards them.
	Logger *slog.Logger
	// KeepaliveTime, KeepaliveTimeout and KeepalivePermitWithoutStream
	// are grpc-go's keepalive.ClientParameters; a zero KeepaliveTime
	// turns keepalive off.
	KeepaliveTime                time.Duration
	KeepaliveTimeout             time.Duration
	KeepalivePermitWithoutStream bool
}

// ErrUnsupportedTarget is what a target the direct path cannot dial by
// itself (a resolver scheme other than dns, passthrough, unix, ipv4 and
// ipv6) yields: such a backend is called through grpc-go alone.
var ErrUnsupportedTarget = unary.ErrUnsupportedTarget

// ErrBalance is the error of Dial for an unknown Options.Balance.
var ErrBalance = errors.New("backend: unknown balance policy")

// reconnect makes a backend's return noticed within a few seconds however
// long it was down (gRPC's default backoff grows to two minutes).
var reconnect = grpc.ConnectParams{
	Backoff:           grpcbackoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// Dial returns the Conn of the backend at target. It resolves the target
// once before it returns (a failure leaves the set empty, to be resolved
// again in the background), and keeps its addresses up to date until
// Close.
func Dial(targetStr string, opts Options) (*Conn, error) {
	switch opts.Balance {
	case "":
		opts.Balance = LeastRequest
	case LeastRequest, RoundRobin, PickFirst:
	default:
		return nil, fmt.Errorf("%w %q: want one of %v", ErrBalance, opts.Balance, Balances())
	}
	t, err := parseTarget(targetStr)
	if err != nil {
		return nil, err
	}
	creds := opts.Creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := opts.Name
	if name == "" {
		name = targetStr
	}
	direct := opts.Direct
	if direct && t.kind == opaque {
		if _, err := unary.New(targetStr, unary.Options{}); errors.Is(err, unary.ErrUnsupportedTarget) {
			log.Info("unary calls go through grpc-go: the address needs its name resolution", "backend", name)
			direct = false
		}
	}
	//lint:ignore SA1019 deprecated for grpc.WithAuthority, but still what grpc-go's channel uses
	serverName := creds.Info().ServerName
	po := poolOptions{Balance: opts.Balance, ResolveInterval: opts.ResolveInterval, HealthCheck: opts.HealthCheck,
		HealthService: opts.HealthService, Direct: direct, Unary: unaryOptions(opts.DirectOptions, creds)}
	if opts.HealthCheck {
		po.Health = func(addr string) (*grpc.ClientConn, error) {
			hopts := []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithConnectParams(reconnect)}
			if serverName == "" {
				hopts = append(hopts, grpc.WithAuthority(t.authority))
			}
			return grpc.NewClient("passthrough:///"+addr, hopts...)
		}
	}
	p := newPool(name, t, po, log)
	dopts := append(DialOptions(), grpc.WithTransportCredentials(creds), grpc.WithConnectParams(reconnect),
		grpc.WithDefaultServiceConfig(serviceConfig(opts.Balance, opts.HealthCheck, opts.HealthService)),
		grpc.WithStatsHandler(addressStats{p}))
	grpcTarget := targetStr
	if t.kind != opaque {
		p.manual = manual.NewBuilderWithScheme("bridge-backend")
		p.manual.ResolveNowCallback = func(resolver.ResolveNowOptions) { p.refresh() }
		grpcTarget = "bridge-backend:///" + t.authority
		dopts = append(dopts, grpc.WithResolvers(p.manual))
		if serverName == "" {
			dopts = append(dopts, grpc.WithAuthority(t.authority))
		}
	}
	p.start()
	cc, err := grpc.NewClient(grpcTarget, append(dopts, opts.DialOptions...)...)
	if err != nil {
		p.close()
		return nil, err
	}
	return newConn(cc, p, direct), nil
}

// NewDirectConn returns cc, a connection to target made by the caller,
// with the direct path for unary calls to target's addresses, balanced
// by least_request.
func NewDirectConn(cc *grpc.ClientConn, targetStr string, opts DirectOptions) (*Conn, error) {
	t, err := parseTarget(targetStr)
	if err != nil {
		return nil, err
	}
	if t.kind == opaque {
		if _, err := unary.New(targetStr, unary.Options{}); err != nil {
			return nil, err
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	creds := opts.Creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	p := newPool(targetStr, t, poolOptions{Direct: true, Unary: unaryOptions(opts, creds), ResolveInterval: 30 * time.Second}, log)
	p.start()
	return newConn(cc, p, true), nil
}

func unaryOptions(o DirectOptions, creds credentials.TransportCredentials) unary.Options {
	return unary.Options{Creds: creds, MaxRecvMsgSize: o.MaxRecvMsgSize, Logger: o.Logger,
		KeepaliveTime: o.KeepaliveTime, KeepaliveTimeout: o.KeepaliveTimeout, KeepalivePermitWithoutStream: o.KeepalivePermitWithoutStream}
}

// serviceConfig is grpc-go's service config of a backend: its balancer,
// and its client health checking.
func serviceConfig(balance string, health bool, service string) string {
	lb := `{"pick_first":{}}`
	switch balance {
	case LeastRequest:
		lb = `{"least_request_experimental":{"choiceCount":2}}`
	case RoundRobin:
		lb = `{"round_robin":{}}`
	}
	sc := `{"loadBalancingConfig":[` + lb + `]`
	if health {
		sc += `,"healthCheckConfig":{"serviceName":` + strconv.Quote(service) + `}`
	}
	return sc + "}"
}

func newConn(cc *grpc.ClientConn, p *pool, direct bool) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	d := &Conn{ClientConn: cc, pool: p, direct: direct, stop: cancel, watched: make(chan struct{})}
	go d.watch(ctx)
	return d
}

// watch ends the direct clients' backoff whenever grpc-go's connection to
// the same backend becomes ready: after a long outage the direct path
// backs off longer than grpc-go's (whose backoff the bridge caps at a few
// seconds), and must not keep failing calls once the backend is back.
// (With several addresses, grpc-go's connection to each address ends the
// backoff of that address alone: see addressStats.)
func (d *Conn) watch(ctx context.Context) {
	defer close(d.watched)
	for {
		s := d.ClientConn.GetState()
		if s == connectivity.Ready {
			for _, a := range d.pool.all() {
				if a.client != nil && a.client.State() == unary.Down {
					a.client.ResetBackoff()
				}
			}
		}
		if !d.ClientConn.WaitForStateChange(ctx, s) {
			return
		}
	}
}

// Close closes both paths.
func (d *Conn) Close() error {
	d.stop()
	<-d.watched
	d.pool.close()
	return d.ClientConn.Close()
}

// addressStats is the stats handler of a Conn's ClientConn: it counts the
// calls grpc-go sends to each address, and its connections to each.
type addressStats struct{ p *pool }

type addressKey struct{}

func (h addressStats) TagConn(ctx context.Context, info *grpcstats.ConnTagInfo) context.Context {
	if a := h.p.lookup(addrPort(info.RemoteAddr)); a != nil {
		return context.WithValue(ctx, addressKey{}, a)
	}
	return ctx
}

func (h addressStats) HandleConn(ctx context.Context, s grpcstats.ConnStats) {
	a, _ := ctx.Value(addressKey{}).(*address)
	if a == nil {
		return
	}
	switch s.(type) {
	case *grpcstats.ConnBegin:
		a.grpcConns.Add(1)
		if a.client != nil && a.client.State() == unary.Down {
			a.client.ResetBackoff() // the address is back
			a.client.Connect()
		}
	case *grpcstats.ConnEnd:
		a.grpcConns.Add(-1)
	}
}

func (addressStats) TagRPC(ctx context.Context, _ *grpcstats.RPCTagInfo) context.Context { return ctx }

func (h addressStats) HandleRPC(ctx context.Context, s grpcstats.RPCStats) {
	switch s := s.(type) {
	case *grpcstats.OutHeader:
		a := h.p.lookup(addrPort(s.RemoteAddr))
		if a == nil {
			return
		}
		a.calls.Add(1)
		if o, _ := ctx.Value(originKey{}).(*Origin); o != nil {
			a.grpcInFlight.Add(1)
			if was := o.addr.Swap(a); was != nil { // an attempt before this one
				was.grpcInFlight.Add(-1)
			}
		}
	case *grpcstats.End:
		if o, _ := ctx.Value(originKey{}).(*Origin); o != nil {
			if a := o.addr.Swap(nil); a != nil {
				a.grpcInFlight.Add(-1)
			}
		}
	}
}

func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}
