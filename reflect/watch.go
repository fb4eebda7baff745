package reflect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Source is one backend a Watcher discovers.
type Source struct {
	// Name identifies the backend in logs, errors and Status.
	Name string
	// Conn reaches the backend. When it is a *grpc.ClientConn (anything
	// with GetState, WaitForStateChange and Connect), the Watcher also
	// refreshes the backend when it becomes ready again after being down.
	Conn grpc.ClientConnInterface
	// Include and Exclude select the backend's services; see
	// Registry.Filter. Empty Include means every service.
	Include, Exclude []string
}

// WatchOptions tunes a Watcher. The zero value is ready to use.
type WatchOptions struct {
	// Interval between refreshes of every backend; zero turns periodic
	// refreshes off.
	Interval time.Duration
	// Retry paces the first discovery of each backend and gives the
	// logger of everything the Watcher does.
	Retry RetryOptions
}

// States of a backend in BackendStatus.
const (
	StateDiscovering = "discovering" // never discovered yet
	StateReady       = "ready"       // the last discovery succeeded
	StateStale       = "stale"       // the last refresh failed; the last good registry is in use
)

// BackendStatus is what a Watcher knows of one backend.
type BackendStatus struct {
	Name        string    `json:"name"`
	State       string    `json:"state"`
	Services    int       `json:"services"`
	Methods     int       `json:"methods"`
	LastRefresh time.Time `json:"last_refresh,omitzero"` // the last successful discovery
	LastError   string    `json:"last_error,omitempty"`  // of the last failed discovery, if the last one failed
	// Skipped lists the services the backend lists (and include and
	// exclude select) that the last successful discovery left out because
	// their descriptors could not be got or used.
	Skipped []SkippedStatus `json:"skipped,omitempty"`
}

// SkippedStatus is a service left out of a backend's registry and why.
type SkippedStatus struct {
	Service string `json:"service"`
	Reason  string `json:"reason"`
}

// Status is a snapshot of a Watcher's state, for readiness probes.
type Status struct {
	Backends []BackendStatus `json:"backends"`
	// LastError is why the last merge of the backends' registries was
	// refused, such as a service offered by two backends; empty when the
	// last merge succeeded.
	LastError string `json:"last_error,omitempty"`
}

// Watcher keeps the Catalog of several backends up to date: it discovers
// each of them, merges their registries and refreshes them on an interval,
// on request (Refresh) and when a backend reconnects after being down. A
// refresh that fails keeps the last good registry.
type Watcher struct {
	sources []Source
	opts    WatchOptions
	log     *slog.Logger
	wake    chan struct{} // Refresh asks for a refresh of every backend

	mu       sync.Mutex
	regs     []*Registry // the last good registry of each source, nil until discovered
	repairs  [][]string  // of each source's last good registry, to log changes only
	status   []BackendStatus
	mergeErr string
	current  *Catalog
}

// NewWatcher returns a Watcher of sources; Run starts it.
func NewWatcher(sources []Source, opts WatchOptions) *Watcher {
	opts.Retry = opts.Retry.withDefaults()
	w := &Watcher{
		sources: slices.Clone(sources),
		opts:    opts,
		log:     opts.Retry.Logger,
		wake:    make(chan struct{}, 1),
		regs:    make([]*Registry, len(sources)),
		repairs: make([][]string, len(sources)),
		status:  make([]BackendStatus, len(sources)),
	}
	for i, s := range sources {
		w.status[i] = BackendStatus{Name: s.Name, State: StateDiscovering}
	}
	return w
}

// Refresh asks the running Watcher to rediscover every backend soon. It
// never blocks; requests made while one is pending are merged.
func (w *Watcher) Refresh() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Status returns a snapshot of the Watcher's state.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Status{Backends: slices.Clone(w.status), LastError: w.mergeErr}
}

