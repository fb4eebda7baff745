package unary

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
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
	// reading cannot hold the connection's writer longer; the connection
	// is then closed. Calls never wait for a write: each ends by its own
	// deadline. 0 means 30 s.
	WriteTimeout time.Duration
	// Authority is the :authority of every call; "" means the server name
	// of Creds when it has one (as grpc-go), else the target's host:port.
	Authority string
	// KeepaliveTime, when not 0, makes the client PING the backend after
	// this long without reading anything from it; KeepaliveTimeout (0
	// means 20 s) later, with still nothing read, the connection is closed
	// and its calls fail with Unavailable. Without
	// KeepalivePermitWithoutStream it pings only while calls are in
	// flight. These are grpc-go's keepalive.ClientParameters. As in
	// grpc-go, a backend's GOAWAY "too_many_pings" doubles the interval
	// for the connections opened after it.
	KeepaliveTime                time.Duration
	KeepaliveTimeout             time.Duration
	KeepalivePermitWithoutStream bool
	// OnState, when not nil, is called with the client's new State each
	// time it changes, and when a backoff ends (Down to Idle), with the
	// client's lock held: it must not block nor call the client.
	OnState func(State)
	// OnAnswer, when not nil, is called each time the response of a call
	// begins (its headers, or a trailers-only response; not a 1xx), in
	// the connection's reader with its lock held: it must not block nor
	// call the client. It tells that the backend answers.
	OnAnswer func()
}

// A State is what a Client can do with a new call at once.
type State int32

const (
	// Idle: no connection; a call dials one.
	Idle State = iota
	// Connecting: a dial is under way.
	Connecting
	// Ready: a connection takes calls.
	Ready
	// Down: the last dial failed, or the connection closed before it
	// answered anything; no dial before the backoff ends (see
	// Options.OnState), and calls fail at once meanwhile.
	Down
	// Shutdown: the client is closed.
	Shutdown
)

// String is the state's name in /readyz: ready, connecting, down, idle,
// shutdown.
func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case Connecting:
		return "connecting"
	case Ready:
		return "ready"
	case Down:
		return "down"
	}
	return "shutdown"
}

// Reconnection backoff, grpc-go's: after a failed dial, or a connection
// that ended before it answered anything, calls fail at once with
// Unavailable until the next dial may start, instead of each waiting for a
// dial of its own.
const (
	baseBackoff   = time.Second
	backoffFactor = 1.6
	backoffJitter = 0.2
	maxBackoff    = 120 * time.Second
	healthyAfter  = time.Second // a connection this old has worked, answers or not
)

// A Client makes unary calls to one backend over one HTTP/2 connection,
// which it opens on the first call and again after the connection is lost
// or the backend sends GOAWAY. Its methods are safe for concurrent use.
type Client struct {
	ep   endpoint
	auth string // the :authority of calls
	opts Options
	wg   sync.WaitGroup // the connections' goroutines
	// dialCtx is cancelled by Close, to end a dial in progress.
	dialCtx    context.Context
	cancelDial context.CancelFunc

	mu      sync.Mutex
	cur     *conn          // the connection new calls use; nil when there is none
	conns   map[*conn]bool // every open connection, draining ones included
	dialing chan struct{}  // closed when the dial in progress ends
	dialErr error          // the last dial's failure, a status error
	retryAt time.Time      // no dial before, after dialErr
	backoff time.Duration  // the last backoff; 0 after a connection worked
	paced   bool           // dialErr is a connection that closed early: calls wait for the next dial
	closed  bool
	// kaTime is the keepalive interval of new connections:
	// Options.KeepaliveTime, doubled at each GOAWAY "too_many_pings".
	kaTime time.Duration
	// backoffEnd fires at retryAt with Options.OnState, to say Idle.
	backoffEnd *time.Timer

	state    atomic.Int32 // a State, written under mu
	inFlight atomic.Int32 // calls queued or open on the connections
	noWait   atomic.Bool  // see SetNoWait
}

// State returns the client's state. Reading it takes no lock.
func (c *Client) State() State { return State(c.state.Load()) }

