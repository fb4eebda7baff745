package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
)

// byJWT verifies token, whose digest is sum, or finds it verified in the
// cache, and returns its caller: the first identity whose selector
// matches its claims, or the unmatched caller, which may call nothing.
func (a *Auth) byJWT(ctx context.Context, s *snapshot, token string, sum [sha256.Size]byte) (*Caller, Failure) {
	now := time.Now()
	if c := s.cache.get(sum, now); c != nil {
		return c, OK
	}
	t, reason := idp.Parse(token)
	if reason != idp.OK {
		return nil, tokenFailure(reason)
	}
	p := a.byIssuer[t.Issuer()]
	if p == nil {
		return nil, tokenFailure(idp.WrongIssuer)
	}
	claims, reason := p.Verify(ctx, t)
	if reason != idp.OK {
		return nil, tokenFailure(reason)
	}
	c := s.resolve(p, claims)
	c.expires = claims.Expires.Add(p.ClockSkew())
	if c.expires.After(now) { // false only when exp is in the past within the skew
		s.cache.put(sum, &cacheEntry{caller: c, p: p, key: claims.Key, size: len(token)}, now)
	}
	return c, OK
}

// resolve is the caller of claims: the first identity whose selector
// matches, or the unmatched one, with p's claim metadata.
func (s *snapshot) resolve(p *Provider, claims *idp.Claims) *Caller {
	id := s.unmatched
	for _, cand := range s.selectors {
		if cand.sel.match(claims) {
			id = cand
			break
		}
	}
	c := &Caller{identity: id}
	if claims.Subject != "" {
		c.subject = "\x00jwt\x00" + claims.Issuer + "\x00" + claims.Subject
	}
	for _, claim := range slices.Sorted(maps.Keys(p.ClaimsMetadata)) {
		if v := claims.String(claim); v != "" && printable(v) {
			c.metadata = append(c.metadata, p.ClaimsMetadata[claim], v)
		}
	}
	return c
}

