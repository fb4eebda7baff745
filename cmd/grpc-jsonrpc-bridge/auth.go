package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// authentication is the bridge's Auth with what keeps it current: the
// identity providers' fetch loops and the reloads of auth.file and the
// key set files (on change and on SIGHUP).
type authentication struct {
	auth      *bridge.Auth // nil when authentication is off
	providers []*idp.Provider
	files     *authFiles
}

// newAuth reads the identities of s.Auth.File and prepares the identity
// providers of s; a nil auth when authentication is off. Errors name
// their key (auth.file, auth.jwt.ca_file, ...): every one is the user's.
func newAuth(s config.Settings, log *slog.Logger) (*authentication, error) {
	jwts := s.Auth.JWTProviders()
	if s.Auth.File == "" && len(jwts) == 0 {
		return &authentication{}, nil
	}
	out := &authentication{files: &authFiles{log: log, identities: s.Auth.File, seen: map[string][]byte{}}}
	var a *bridge.Auth // set below; OnDrop runs only once the fetch loops run
	var providers []*auth.Provider
	for i, j := range jwts {
		key := "auth.jwt."
		if n := len(jwts) - len(s.Auth.Providers); i >= n {
			key = fmt.Sprintf("%s[%d].", config.KeyJWTProviders, i-n)
		}
		p, err := newProvider(j, key, log, func() { a.Changed() })
		if err != nil {
			return nil, err
		}
		out.providers = append(out.providers, p)
		providers = append(providers, &auth.Provider{Provider: p, ClaimsMetadata: j.ClaimsMetadata})
		if j.JWKSFile != "" {
			out.files.keys = append(out.files.keys, keyFile{path: j.JWKSFile, p: p})
		}
	}
	ids, data, err := out.files.readIdentities()
	if err != nil {
		return nil, &config.KeyError{Key: "auth.file", Err: config.ErrInvalidValue, Reason: err.Error()}
	}
	a, err = auth.New(ids, providers...)
	if err != nil {
		return nil, &config.KeyError{Key: "auth.file", Err: config.ErrInvalidValue, Reason: fmt.Sprintf("%s: %v", s.Auth.File, err)}
	}
	out.auth, out.files.auth = a, a
	out.files.loaded(s.Auth.File, data)
	for _, kf := range out.files.keys {
		if b, err := os.ReadFile(kf.path); err == nil {
			out.files.seen[kf.path] = b
		}
	}
	return out, nil
}

// newProvider is the identity provider of j, whose keys are those of
// key ("auth.jwt.", "auth.jwt_providers[1].").
func newProvider(j config.JWT, key string, log *slog.Logger, onDrop func()) (*idp.Provider, error) {
	var roots *x509.CertPool
	if j.CAFile != "" {
		pem, err := os.ReadFile(j.CAFile)
		if err != nil {
			return nil, &config.KeyError{Key: key + "ca_file", Err: config.ErrInvalidValue, Reason: err.Error()}
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, &config.KeyError{Key: key + "ca_file", Err: config.ErrInvalidValue, Reason: j.CAFile + " holds no PEM certificate"}
		}
	}
	refresh := j.JWKSRefresh
	if refresh < idp.MinRefresh {
		log.Warn("jwks_refresh is shorter than the shortest honoured; using it", "key", key+"jwks_refresh", "jwks_refresh", refresh.String(), "used", idp.MinRefresh.String())
		refresh = idp.MinRefresh
	}
	if u, err := url.Parse(cmpOr(j.JWKSURL, j.Issuer)); err == nil && u.Scheme == "http" && j.JWKSFile == "" && !loopback(u.Hostname()) {
		log.Warn("the identity provider's keys are fetched over plain HTTP: anyone on the path can replace them", "issuer", j.Issuer)
	}
	p, err := idp.New(idp.Options{
		Issuer: j.Issuer, Audiences: j.Audiences, JWKSURL: j.JWKSURL, JWKSFile: j.JWKSFile, Algorithms: j.Algorithms,
		ClockSkew: j.ClockSkew, Refresh: refresh, RootCAs: roots, OnDrop: onDrop, Logger: log,
	})
	if err != nil {
		k := key + "issuer"
		if j.JWKSFile != "" {
			k = key + "jwks_file"
		}
		return nil, &config.KeyError{Key: k, Err: config.ErrInvalidValue, Reason: strings.TrimPrefix(err.Error(), idp.ErrConfig.Error()+": ")}
	}
	return p, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// run fetches the providers' keys and reloads the files as they change,
// until ctx is done. It returns at once with authentication off.
func (a *authentication) run(ctx context.Context) {
	if a.auth == nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, p := range a.providers {
		wg.Go(func() { p.Run(ctx) })
	}
	a.files.watch(ctx)
}

// reload rereads every file (SIGHUP).
func (a *authentication) reload() {
	if a.auth != nil {
		a.files.reload(true)
	}
}

// options are the bridge options of authentication: the Auth, and the
// protected resource and its scopes.
func (a *authentication) options(o bridge.Options, s config.Settings) bridge.Options {
	o.Auth = a.auth
	o.Resource = s.Auth.Resource
	for _, j := range s.Auth.JWTProviders() {
		for _, sc := range j.Scopes {
			if !slices.Contains(o.Scopes, sc) {
				o.Scopes = append(o.Scopes, sc)
			}
		}
	}
	return o
}

// authFiles are the files authentication reads: auth.file and the key
// set files, each reloaded when its content changes (and all on SIGHUP);
// one that fails keeps what there was.
type authFiles struct {
	log        *slog.Logger
	auth       *bridge.Auth
	identities string // auth.file, "" for none
	keys       []keyFile

	mu     sync.Mutex        // reloads
	seen   map[string][]byte // the content last read of each file, good or not
	errors atomic.Uint64     // reloads that failed
	state  filesState
}

type keyFile struct {
	path string
	p    *idp.Provider
}

type filesState struct {
	loadedAt    time.Time
	lastError   string
	lastErrorAt time.Time
}

// readIdentities reads the identities file; none without one.
func (f *authFiles) readIdentities() ([]bridge.Identity, []byte, error) {
	if f.identities == "" {
		return nil, nil, nil
	}
	data, err := os.ReadFile(f.identities)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.identities, errors.Unwrap(err))
	}
	ids, err := config.ParseIdentities(f.identities, data)
	if err != nil {
		return nil, data, err
	}
	out := make([]bridge.Identity, len(ids))
	for i, id := range ids {
		out[i] = bridge.Identity{Name: id.Name, Tokens: id.Tokens, ClientCerts: id.ClientCerts, Allow: id.Allow}
		if s := id.JWT; s != nil {
			out[i].JWT = &auth.Selector{Issuer: s.Issuer, Subjects: s.Subjects, Claims: s.Claims}
		}
	}
	return out, data, nil
}