// Run discovers every backend, retrying each until it answers, merges
// their registries and calls install with the Catalog; then it keeps
// refreshing, calling install with every new Catalog, until ctx is done,
// and returns nil. It returns an error without installing anything when a
// pattern is malformed or the first merge fails (a service offered by two
// backends: a *DuplicateServiceError). install is called from one
// goroutine at a time.
func (w *Watcher) Run(ctx context.Context, install func(*Catalog)) error {
	for _, s := range w.sources {
		for _, p := range slices.Concat(s.Include, s.Exclude) {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("reflect: backend %q: service pattern %q: %w", s.Name, p, err)
			}
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: every goroutine below watches ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watching starts first so that no loss of a connection is missed.
	reconnected := make(chan int, len(w.sources))
	for i, s := range w.sources {
		if c, ok := s.Conn.(stateConn); ok {
			wg.Go(func() { watchState(ctx, c, func() { sendIndex(reconnected, i) }) })
		}
	}
	var first sync.WaitGroup
	for i := range w.sources {
		first.Go(func() { w.discoverFirst(ctx, i) })
	}
	first.Wait()
	if ctx.Err() != nil {
		return nil
	}
	cat, err := w.merge()
	if err != nil {
		return err
	}
	w.install(cat, install, "discovered the backends' methods")
	var tick <-chan time.Time
	if w.opts.Interval > 0 {
		t := time.NewTicker(w.opts.Interval)
		defer t.Stop()
		tick = t.C
	}
	all := make([]int, len(w.sources))
	for i := range all {
		all[i] = i
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			w.refresh(ctx, all, install, "interval")
		case <-w.wake:
			w.refresh(ctx, all, install, "requested")
		case i := <-reconnected:
			w.refresh(ctx, []int{i}, install, "backend reconnected")
		}
	}
}

func sendIndex(ch chan<- int, i int) {
	select {
	case ch <- i:
	default: // a refresh of it is pending already
	}
}

// discoverFirst discovers source i, retrying with backoff until it
// succeeds or ctx is done. Every failure is a Warn record, except that a
// backend without reflection is warned of once, saying what to do, and
// its next failures of the same kind are Debug records.
func (w *Watcher) discoverFirst(ctx context.Context, i int) {
	unsupported := false
	_ = retry(ctx, w.opts.Retry, func() error { return w.discover(ctx, i) },
		func(attempt int, err error, wait time.Duration) {
			attrs := []any{"backend", w.sources[i].Name, "attempt", attempt, "error", err, "retry_in", wait}
			switch {
			case !errors.Is(err, ErrReflectionUnsupported):
				w.log.WarnContext(ctx, "reflect: discovery failed", attrs...)
			case !unsupported:
				unsupported = true
				w.log.WarnContext(ctx, "reflect: the backend has no server reflection: describe its services with --protoset FILE or --proto FILE -I DIR; "+
					"retrying at the slowest pace (logged at debug level)", attrs...)
			default:
				w.log.DebugContext(ctx, "reflect: discovery failed", attrs...)
			}
		})
}

