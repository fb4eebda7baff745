package unary

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Options configure a Client.
type Options struct {
	// Creds secure the connection; nil means plaintext HTTP/2 with prior
	// knowledge, as grpc-go's insecure credentials.
	Creds credentials.TransportCredentials
	// MaxRecvMsgSize bounds a response message in bytes; 0 means 4 MiB,
	// grpc-go's default.
	MaxRecvMsgSize int
	// UserAgent is sent in the user-agent header; "" means
	// "grpc-jsonrpc-bridge".
	UserAgent string
	// DialTimeout bounds connecting, the TLS handshake and the wait for
	// the backend's SETTINGS; 0 means 20 s.
	DialTimeout time.Duration
	// Logger receives connection events at debug level; nil discards them.
	Logger *slog.Logger
	// WriteTimeout bounds one write to the backend: a backend that stops
	// reading cannot hold the writing caller, and the frames queued behind
	// it, longer; the connection is then closed. 0 means 30 s.
	WriteTimeout time.Duration
}

// Reconnection backoff after a failed dial: calls made during it fail at
// once with Unavailable instead of each waiting for a dial of its own.
const (
	baseBackoff = 250 * time.Millisecond
	maxBackoff  = 3 * time.Second
)

// A Client makes unary calls to one backend over one HTTP/2 connection,
// which it opens on the first call and again after the connection is lost
// or the backend sends GOAWAY. Its methods are safe for concurrent use.
type Client struct {
	ep   endpoint
	opts Options
	wg   sync.WaitGroup // the connections' goroutines
	// dialCtx is cancelled by Close, to end a dial in progress.
	dialCtx    context.Context
	cancelDial context.CancelFunc

	mu       sync.Mutex
	cur      *conn          // the connection new calls use; nil when there is none
	conns    map[*conn]bool // every open connection, draining ones included
	dialing  chan struct{}  // closed when the dial in progress ends
	dialErr  error          // the last dial's failure, a status error
	failedAt time.Time
	backoff  time.Duration
	closed   bool
}

// New returns a Client of the backend at target, a gRPC target string
// (see parseTarget). It does not connect. A target it cannot dial by
// itself yields ErrUnsupportedTarget.
func New(target string, opts Options) (*Client, error) {
	ep, err := parseTarget(target)
	if err != nil {
		return nil, err
	}
	if opts.Creds == nil {
		opts.Creds = insecure.NewCredentials()
	}
	if opts.MaxRecvMsgSize <= 0 {
		opts.MaxRecvMsgSize = 4 << 20
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "grpc-jsonrpc-bridge"
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 20 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{ep: ep, opts: opts, conns: map[*conn]bool{}}
	c.dialCtx, c.cancelDial = context.WithCancel(context.Background())
	return c, nil
}

// Close closes the client's connections, failing the calls in progress
// with Unavailable, and waits for their goroutines. Later calls fail too.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := make([]*conn, 0, len(c.conns))
	for cn := range c.conns {
		conns = append(conns, cn)
	}
	c.mu.Unlock()
	c.cancelDial()
	for _, cn := range conns {
		cn.nc.Close()
	}
	c.wg.Wait()
	return nil
}

var errClosed = status.Error(codes.Unavailable, "transport: the client is closed")

// ready returns the connection new calls use, dialing one if needed. Its
// error is a status error.
func (c *Client) ready(ctx context.Context) (*conn, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, errClosed
		case c.cur != nil && !c.cur.draining.Load():
			cn := c.cur
			c.mu.Unlock()
			return cn, nil
		case c.dialing == nil && c.dialErr != nil && time.Since(c.failedAt) < c.backoff:
			err := c.dialErr
			c.mu.Unlock()
			return nil, err
		case c.dialing == nil:
			c.dialing = make(chan struct{})
			c.wg.Go(c.dial)
		}
		ch := c.dialing
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, contextStatus(ctx)
		}
		c.mu.Lock()
		err := c.dialErr
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// dial opens a connection and makes it the current one, or records why it
// could not.
func (c *Client) dial() {
	ctx, cancel := context.WithTimeout(c.dialCtx, c.opts.DialTimeout)
	defer cancel()
	cn, err := c.connect(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.dialing)
	c.dialing = nil
	if err == nil && c.closed {
		cn.nc.Close()
		err = errClosed
	}
	if err != nil {
		c.opts.Logger.Debug("cannot connect to the backend", "address", c.ep.address, "error", err)
		c.dialErr = status.Error(codes.Unavailable, "transport: cannot connect to the backend: "+err.Error())
		c.failedAt = time.Now()
		c.backoff = min(max(c.backoff*8/5, baseBackoff), maxBackoff)
		return
	}
	c.dialErr, c.backoff = nil, 0
	c.cur = cn
}

// connect dials, secures the connection, exchanges prefaces and waits for
// the backend's first SETTINGS.
func (c *Client) connect(ctx context.Context) (*conn, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, c.ep.network, c.ep.address)
	if err != nil {
		return nil, err
	}
	nc, _, err := c.opts.Creds.ClientHandshake(ctx, c.ep.authority, raw)
	if err != nil {
		raw.Close()
		return nil, err
	}
	scheme := "http"
	if c.opts.Creds.Info().SecurityProtocol != "insecure" {
		scheme = "https"
	}
	cn := newConn(c, nc, scheme)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, errClosed
	}
	c.conns[cn] = true
	c.mu.Unlock()
	c.wg.Go(cn.readLoop)
	c.wg.Go(cn.controlLoop)
	if err := cn.start(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return cn, nil
}

// forget drops cn once it is closed.
func (c *Client) forget(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.conns, cn)
	if c.cur == cn {
		c.cur = nil
		c.connectLocked()
	}
}

// retire makes new calls open another connection than cn.
func (c *Client) retire(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == cn {
		c.cur = nil
		c.connectLocked()
	}
}

// Connect starts opening a connection in the background, unless there is
// one, a dial is under way or the last one failed too recently, so that
// the next call need not wait for it. The client does the same by itself
// when it loses its connection or the backend sends GOAWAY.
func (c *Client) Connect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.connectLocked()
}

func (c *Client) connectLocked() {
	switch {
	case c.closed, c.dialing != nil, c.cur != nil && !c.cur.draining.Load():
	case c.dialErr != nil && time.Since(c.failedAt) < c.backoff:
	default:
		c.dialing = make(chan struct{})
		c.wg.Go(c.dial)
	}
}

// contextStatus is the status of a call whose context is done.
func contextStatus(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	}
	return status.Error(codes.Canceled, "context canceled")
}
