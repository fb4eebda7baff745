package idp

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
)

// keySet is one loaded key set: immutable.
type keySet struct {
	kf       keyfunc.Keyfunc
	store    jwkset.Storage
	prints   map[string]string // key id -> the key's public parameters
	n        int
	gen      uint64 // counts the key sets that dropped or changed a key
	loadedAt time.Time
}

// newClient is the HTTP client of fetches: no redirect to another host
// (or from https to http), at most 3, and RootCAs for HTTPS. Each fetch
// bounds itself with FetchTimeout.
func newClient(roots *x509.CertPool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	tr.MaxIdleConnsPerHost = 1
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			first := via[0].URL
			switch {
			case len(via) >= 3:
				return errors.New("more than 3 redirects")
			case req.URL.Host != first.Host:
				return fmt.Errorf("redirected to another host (%s)", req.URL.Host)
			case first.Scheme == "https" && req.URL.Scheme != "https":
				return errors.New("redirected from https to http")
			}
			return nil
		},
	}
}

// discoveryURL is the OpenID Connect discovery document of issuer.
func discoveryURL(issuer string) string {
	return strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
}

// get fetches u within FetchTimeout and returns its body, at most
// MaxKeySetBytes.
func (p *Provider) get(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", u, errors.Unwrap(err)) // *url.Error repeats the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching %s: HTTP %d", u, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxKeySetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", u, err)
	}
	if len(b) > MaxKeySetBytes {
		return nil, fmt.Errorf("fetching %s: larger than %d bytes", u, MaxKeySetBytes)
	}
	return b, nil
}

// keysURL returns the key set's URL: the configured one, or the
// jwks_uri of the issuer's discovery document, fetched once.
func (p *Provider) keysURL(ctx context.Context) (string, error) {
	p.mu.Lock()
	u := p.jwksURL
	p.mu.Unlock()
	if u != "" {
		return u, nil
	}
	b, err := p.get(ctx, discoveryURL(p.opts.Issuer))
	if err != nil {
		return "", err
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("%s: not a discovery document: %w", discoveryURL(p.opts.Issuer), err)
	}
	if doc.Issuer != p.opts.Issuer {
		return "", fmt.Errorf("%s names the issuer %q, not %q", discoveryURL(p.opts.Issuer), doc.Issuer, p.opts.Issuer)
	}
	if !strings.HasPrefix(doc.JWKSURI, "https://") && !(strings.HasPrefix(doc.JWKSURI, "http://") && strings.HasPrefix(p.opts.Issuer, "http://")) {
		return "", fmt.Errorf("%s: jwks_uri %q is not an https URL", discoveryURL(p.opts.Issuer), doc.JWKSURI)
	}
	p.mu.Lock()
	p.jwksURL = doc.JWKSURI
	p.mu.Unlock()
	return doc.JWKSURI, nil
}

// fetch fetches the key set once and installs it, or records why not.
func (p *Provider) fetch(ctx context.Context) error {
	u, err := p.keysURL(ctx)
	if err == nil {
		var b []byte
		b, err = p.get(ctx, u)
		p.fetches.Add(1)
		if err == nil {
			err = p.install(b, u)
		}
		if err != nil && p.opts.JWKSURL == "" {
			p.mu.Lock()
			p.jwksURL = "" // discover again next time: the key set may have moved
			p.mu.Unlock()
		}
	}
	if err != nil && ctx.Err() == nil {
		p.failed(err)
	}
	return err
}

// Reload reads the key set file again. A file that cannot be read or
// holds no usable key keeps the last good key set and returns the error.
func (p *Provider) Reload() error {
	if p.opts.JWKSFile == "" {
		return nil
	}
	err := p.readFile()
	if err != nil {
		p.failed(err)
	}
	return err
}

func (p *Provider) readFile() error {
	f, err := os.Open(p.opts.JWKSFile)
	if err != nil {
		return fmt.Errorf("key set file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxKeySetBytes+1))
	if err != nil {
		return fmt.Errorf("key set file %s: %w", p.opts.JWKSFile, err)
	}
	if len(b) > MaxKeySetBytes {
		return fmt.Errorf("key set file %s: larger than %d bytes", p.opts.JWKSFile, MaxKeySetBytes)
	}
	return p.install(b, p.opts.JWKSFile)
}

func (p *Provider) failed(err error) {
	p.mu.Lock()
	p.state = state{lastError: err.Error(), lastErrorAt: time.Now()}
	p.mu.Unlock()
	if p.Loaded() {
		p.log.Warn("cannot refresh the identity provider's keys; the last good ones still verify", "error", err)
	} else {
		p.log.Warn("cannot load the identity provider's keys; tokens of this issuer get HTTP 503 until they load", "error", err)
	}
}

// install parses a key set and swaps it in. Keys of an unknown type or
// curve, symmetric keys (never loaded: jwkset reads them only as private
// material) and RSA keys under 2048 bits are left out; a set with no key
// left is an error.
func (p *Provider) install(data []byte, from string) error {
	var raw jwkset.JWKSMarshal
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("%s: not a JWK Set: %w", from, err)
	}
	store := jwkset.NewMemoryStorage()
	prints := make(map[string]string, len(raw.Keys))
	skipped := 0
	for _, m := range raw.Keys {
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			skipped++
			continue
		}
		if rk, ok := k.Key().(*rsa.PublicKey); ok && rk.N.BitLen() < minRSABits {
			skipped++
			continue
		}
		if _, dup := prints[m.KID]; dup && m.KID != "" {
			skipped++ // keyfunc would pick the first: the others never verify
			continue
		}
		_ = store.KeyWrite(context.Background(), k) // a memory store does not fail
		pm := k.Marshal()
		print := string(pm.KTY) + "|" + string(pm.CRV) + "|" + pm.N + "|" + pm.E + "|" + pm.X + "|" + pm.Y + "|" + string(pm.ALG)
		if m.KID == "" {
			prints["\x00"+print] = print // keys without an id: any change drops them all
		} else {
			prints[m.KID] = print
		}
	}
	n := len(raw.Keys) - skipped
	if n == 0 {
		return fmt.Errorf("%s: no usable signing key among %d", from, len(raw.Keys))
	}
	kf, err := keyfunc.New(keyfunc.Options{Storage: store, UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	next := &keySet{kf: kf, store: store, prints: prints, n: n, loadedAt: time.Now()}
	old := p.keys.Load()
	dropped := false
	if old != nil {
		next.gen = old.gen
		for kid, print := range old.prints {
			if prints[kid] != print {
				dropped = true
				break
			}
		}
		if dropped {
			next.gen++
		}
	}
	p.keys.Store(next)
	if old == nil || dropped || n != old.n {
		p.log.Info("loaded the identity provider's keys", "keys", n, "skipped", skipped, "from", from)
	}
	if dropped && p.opts.OnDrop != nil {
		p.opts.OnDrop()
	}
	return nil
}

// KeyGen counts the key sets that dropped or changed a key: a token
// verified under the same count still has its key.
func (p *Provider) KeyGen() uint64 {
	if ks := p.keys.Load(); ks != nil {
		return ks.gen
	}
	return 0
}

// HasKey reports whether the key set still holds the key k names. A
// token without a key id was verified against every key: after a key
// set that dropped one it has to be verified again.
func (p *Provider) HasKey(k KeyRef) bool {
	ks := p.keys.Load()
	if ks == nil || k.kid == "" {
		return false
	}
	print, ok := ks.prints[k.kid]
	return ok && print == k.print
}