// discover makes one discovery of source i and records its outcome: a
// success replaces the source's registry, a failure keeps it.
func (w *Watcher) discover(ctx context.Context, i int) error {
	s := w.sources[i]
	reg, err := discoverOnce(ctx, s.Conn, attemptTimeout)
	if err == nil {
		reg, err = reg.Filter(s.Include, s.Exclude)
	}
	if err != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		st := &w.status[i]
		st.LastError = publicError(err)
		if w.regs[i] != nil {
			st.State = StateStale
		}
		return err
	}
	w.mu.Lock()
	before := w.status[i].Skipped // only this goroutine discovers source i
	repairedBefore := w.repairs[i]
	w.mu.Unlock()
	if repairs := reg.Repairs(); len(repairs) > 0 {
		// At Info when they change, as Skipped.
		level := slog.LevelInfo
		if slices.Equal(repairs, repairedBefore) {
			level = slog.LevelDebug
		}
		w.log.Log(ctx, level, "reflect: the backend's descriptors were repaired to describe its services",
			"backend", s.Name, "repairs", repairs)
	}
	var skipped []SkippedStatus
	for _, sk := range reg.Skipped() {
		st := SkippedStatus{Service: sk.Name, Reason: sk.Reason}
		skipped = append(skipped, st)
		// Warned once; the same service left out for the same reason by
		// the next refreshes is logged at Debug.
		level := slog.LevelWarn
		if slices.Contains(before, st) {
			level = slog.LevelDebug
		}
		w.log.Log(ctx, level, "reflect: a service is left out: the backend gives no usable descriptors for it",
			"backend", s.Name, "service", sk.Name, "reason", sk.Reason, "error", sk.Err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.regs[i] = reg
	w.repairs[i] = reg.Repairs()
	w.status[i] = BackendStatus{Name: s.Name, State: StateReady, Services: len(reg.services),
		Methods: len(reg.methods), LastRefresh: time.Now(), Skipped: skipped}
	return nil
}

// publicError is what Status says of a failed discovery: what went wrong,
// in the bridge's own words, never the Go error text of the reflection
// client or the dialer (those go to the log), since /readyz answers
// anyone who can reach the listener; only why a TLS handshake failed is
// kept.
func publicError(err error) string {
	const seeLog = " (the bridge's log has the details)"
	switch {
	case errors.Is(err, ErrReflectionUnsupported):
		return "reflect: the backend has no server reflection: describe its services with --protoset FILE or --proto FILE -I DIR"
	case errors.Is(err, context.DeadlineExceeded):
		return "reflect: discovery timed out" + seeLog
	}
	// A failed TLS handshake is the deployment's to fix, and what failed
	// (an untrusted certificate, a wrong name, the bridge's own tls.ca_file
	// check) says how: kept, out of grpc-go's quoting.
	const handshake = "authentication handshake failed: "
	if _, why, ok := strings.Cut(err.Error(), handshake); ok {
		why = strings.ReplaceAll(strings.TrimRight(why, `"\`), `\"`, `"`)
		return "reflect: the TLS handshake with the backend failed: " + why
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.OK && s.Code() != codes.Unknown {
		return fmt.Sprintf("reflect: the reflection call failed with code %d (%s)%s", s.Code(), s.Code(), seeLog)
	}
	return "reflect: discovery failed" + seeLog
}

// merge builds the Catalog of the last good registries and records a
// failure.
func (w *Watcher) merge() (*Catalog, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	parts := make([]Part, len(w.sources))
	for i, s := range w.sources {
		parts[i] = Part{Name: s.Name, Conn: s.Conn, Registry: w.regs[i]}
	}
	cat, err := Merge(parts)
	if err != nil {
		w.mergeErr = err.Error()
		return nil, err
	}
	w.mergeErr = ""
	return cat, nil
}

// refresh rediscovers the sources at indexes which and installs the new
// Catalog; a failure keeps the installed one.
func (w *Watcher) refresh(ctx context.Context, which []int, install func(*Catalog), why string) {
	var wg sync.WaitGroup
	errs := make([]error, len(which))
	for j, i := range which {
		wg.Go(func() {
			if err := w.discover(ctx, i); err != nil {
				errs[j] = fmt.Errorf("backend %q: %w", w.sources[i].Name, err)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	if err := errors.Join(errs...); err != nil {
		w.log.ErrorContext(ctx, "reflect: refresh failed; keeping the last good registry", "reason", why, "error", err)
	}
	cat, err := w.merge()
	if err != nil {
		w.log.ErrorContext(ctx, "reflect: refresh failed; keeping the last good registry", "reason", why, "error", err)
		return
	}
	w.install(cat, install, "refreshed the backends' methods")
}

// install makes cat current and hands it to the caller, logging at Info
// when the methods changed.
func (w *Watcher) install(cat *Catalog, install func(*Catalog), msg string) {
	w.mu.Lock()
	old := w.current
	w.current = cat
	w.mu.Unlock()
	install(cat)
	added, removed := diffMethods(old, cat)
	level := slog.LevelDebug
	if old == nil || len(added)+len(removed) > 0 {
		level = slog.LevelInfo
	}
	attrs := []any{"services", len(cat.services), "methods", len(cat.methods)}
	if old != nil {
		attrs = append(attrs, "added", added, "removed", removed)
	}
	w.log.Log(context.Background(), level, msg, attrs...)
}

// diffMethods lists the methods of b missing from a, and of a missing from b.
func diffMethods(a, b *Catalog) (added, removed []string) {
	names := func(c *Catalog) map[protoreflect.FullName]bool {
		m := make(map[protoreflect.FullName]bool)
		if c != nil {
			for _, md := range c.methods {
				m[md.FullName()] = true
			}
		}
		return m
	}
	in, out := names(a), names(b)
	for n := range out {
		if !in[n] {
			added = append(added, string(n))
		}
	}
	for n := range in {
		if !out[n] {
			removed = append(removed, string(n))
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// stateConn is the part of *grpc.ClientConn that tells when it reconnects.
type stateConn interface {
	GetState() connectivity.State
	WaitForStateChange(context.Context, connectivity.State) bool
	Connect()
}

// watchState calls reconnected whenever c becomes ready after having been
// ready and then lost its connection, until ctx is done. A connection that
// goes idle after being ready is asked to reconnect at once, so a backend
// coming back is noticed without waiting for a call.
func watchState(ctx context.Context, c stateConn, reconnected func()) {
	wasReady, down := false, false
	s := c.GetState()
	for {
		switch s {
		case connectivity.Ready:
			if down {
				reconnected()
			}
			wasReady, down = true, false
		case connectivity.Shutdown:
			return
		default: // idle, connecting or failing: states may be skipped
			down = down || wasReady
			if s == connectivity.Idle && wasReady {
				c.Connect()
			}
		}
		if !c.WaitForStateChange(ctx, s) {
			return
		}
		s = c.GetState()
	}
}