// InFlight returns the calls queued or open on the client's connections.
// Reading it takes no lock.
func (c *Client) InFlight() int { return int(c.inFlight.Load()) }

// SetNoWait chooses what a call does when the client has no connection
// ready: with on false (the default) it waits for a dial, with on true
// it fails at once with ErrNotReady, the dial going on in the background,
// so that a caller holding other clients of the same backend tries one
// of those (see Call.Unsent).
func (c *Client) SetNoWait(on bool) { c.noWait.Store(on) }

// ErrNotReady is the status of a call made with SetNoWait(true) while the
// client had no connection ready; the call was not sent.
var ErrNotReady = status.Error(codes.Unavailable, "transport: no connection to the backend is ready")

// Err returns why the client's last dial failed, a status error, or nil.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dialErr
}

// updateLocked sets the client's state from its fields, and tells
// Options.OnState when it changed (or when force is set).
func (c *Client) updateLocked(force bool) {
	var s State
	switch {
	case c.closed:
		s = Shutdown
	case c.cur != nil && !c.cur.draining.Load():
		s = Ready
	case c.dialing != nil:
		s = Connecting
	case c.dialErr != nil && time.Now().Before(c.retryAt):
		s = Down
	default:
		s = Idle
	}
	if State(c.state.Swap(int32(s))) != s || force {
		if c.opts.OnState != nil {
			c.opts.OnState(s)
		}
	}
}

// New returns a Client of the backend at address on network ("tcp",
// HOST:PORT, or "unix", a socket's path, "@name" for an abstract one), as
// net.Dial takes them. It does not connect.
func New(network, address string, opts Options) (*Client, error) {
	switch {
	case network != "tcp" && network != "unix":
		return nil, fmt.Errorf("unary: network %q: want tcp or unix", network)
	case address == "":
		return nil, errors.New("unary: no address")
	}
	ep := endpoint{network: network, address: address, authority: address}
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
	if opts.KeepaliveTimeout <= 0 {
		opts.KeepaliveTimeout = 20 * time.Second
	}
	auth := opts.Authority
	if auth == "" {
		// grpc-go takes the authority from here too (determineAuthority):
		// the bridge's tls.server_name reaches both paths this way.
		//lint:ignore SA1019 deprecated for grpc.WithAuthority, but still what grpc-go's channel uses
		auth = cmp.Or(opts.Creds.Info().ServerName, ep.authority)
	}
	c := &Client{ep: ep, auth: auth, opts: opts, conns: map[*conn]bool{}, kaTime: opts.KeepaliveTime}
	c.dialCtx, c.cancelDial = context.WithCancel(context.Background())
	return c, nil
}

// Close closes the client's connections, failing the calls in progress
// with Unavailable, and waits for their goroutines. Later calls fail too.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	if c.backoffEnd != nil {
		c.backoffEnd.Stop()
	}
	c.updateLocked(false)
	conns := make([]*conn, 0, len(c.conns))
	for cn := range c.conns {
		conns = append(conns, cn)
	}
	c.mu.Unlock()
	c.cancelDial()
	for _, cn := range conns {
		cn.shut(errClosed)
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
		case c.noWait.Load():
			c.connectLocked()
			c.mu.Unlock()
			return nil, ErrNotReady
		case c.dialing == nil && c.dialErr != nil && time.Now().Before(c.retryAt):
			err, paced, at := c.dialErr, c.paced, c.retryAt
			c.mu.Unlock()
			if d, ok := ctx.Deadline(); !paced || ok && d.Before(at) {
				return nil, err
			}
			// The backend accepts connections but closed the last one
			// before answering: wait for the next dial rather than fail.
			t := time.NewTimer(time.Until(at))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, contextStatus(ctx)
			}
			continue
		case c.dialing == nil:
			c.dialing = make(chan struct{})
			c.wg.Go(c.dial)
			c.updateLocked(false)
		}
		ch := c.dialing
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, contextStatus(ctx)
		}
		c.mu.Lock()
		err, paced := c.dialErr, c.paced
		c.mu.Unlock()
		if err != nil && !paced {
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
	defer c.updateLocked(false)
	if err != nil {
		c.opts.Logger.Debug("cannot connect to the backend", "address", c.ep.address, "error", err)
		c.failedLocked(status.Error(codes.Unavailable, "transport: cannot connect to the backend: "+err.Error()))
		return
	}
	if cn.draining.Load() && !cn.healthy() {
		c.closedEarlyLocked() // GOAWAY before the first call
		return
	}
	c.dialErr = nil
	c.cur = cn
}