func (f *authFiles) loaded(path string, data []byte) {
	f.seen[path] = data
	f.state.loadedAt = time.Now()
}

// reload rereads the files whose content changed since last read, or
// all of them when force is set.
func (f *authFiles) reload(force bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := func(path string) bool {
		b, err := os.ReadFile(path)
		return force || err != nil || !bytes.Equal(b, f.seen[path])
	}
	if f.identities != "" && changed(f.identities) {
		ids, data, err := f.readIdentities()
		if err == nil {
			err = f.auth.Reload(ids)
		}
		f.seen[f.identities] = data
		if err != nil {
			f.failed("cannot reload the identities; keeping the last good ones", f.identities, err)
		} else {
			f.state.loadedAt = time.Now()
			f.log.Info("reloaded the identities", "file", f.identities, "identities", len(ids))
		}
	}
	for _, kf := range f.keys {
		if !changed(kf.path) {
			continue
		}
		b, _ := os.ReadFile(kf.path)
		f.seen[kf.path] = b
		if err := kf.p.Reload(); err != nil {
			f.failed("cannot reload a key set file; keeping the last good keys", kf.path, err)
		} else {
			f.log.Info("reloaded a key set file", "file", kf.path, "issuer", kf.p.Issuer())
		}
	}
}

func (f *authFiles) failed(msg, path string, err error) {
	f.errors.Add(1)
	f.state.lastError, f.state.lastErrorAt = strings.TrimPrefix(err.Error(), auth.ErrConfig.Error()+": "), time.Now()
	f.log.Error(msg, "file", path, "error", f.state.lastError)
}

// Errors counts the reloads that failed.
func (f *authFiles) Errors() uint64 {
	if f == nil {
		return 0
	}
	return f.errors.Load()
}

// watch reloads the files when the directories holding them change, as
// a Kubernetes Secret's or ConfigMap's do when the kubelet swaps their
// ..data symlink, until ctx is done. Without inotify (or its watches) it
// logs and leaves reloads to SIGHUP.
func (f *authFiles) watch(ctx context.Context) {
	var dirs []string
	for _, p := range append([]string{f.identities}, f.keyPaths()...) {
		if d := filepath.Dir(p); p != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		<-ctx.Done()
		return
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		f.log.Warn("cannot watch the authentication files; SIGHUP reloads them", "error", err)
		<-ctx.Done()
		return
	}
	defer w.Close()
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			f.log.Warn("cannot watch a directory of authentication files; SIGHUP reloads them", "dir", d, "error", err)
		}
	}
	// Events come in bursts (a write, a rename, a symlink swap): reload
	// once the burst has settled a little.
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			settle.Reset(50 * time.Millisecond)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			f.log.Warn("watching the authentication files", "error", err)
			settle.Reset(50 * time.Millisecond) // events may have been lost
		case <-settle.C:
			f.reload(false)
		}
	}
}

func (f *authFiles) keyPaths() []string {
	var out []string
	for _, k := range f.keys {
		out = append(out, k.path)
	}
	return out
}

// authStatus is the authentication member of /readyz's details.
type authStatus struct {
	Identities *identitiesStatus `json:"identities,omitempty"`
	Providers  []idp.Status      `json:"providers,omitempty"`
}

type identitiesStatus struct {
	File         string    `json:"file"`
	LoadedAt     time.Time `json:"loaded_at"`
	ReloadErrors uint64    `json:"reload_errors"`
	LastError    string    `json:"last_error,omitempty"`
	ErrorAt      time.Time `json:"last_error_at,omitzero"`
}

// status is the state of the files and providers now.
func (a *authentication) status() authStatus {
	var out authStatus
	for _, p := range a.providers {
		out.Providers = append(out.Providers, p.Status())
	}
	f := a.files
	f.mu.Lock()
	st := f.state
	f.mu.Unlock()
	if f.identities != "" || st.lastError != "" {
		out.Identities = &identitiesStatus{File: f.identities, LoadedAt: st.loadedAt, ReloadErrors: f.Errors(),
			LastError: st.lastError, ErrorAt: st.lastErrorAt}
	}
	return out
}

// withAuthDetails adds the authentication's state to the /readyz details
// of details, as their "auth" member.
func withAuthDetails(details func() any, a *authentication) func() any {
	if a.auth == nil {
		return details
	}
	return withMember(details, "auth", func() any { return a.status() })
}
