package backend

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// A DirectConn is a backend connection whose unary calls go through the
// bridge's own HTTP/2 client instead of grpc-go's: one writer per
// connection writes the frames of concurrent calls together, and a
// batch's calls leave in one write. Server-streaming calls answered in one reply take
// it too. Other streaming calls, reflection and the connection's state
// stay with the *grpc.ClientConn it embeds, which must have been created
// for the same target.
type DirectConn struct {
	*grpc.ClientConn
	client  *unary.Client
	stop    context.CancelFunc // ends watch
	watched chan struct{}      // closed when watch has returned
}

// DirectOptions configure the direct path of a DirectConn.
type DirectOptions struct {
	// Creds secure the connection, as the ClientConn's; nil means
	// plaintext.
	Creds credentials.TransportCredentials
	// MaxRecvMsgSize bounds a response message; 0 means 4 MiB, as
	// grpc-go's default.
	MaxRecvMsgSize int
	// Logger receives connection events at debug level; nil discards them.
	Logger *slog.Logger
	// KeepaliveTime, KeepaliveTimeout and KeepalivePermitWithoutStream
	// are grpc-go's keepalive.ClientParameters; a zero KeepaliveTime
	// turns keepalive off.
	KeepaliveTime                time.Duration
	KeepaliveTimeout             time.Duration
	KeepalivePermitWithoutStream bool
}

// ErrUnsupportedTarget is returned by NewDirectConn for a target that
// needs grpc-go's name resolution (a resolver scheme other than dns,
// passthrough, unix, ipv4 and ipv6, or several addresses); such a backend
// is called through grpc-go alone.
var ErrUnsupportedTarget = unary.ErrUnsupportedTarget

// NewDirectConn returns cc with a direct path for unary calls to target.
func NewDirectConn(cc *grpc.ClientConn, target string, opts DirectOptions) (*DirectConn, error) {
	c, err := unary.New(target, unary.Options{Creds: opts.Creds, MaxRecvMsgSize: opts.MaxRecvMsgSize, Logger: opts.Logger,
		KeepaliveTime: opts.KeepaliveTime, KeepaliveTimeout: opts.KeepaliveTimeout, KeepalivePermitWithoutStream: opts.KeepalivePermitWithoutStream})
	if err != nil {
		return nil, err
	}
	c.Connect() // so that the first call does not wait for a dial
	ctx, cancel := context.WithCancel(context.Background())
	d := &DirectConn{ClientConn: cc, client: c, stop: cancel, watched: make(chan struct{})}
	go d.watch(ctx)
	return d, nil
}

// watch ends the direct client's backoff whenever grpc-go's connection to
// the same backend becomes ready: after a long outage the direct path
// backs off longer than grpc-go's (whose backoff the bridge caps at a
// few seconds), and must not keep failing calls once the backend is back.
func (d *DirectConn) watch(ctx context.Context) {
	defer close(d.watched)
	for {
		s := d.ClientConn.GetState()
		if s == connectivity.Ready {
			d.client.ResetBackoff()
		}
		if !d.ClientConn.WaitForStateChange(ctx, s) {
			return
		}
	}
}

// Close closes both paths.
func (d *DirectConn) Close() error {
	d.stop()
	<-d.watched
	d.client.Close()
	return d.ClientConn.Close()
}