// failedLocked records a failure to connect: no dial before the backoff
// has passed, which grows with each failure in a row.
func (c *Client) failedLocked(err error) {
	c.dialErr, c.paced = err, false
	c.backoff = min(max(time.Duration(float64(c.backoff)*backoffFactor), baseBackoff), maxBackoff)
	jitter := 1 + backoffJitter*(2*rand.Float64()-1)
	wait := time.Duration(float64(c.backoff) * jitter)
	c.retryAt = time.Now().Add(wait)
	if c.opts.OnState != nil && !c.closed {
		if c.backoffEnd == nil {
			c.backoffEnd = time.AfterFunc(wait, c.endBackoff)
		} else {
			c.backoffEnd.Reset(wait)
		}
	}
}

// endBackoff tells Options.OnState that the backoff has ended.
func (c *Client) endBackoff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.updateLocked(true)
	}
}

// connect dials, secures the connection, exchanges prefaces and waits for
// the backend's first SETTINGS.
func (c *Client) connect(ctx context.Context) (*conn, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, c.ep.network, c.ep.address)
	if err != nil {
		return nil, err
	}
	// grpc-go hands the call authority to the handshake too: it is the
	// TLS server name unless the credentials override it.
	nc, _, err := c.opts.Creds.ClientHandshake(ctx, c.auth, raw)
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
	cn.kaTime = c.kaTime
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, errClosed
	}
	c.conns[cn] = true
	c.mu.Unlock()
	c.wg.Go(cn.readLoop)
	c.wg.Go(cn.writeLoop)
	if c.opts.KeepaliveTime > 0 {
		c.wg.Go(cn.keepalive)
	}
	if err := cn.start(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return cn, nil
}

// forget drops cn once it is closed. A connection that ended before it
// answered anything, soon after it opened, counts as a failure to connect
// (a backend that sends GOAWAY at once must not be redialled in a loop);
// one that worked resets the backoff. With calls that were open on it, the
// client redials at once, unless backing off; otherwise the next call
// dials.
func (c *Client) forget(cn *conn, busy bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.conns, cn)
	c.ended(cn, busy)
}

// retire makes new calls open another connection than cn.
func (c *Client) retire(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cn.mu.Lock()
	busy := len(cn.streams) > 0 || len(cn.pending) > 0
	cn.mu.Unlock()
	c.ended(cn, busy)
}

func (c *Client) ended(cn *conn, busy bool) {
	if c.cur != cn {
		return
	}
	defer c.updateLocked(false)
	c.cur = nil
	if cn.healthy() {
		c.backoff = 0
	} else if c.dialErr == nil || time.Now().After(c.retryAt) {
		c.closedEarlyLocked()
		return
	}
	if busy {
		c.connectLocked()
	}
}

// closedEarlyLocked records a connection that ended before it answered
// anything: the next dial waits for the backoff, and calls wait for it
// when their deadline allows (see ready).
func (c *Client) closedEarlyLocked() {
	c.failedLocked(status.Error(codes.Unavailable, "transport: the backend closed the connection before answering"))
	c.paced = true
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
	case c.dialErr != nil && time.Now().Before(c.retryAt):
	default:
		c.dialing = make(chan struct{})
		c.wg.Go(c.dial)
		c.updateLocked(false)
	}
}

// ResetBackoff ends the wait before the next dial, as grpc-go's
// ClientConn.ResetConnectBackoff: the next call dials at once. Use it
// when the backend is known to be back.
func (c *Client) ResetBackoff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.backoff, c.retryAt = 0, time.Time{}
	c.updateLocked(false)
}
