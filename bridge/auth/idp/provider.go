package idp

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Defaults and bounds of Options.
const (
	// DefaultRefresh is how often a key set at a URL is fetched again.
	DefaultRefresh = 10 * time.Minute
	// MinRefresh is the shortest refresh the command honours
	// (auth.jwt.jwks_refresh); the package itself takes any positive one.
	MinRefresh = time.Minute
	// DefaultClockSkew is the leeway of exp, nbf and iat.
	DefaultClockSkew = 60 * time.Second
	// DefaultRefetchInterval bounds the fetches a token of an unknown key
	// id triggers: at most one in this long.
	DefaultRefetchInterval = 30 * time.Second
	// DefaultRefetchWait is the longest a call waits for that fetch.
	DefaultRefetchWait = 2 * time.Second
	// FetchTimeout bounds one fetch of the discovery document or the
	// key set, connection included.
	FetchTimeout = 5 * time.Second
	// MaxKeySetBytes bounds the discovery document and the key set.
	MaxKeySetBytes = 1 << 20
	// MaxTokenBytes bounds a token: a larger one is refused before it is
	// parsed.
	MaxTokenBytes = 8 << 10
	// maxRetry is the longest wait between two fetches while no key set
	// has loaded yet (they start a second apart and double).
	maxRetry = 30 * time.Second
	// minRSABits is the smallest RSA key a key set may hold (RFC 7518
	// section 3.3); smaller ones are left out.
	minRSABits = 2048
)

// Algorithms lists the signing algorithms a token may use: the
// asymmetric ones of RFC 7518 and RFC 8037. none and the HMAC algorithms
// (HS256, ...) are never accepted from a key set.
func Algorithms() []string {
	return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
}

// ErrConfig is wrapped by every error New returns.
var ErrConfig = errors.New("idp: invalid identity provider settings")

// Options describe one identity provider and how its tokens are checked.
type Options struct {
	// Issuer is the iss every token must carry, exactly. It must be set.
	Issuer string
	// Audiences lists what a token's aud must contain one of. It must not
	// be empty: a token for another service is never accepted.
	Audiences []string
	// JWKSURL is where the key set is fetched; empty (and no JWKSFile)
	// means the jwks_uri of Issuer's OpenID Connect discovery document,
	// <Issuer>/.well-known/openid-configuration.
	JWKSURL string
	// JWKSFile is a local key set, read by New and by Reload, instead of
	// fetching one.
	JWKSFile string
	// Algorithms are the allowed alg values, a subset of Algorithms();
	// nil means all of them.
	Algorithms []string
	// ClockSkew is the leeway of exp, nbf and iat; zero is none.
	ClockSkew time.Duration
	// Refresh is how often Run fetches the key set again; zero means
	// DefaultRefresh.
	Refresh time.Duration
	// RefetchInterval and RefetchWait bound the fetch a token of an
	// unknown key id triggers: at most one in RefetchInterval, for which
	// its call waits at most RefetchWait. Zero means the defaults.
	RefetchInterval, RefetchWait time.Duration
	// RootCAs verify the provider's HTTPS certificate; nil means the
	// system's roots.
	RootCAs *x509.CertPool
	// OnDrop, if not nil, is called after a new key set has left out (or
	// changed) a key of the one before: tokens of that key stop verifying.
	OnDrop func()
	// Logger receives fetch failures (Warn) and key set changes (Info);
	// nil discards them.
	Logger *slog.Logger
}

// A Provider verifies the tokens of one issuer. It is safe for
// concurrent use; its zero value is not usable, call New.
type Provider struct {
	opts      Options
	algs      []string
	client    *http.Client
	validator *jwt.Validator
	audiences map[string]bool // audienceKey of each audience
	log       *slog.Logger

	keys    atomic.Pointer[keySet] // nil until a key set has loaded
	kick    chan struct{}          // a refetch is pending: Run fetches now
	fetches atomic.Uint64          // key set fetches that got an answer or failed

	mu        sync.Mutex
	jwksURL   string   // the discovered (or configured) key set URL
	pending   *refetch // the refetch the next fetch answers
	lastAsked time.Time
	state     state
}

// refetch is one fetch of the key set that calls wait for.
type refetch struct{ done chan struct{} }

// state is what Status reports besides the key set.
type state struct {
	lastError   string
	lastErrorAt time.Time
}