// printable reports whether v may be a gRPC metadata value: printable
// ASCII.
func printable(v string) bool {
	for i := range len(v) {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// selector is a Selector prepared.
type selector struct {
	issuer   string
	subjects []string
	claims   [][2]string // name, value
}

// selector checks and prepares sel.
func (a *Auth) selector(sel *Selector) (*selector, error) {
	if len(a.providers) == 0 {
		return nil, errors.New("a jwt selector, but no identity provider is configured (auth.jwt.issuer)")
	}
	if sel.Issuer != "" && a.byIssuer[sel.Issuer] == nil {
		return nil, fmt.Errorf("jwt.issuer %q is not a configured issuer (%s)", sel.Issuer, strings.Join(a.Issuers(), ", "))
	}
	if slices.Contains(sel.Subjects, "") {
		return nil, errors.New("jwt.subjects holds an empty subject")
	}
	out := &selector{issuer: sel.Issuer, subjects: slices.Clone(sel.Subjects)}
	for _, name := range slices.Sorted(maps.Keys(sel.Claims)) {
		if name == "" || sel.Claims[name] == "" {
			return nil, fmt.Errorf("jwt.claims: %q: a claim needs a name and a value", name)
		}
		out.claims = append(out.claims, [2]string{name, sel.Claims[name]})
	}
	return out, nil
}

// match reports whether verified claims satisfy every condition of s.
func (s *selector) match(c *idp.Claims) bool { return s.matchBut(c) }

// claimHas reports whether the claim name of value v holds want.
func claimHas(name string, v any, want string) bool {
	switch v := v.(type) {
	case string:
		if name == "scope" || name == "scp" {
			return slices.Contains(strings.Fields(v), want)
		}
		return v == want
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
		return false
	case float64, bool:
		b, _ := json.Marshal(v)
		return string(b) == want
	}
	return false
}

// Bounds of the cache of verified tokens, per snapshot.
const (
	defaultCacheEntries = 10000
	defaultCacheBytes   = 8 << 20
	// entryOverhead is what an entry costs besides its token's length
	// (which bounds its claims' metadata): the map's slot, the digest, the
	// entry and its Caller.
	entryOverhead = 256
)

// tokenCache holds verified tokens by the SHA-256 digest of the token,
// bounded in entries and bytes. An entry is good until its token stops
// verifying (exp and the clock skew) or its provider's key set drops
// its key. Lookups take no lock.
type tokenCache struct {
	m                    sync.Map // [sha256.Size]byte -> *cacheEntry
	entries, bytes       atomic.Int64
	maxEntries, maxBytes int64
	mu                   sync.Mutex // puts that must make room
}

type cacheEntry struct {
	caller *Caller
	p      *Provider
	key    idp.KeyRef
	gen    atomic.Uint64 // the provider's KeyGen when key was last seen in its key set
	size   int
}

func newTokenCache(entries, bytes int64) *tokenCache {
	return &tokenCache{maxEntries: entries, maxBytes: bytes}
}

// get returns the caller of the token of digest sum if it is cached and
// still good.
func (c *tokenCache) get(sum [sha256.Size]byte, now time.Time) *Caller {
	v, ok := c.m.Load(sum)
	if !ok {
		return nil
	}
	e := v.(*cacheEntry)
	if !now.Before(e.caller.expires) {
		c.drop(sum, e)
		return nil
	}
	if gen := e.p.KeyGen(); gen != e.gen.Load() {
		if !e.p.HasKey(e.key) {
			c.drop(sum, e)
			return nil
		}
		e.gen.Store(gen)
	}
	return e.caller
}

func (c *tokenCache) drop(sum [sha256.Size]byte, e *cacheEntry) {
	if c.m.CompareAndDelete(sum, e) {
		c.entries.Add(-1)
		c.bytes.Add(-int64(entryOverhead + e.size))
	}
}

// put caches e under sum, making room first when the cache is full:
// expired entries go, then others until a tenth of the room is free.
func (c *tokenCache) put(sum [sha256.Size]byte, e *cacheEntry, now time.Time) {
	e.gen.Store(e.key.Gen)
	size := int64(entryOverhead + e.size)
	if size > c.maxBytes {
		return
	}
	if c.entries.Load()+1 > c.maxEntries || c.bytes.Load()+size > c.maxBytes {
		c.makeRoom(now)
	}
	if _, loaded := c.m.LoadOrStore(sum, e); !loaded {
		c.entries.Add(1)
		c.bytes.Add(size)
	}
}

func (c *tokenCache) makeRoom(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries.Load()+1 <= c.maxEntries && c.bytes.Load()+entryOverhead+idp.MaxTokenBytes <= c.maxBytes {
		return // another put made room
	}
	c.m.Range(func(k, v any) bool {
		if e := v.(*cacheEntry); !now.Before(e.caller.expires) {
			c.drop(k.([sha256.Size]byte), e)
		}
		return true
	})
	// Then any entries (sync.Map ranges in no set order), down to 90%.
	c.m.Range(func(k, v any) bool {
		if c.entries.Load() <= c.maxEntries*9/10 && c.bytes.Load() <= c.maxBytes*9/10 {
			return false
		}
		c.drop(k.([sha256.Size]byte), v.(*cacheEntry))
		return true
	})
}

// Len is the number of tokens cached now, for tests.
func (c *tokenCache) Len() int { return int(c.entries.Load()) }

// ScopesFor returns the scopes a token like that of r, whose caller c
// matched no identity (it may call nothing), would need to be a caller
// that may call something: its own scopes (scope and scp) and those of
// the first identity whose selector its token matches but for them, when
// a token with them resolves to that identity. nil when c is another
// caller, or no scopes would do (no selector asks for scopes, or the
// token lacks other claims too). It says nothing of any method, so that
// its answer tells nothing of which methods exist. The token is parsed
// again, not verified: c says it verified.
func (a *Auth) ScopesFor(r *http.Request, c *Caller) []string {
	s := a.cur.Load()
	if c == nil || c.identity != s.unmatched || c.expires.IsZero() || !s.scoped {
		return nil
	}
	token, fail := credential(r.Header)
	if fail != OK {
		return nil
	}
	t, reason := idp.Parse(token)
	if reason != idp.OK {
		return nil
	}
	claims := t.Unverified()
	have := tokenScopes(claims.MapClaims)
	for _, cand := range s.selectors {
		if len(cand.allow) == 0 || !cand.sel.matchBut(claims, "scope", "scp") {
			continue
		}
		want := slices.Clone(have)
		grant := maps.Clone(claims.MapClaims)
		for _, kv := range cand.sel.claims {
			if kv[0] == "scope" || kv[0] == "scp" {
				if !slices.Contains(want, kv[1]) {
					want = append(want, kv[1])
				}
			}
		}
		grant["scope"] = strings.Join(want, " ")
		scp := make([]any, len(want))
		for i, sc := range want {
			scp[i] = sc
		}
		grant["scp"] = scp
		more := &idp.Claims{MapClaims: grant, Issuer: claims.Issuer, Subject: claims.Subject}
		for _, id := range s.selectors {
			if id.sel.match(more) {
				if id == cand {
					return want
				}
				break
			}
		}
	}
	return nil
}

// tokenScopes are the scopes claims grant: scope, space-delimited, and
// scp, a string of them or an array.
func tokenScopes(c map[string]any) []string {
	var out []string
	add := func(sc string) {
		if sc != "" && !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	for _, name := range []string{"scope", "scp"} {
		switch v := c[name].(type) {
		case string:
			for _, sc := range strings.Fields(v) {
				add(sc)
			}
		case []any:
			for _, e := range v {
				if sc, ok := e.(string); ok {
					add(sc)
				}
			}
		}
	}
	return out
}

// matchBut reports whether c satisfies every condition of s but those on
// the claims named except.
func (s *selector) matchBut(c *idp.Claims, except ...string) bool {
	if s.issuer != "" && c.Issuer != s.issuer {
		return false
	}
	if len(s.subjects) > 0 && !slices.Contains(s.subjects, c.Subject) {
		return false
	}
	for _, kv := range s.claims {
		if !slices.Contains(except, kv[0]) && !claimHas(kv[0], c.MapClaims[kv[0]], kv[1]) {
			return false
		}
	}
	return true
}
