package backend

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // grpc-go's client health checking, for opaque targets (healthCheckConfig)
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// A Conn is the connection to one backend, over all the addresses its
// target resolves to, balanced by one picker for both call paths (the
// pool). Its unary calls go through the bridge's own HTTP/2 client when
// it has the direct path (one connection per address, whose writer writes
// the frames of concurrent calls together, and a batch's calls in one
// write per connection), through grpc-go otherwise. Other streaming
// calls, reflection and the connection's state stay with the
// *grpc.ClientConn it embeds, whose balancer is the same pool.
type Conn struct {
	*grpc.ClientConn
	pool   *pool
	direct bool
}

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
	// Outlier configures outlier detection; nil means DefaultOutlier().
	Outlier *Outlier
	// StallAfter is the least time an address whose unary calls wait for
	// their answers may go without answering any before the picker passes
	// it over, when the backend's recent latency does not make it longer;
	// 0 means 50 ms.
	StallAfter time.Duration
	// Direct gives the Conn the direct path for unary calls, when the
	// target allows it (not an opaque one, see parseTarget).
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
	outlier := DefaultOutlier()
	if opts.Outlier != nil {
		outlier = *opts.Outlier
	}
	if err := outlier.check(); err != nil {
		return nil, err
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
		log.Info("unary calls go through grpc-go: the address needs its name resolution", "backend", name)
		direct = false
	}
	//lint:ignore SA1019 deprecated for grpc.WithAuthority, but still what grpc-go's channel uses
	serverName := creds.Info().ServerName
	p := newPool(name, t, poolOptions{Balance: opts.Balance, ResolveInterval: opts.ResolveInterval, HealthCheck: opts.HealthCheck,
		HealthService: opts.HealthService, Direct: direct, Unary: unaryOptions(opts.DirectOptions, creds),
		Outlier: outlier, StallAfter: opts.StallAfter}, log)
	// grpc-go's channel never goes idle: it would close the balancer,
	// and with it the health watches the direct path relies on.
	dopts := append(DialOptions(), grpc.WithTransportCredentials(creds), grpc.WithConnectParams(reconnect), grpc.WithIdleTimeout(0))
	grpcTarget := targetStr
	if t.kind != opaque {
		p.manual = manual.NewBuilderWithScheme("bridge-backend")
		p.manual.ResolveNowCallback = func(resolver.ResolveNowOptions) { p.refresh() }
		grpcTarget = "bridge-backend:///" + t.authority
		dopts = append(dopts, grpc.WithResolvers(p.manual), grpc.WithDefaultServiceConfig(serviceConfig))
		if serverName == "" {
			dopts = append(dopts, grpc.WithAuthority(t.authority))
		}
	} else if opts.HealthCheck {
		// grpc-go alone resolves and balances the target (pick_first):
		// its client health checking watches the address.
		dopts = append(dopts, grpc.WithDefaultServiceConfig(`{"healthCheckConfig":{"serviceName":`+strconv.Quote(opts.HealthService)+`}}`))
	}
	p.start()
	cc, err := grpc.NewClient(grpcTarget, append(dopts, opts.DialOptions...)...)
	if err != nil {
		p.close()
		return nil, err
	}
	cc.Connect() // the balancer, its connections and health watches, now
	return &Conn{ClientConn: cc, pool: p, direct: direct}, nil
}

func unaryOptions(o DirectOptions, creds credentials.TransportCredentials) unary.Options {
	return unary.Options{Creds: creds, MaxRecvMsgSize: o.MaxRecvMsgSize, Logger: o.Logger,
		KeepaliveTime: o.KeepaliveTime, KeepaliveTimeout: o.KeepaliveTimeout, KeepalivePermitWithoutStream: o.KeepalivePermitWithoutStream}
}

// Close closes both paths.
func (d *Conn) Close() error {
	err := d.ClientConn.Close()
	d.pool.close()
	return err
}