// New checks o and returns its Provider. A key set in a file is read now
// (an error names it); one at a URL is fetched by Run.
func New(o Options) (*Provider, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if o.Issuer == "" {
		return nil, bad("no issuer")
	}
	if len(o.Audiences) == 0 || slices.Contains(o.Audiences, "") {
		return nil, bad("issuer %s: no audiences (a token for another service would be accepted)", o.Issuer)
	}
	if o.JWKSURL != "" && o.JWKSFile != "" {
		return nil, bad("issuer %s: give a key set URL or a key set file, not both", o.Issuer)
	}
	keysURL := o.JWKSURL
	if keysURL == "" {
		keysURL = o.Issuer
	}
	if o.JWKSFile == "" {
		if u, err := url.Parse(keysURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, bad("issuer %s: %q is not an http(s) URL to fetch keys from", o.Issuer, keysURL)
		}
	}
	algs := o.Algorithms
	if algs == nil {
		algs = Algorithms()
	}
	for _, a := range algs {
		if !slices.Contains(Algorithms(), a) {
			return nil, bad("issuer %s: algorithm %q is not one of %s", o.Issuer, a, strings.Join(Algorithms(), ", "))
		}
	}
	if len(algs) == 0 {
		return nil, bad("issuer %s: no algorithms", o.Issuer)
	}
	if o.ClockSkew < 0 {
		return nil, bad("issuer %s: negative clock skew", o.Issuer)
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.RefetchInterval <= 0 {
		o.RefetchInterval = DefaultRefetchInterval
	}
	if o.RefetchWait <= 0 {
		o.RefetchWait = DefaultRefetchWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Provider{
		opts:    o,
		algs:    algs,
		client:  newClient(o.RootCAs),
		jwksURL: o.JWKSURL,
		kick:    make(chan struct{}, 1),
		log:     o.Logger.With("issuer", o.Issuer),
		validator: jwt.NewValidator(jwt.WithLeeway(o.ClockSkew), jwt.WithIssuedAt(), jwt.WithExpirationRequired(),
			jwt.WithIssuer(o.Issuer)),
		audiences: make(map[string]bool, len(o.Audiences)),
	}
	for _, aud := range o.Audiences {
		p.audiences[audienceKey(aud)] = true
	}
	if o.JWKSFile != "" {
		if err := p.Reload(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return p, nil
}

// Issuer is the provider's issuer.
func (p *Provider) Issuer() string { return p.opts.Issuer }

// Audiences are the audiences a token may be for.
func (p *Provider) Audiences() []string { return slices.Clone(p.opts.Audiences) }

// Loaded reports whether a key set has ever loaded: until then a token
// of the provider is answered KeysNotLoaded.
func (p *Provider) Loaded() bool { return p.keys.Load() != nil }

// Fetches is how many times the key set was fetched (answered or not).
func (p *Provider) Fetches() uint64 { return p.fetches.Load() }

// Run fetches the key set at its URL until ctx is done: at once, again a
// second later and then at doubling intervals (up to 30 s) while no key
// set has ever loaded, then every Refresh, and at once when a token of an
// unknown key id asks for it. A failed fetch keeps the last good key set.
// For a key set in a file it returns at once: Reload reads it.
func (p *Provider) Run(ctx context.Context) {
	if p.opts.JWKSFile != "" {
		return
	}
	retry := time.Second
	for {
		p.mu.Lock()
		answers := p.pending
		p.pending = nil
		p.mu.Unlock()
		err := p.fetch(ctx)
		if answers != nil {
			close(answers.done)
		}
		wait := p.opts.Refresh
		switch {
		case p.keys.Load() == nil:
			wait, retry = retry, min(2*retry, maxRetry)
		case err != nil:
			wait = min(wait, maxRetry) // the keys are stale: try again soon
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			p.mu.Lock()
			if p.pending != nil {
				close(p.pending.done)
				p.pending = nil
			}
			p.mu.Unlock()
			return
		case <-t.C:
		case <-p.kick:
			t.Stop()
		}
	}
}

// awaitRefetch asks Run for a fetch of the key set, unless one was asked
// for less than RefetchInterval ago, and waits for it at most
// RefetchWait. It reports whether a fetch was waited for.
func (p *Provider) awaitRefetch(ctx context.Context) bool {
	if p.opts.JWKSFile != "" {
		return false
	}
	p.mu.Lock()
	r := p.pending
	if r == nil {
		if !p.lastAsked.IsZero() && time.Since(p.lastAsked) < p.opts.RefetchInterval {
			p.mu.Unlock()
			return false
		}
		r = &refetch{done: make(chan struct{})}
		p.pending, p.lastAsked = r, time.Now()
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	t := time.NewTimer(p.opts.RefetchWait)
	defer t.Stop()
	select {
	case <-r.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// Status is the state of a provider's key set, for /readyz.
type Status struct {
	Issuer string `json:"issuer"`
	// Keys is where the key set comes from: its URL (or, before
	// discovery, the issuer's discovery document) or its file.
	Keys string `json:"keys"`
	// State is loading (no key set yet: tokens get 503), ready, or stale
	// (the last fetch failed: the last good key set verifies).
	State     string    `json:"state"`
	KeyCount  int       `json:"key_count"`
	LoadedAt  time.Time `json:"loaded_at,omitzero"`
	LastError string    `json:"last_error,omitempty"`
	ErrorAt   time.Time `json:"last_error_at,omitzero"`
	Fetches   uint64    `json:"fetches"`
}

// Status returns the provider's state now.
func (p *Provider) Status() Status {
	p.mu.Lock()
	st, keysURL := p.state, p.jwksURL
	p.mu.Unlock()
	out := Status{Issuer: p.opts.Issuer, Keys: keysURL, State: "loading", Fetches: p.Fetches(),
		LastError: st.lastError, ErrorAt: st.lastErrorAt}
	switch {
	case p.opts.JWKSFile != "":
		out.Keys = p.opts.JWKSFile
	case out.Keys == "":
		out.Keys = discoveryURL(p.opts.Issuer)
	}
	if ks := p.keys.Load(); ks != nil {
		out.State, out.KeyCount, out.LoadedAt = "ready", ks.n, ks.loadedAt
		if st.lastErrorAt.After(ks.loadedAt) {
			out.State = "stale"
		}
	}
	return out
}

// ClockSkew is the leeway of exp, nbf and iat.
func (p *Provider) ClockSkew() time.Duration { return p.opts.ClockSkew }

// Refresh is how often Run fetches the key set again.
func (p *Provider) Refresh() time.Duration { return p.opts.Refresh }
