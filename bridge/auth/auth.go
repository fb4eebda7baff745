package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
)

// An Identity is a caller the bridge knows: the credentials that
// authenticate as it and the methods it may call.
type Identity struct {
	// Name is passed to the backend as metadata and appears in logs.
	// It must be unique and not empty.
	Name string
	// Tokens are the SHA-256 digests of the bearer tokens or API keys of
	// this identity, each written "sha256:<64 hex digits>" (see
	// `printf %s TOKEN | sha256sum`). Only digests are kept, never the secrets.
	Tokens []string
	// ClientCerts are the verified client certificates (mTLS) that
	// authenticate as this identity, each "cn:NAME" (subject common name),
	// "dns:NAME", "uri:URI" or "email:ADDRESS" (subject alternative names).
	ClientCerts []string
	// JWT, if not nil, selects the verified JWTs that authenticate as this
	// identity: the first identity, in order, whose selector matches a
	// token is its caller's.
	JWT *Selector
	// Allow lists the JSON-RPC method names this identity may call, as
	// patterns where * matches any run of characters, dots included:
	// "billing.v1.*", "*.Get*", "helloworld.Greeter.SayHello", "*".
	// Empty means nothing but rpc.discover, which then lists nothing.
	Allow []string
}

// A Selector matches verified JWTs by their claims. Its zero value
// matches every verified token.
type Selector struct {
	// Issuer, if set, is the iss of the tokens it matches (one of the
	// providers').
	Issuer string
	// Subjects, if not empty, lists the sub values it matches.
	Subjects []string
	// Claims are claims every matched token carries: a string claim
	// equal to the value (for scope and scp, a space-delimited list
	// holding it), an array claim holding it, or a number or boolean
	// written as the value.
	Claims map[string]string
}

// A Provider is an identity provider whose JWTs authenticate callers.
type Provider struct {
	*idp.Provider
	// ClaimsMetadata maps claims to the gRPC metadata keys under which a
	// caller's values of them reach the backends (string claims of
	// printable ASCII only); a client's own values under those keys are
	// always dropped.
	ClaimsMetadata map[string]string
}

// Unmatched is the name of the caller of a verified JWT that no
// identity's selector matches: it may call nothing.
const Unmatched = "(no identity)"

// ErrConfig is wrapped by every error New and Reload return.
var ErrConfig = errors.New("bridge: invalid authentication settings")

// Auth authenticates HTTP requests by bearer token, API key, JWT or
// client certificate and knows what each identity may call. Its
// identities are one immutable value that Reload swaps; it is safe for
// concurrent use. Its zero value is not usable, call New.
type Auth struct {
	cur       atomic.Pointer[snapshot]
	providers []*Provider
	byIssuer  map[string]*Provider
	claimKeys []string // every metadata key of ClaimsMetadata

	mu      sync.Mutex     // Reload, and indexes
	indexes map[string]int // index by identity name, stable across reloads

	changed atomic.Pointer[chan struct{}] // closed at the next change
}

// snapshot is one set of identities: immutable once built.
type snapshot struct {
	ids       []*identity
	tokens    []tokenEntry
	certs     map[certKey]*identity
	selectors []*identity // those with a JWT selector, in order
	scoped    bool        // some selector asks for a scope (scope or scp)
	unmatched *identity
	cache     *tokenCache
}

// identity is an Identity prepared for requests.
type identity struct {
	name  string
	index int // stable across reloads: rate limits keep their state
	allow []pattern
	all   bool // some pattern is "*"
	sel   *selector
	plain *Caller  // the Caller of its static tokens and certificates
	print string   // its name and patterns, to tell a changed identity
	views viewSlot // what it may call of the last table it was asked of
}

type tokenEntry struct {
	sum [sha256.Size]byte
	id  *identity
}

type certKey struct{ kind, value string }

// New checks ids and prepares them, with the JWTs of providers verified
// as callers too. It refuses empty or duplicate names, malformed
// digests, a token or certificate given to two identities, empty
// patterns, selectors naming no provider's issuer, and two providers of
// one issuer.
func New(ids []Identity, providers ...*Provider) (*Auth, error) {
	a := &Auth{byIssuer: map[string]*Provider{}, indexes: map[string]int{Unmatched: 0}}
	for _, p := range providers {
		if a.byIssuer[p.Issuer()] != nil {
			return nil, fmt.Errorf("%w: issuer %s is configured twice", ErrConfig, p.Issuer())
		}
		a.byIssuer[p.Issuer()] = p
		a.providers = append(a.providers, p)
		for _, k := range p.ClaimsMetadata {
			if !slices.Contains(a.claimKeys, k) {
				a.claimKeys = append(a.claimKeys, k)
			}
		}
	}
	ch := make(chan struct{})
	a.changed.Store(&ch)
	if err := a.Reload(ids); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload checks ids as New does and, if they are good, swaps them in:
// requests authenticated from then on, and those whose tokens come out
// of the cache, get the new identities; Hold sees the change. Bad ids
// keep the identities there were.
func (a *Auth) Reload(ids []Identity) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.build(ids)
	if err != nil {
		return err
	}
	a.cur.Store(s)
	a.notify()
	return nil
}

// build prepares ids; a.mu is held.
func (a *Auth) build(ids []Identity) (*snapshot, error) {
	s := &snapshot{certs: make(map[certKey]*identity), cache: newTokenCache(defaultCacheEntries, defaultCacheBytes)}
	s.unmatched = &identity{name: Unmatched, index: a.indexes[Unmatched], print: "\x00"}
	s.unmatched.plain = &Caller{identity: s.unmatched}
	seen := make(map[string]bool)
	fresh := map[string]int{} // indexes of names new in ids, given if they load
	for i, in := range ids {
		if in.Name == "" {
			return nil, fmt.Errorf("%w: identity %d has no name", ErrConfig, i+1)
		}
		if in.Name == Unmatched {
			return nil, fmt.Errorf("%w: identity %d: the name %q is reserved", ErrConfig, i+1, Unmatched)
		}
		if seen[in.Name] {
			return nil, fmt.Errorf("%w: identity %q is defined twice", ErrConfig, in.Name)
		}
		seen[in.Name] = true
		index, ok := a.indexes[in.Name]
		if !ok {
			index = len(a.indexes) + len(fresh)
			fresh[in.Name] = index
		}
		id := &identity{name: in.Name, index: index, print: in.Name + "\x00" + strings.Join(in.Allow, "\x00")}
		id.plain = &Caller{identity: id}
		for _, p := range in.Allow {
			if p == "" {
				return nil, fmt.Errorf("%w: identity %q: empty method pattern", ErrConfig, in.Name)
			}
			id.allow = append(id.allow, compilePattern(p))
			id.all = id.all || p == "*"
		}
		for _, tok := range in.Tokens {
			sum, err := parseDigest(tok)
			if err != nil {
				return nil, fmt.Errorf("%w: identity %q: %w", ErrConfig, in.Name, err)
			}
			for _, e := range s.tokens {
				if e.sum == sum {
					return nil, fmt.Errorf("%w: identities %q and %q share a token", ErrConfig, e.id.name, in.Name)
				}
			}
			s.tokens = append(s.tokens, tokenEntry{sum: sum, id: id})
		}
		for _, c := range in.ClientCerts {
			kind, value, ok := strings.Cut(c, ":")
			if !ok || value == "" || (kind != "cn" && kind != "dns" && kind != "uri" && kind != "email") {
				return nil, fmt.Errorf("%w: identity %q: client certificate %q is not cn:, dns:, uri: or email: followed by a name", ErrConfig, in.Name, c)
			}
			k := certKey{kind, value}
			if other := s.certs[k]; other != nil {
				return nil, fmt.Errorf("%w: identities %q and %q share client certificate %q", ErrConfig, other.name, in.Name, c)
			}
			s.certs[k] = id
		}
		if in.JWT != nil {
			sel, err := a.selector(in.JWT)
			if err != nil {
				return nil, fmt.Errorf("%w: identity %q: %w", ErrConfig, in.Name, err)
			}
			id.sel = sel
			s.selectors = append(s.selectors, id)
			for _, kv := range sel.claims {
				s.scoped = s.scoped || kv[0] == "scope" || kv[0] == "scp"
			}
		}
		s.ids = append(s.ids, id)
	}
	for name, i := range fresh {
		a.indexes[name] = i
	}
	return s, nil
}

func parseDigest(s string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != hex.EncodedLen(sha256.Size) {
		return sum, errors.New(`a token must be given as "sha256:" and 64 hex digits of its SHA-256 digest`)
	}
	if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
		return sum, errors.New(`a token digest must be 64 hex digits after "sha256:"`)
	}
	return sum, nil
}

// Authenticate finds the caller of r. A token, when sent, decides alone:
// a wrong one is refused even with a good certificate. A token that is
// no static one and has the form of a JWT is verified by the provider
// its iss names; until that provider's keys have loaded it fails with
// KeysNotLoaded.
func (a *Auth) Authenticate(r *http.Request) (*Caller, Failure) {
	token, fail := credential(r.Header)
	if fail != OK {
		return nil, fail
	}
	s := a.cur.Load()
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		if id := s.byToken(sum); id != nil {
			return id.plain, OK
		}
		if len(a.providers) == 0 || !idp.LooksLikeJWT(token) {
			return nil, Invalid
		}
		return a.byJWT(r.Context(), s, token, sum)
	}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, Missing
	}
	if id := s.byCert(r.TLS.VerifiedChains[0][0]); id != nil {
		return id.plain, OK
	}
	return nil, Invalid
}

// byToken compares the digest sum with every known digest in constant
// time, so the time taken says nothing about which matched.
func (s *snapshot) byToken(sum [sha256.Size]byte) *identity {
	match := -1
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], s.tokens[i].sum[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil
	}
	return s.tokens[match].id
}

// byCert maps a verified client certificate to its identity: by subject
// common name first, then by each DNS, URI and email alternative name.
func (s *snapshot) byCert(c *x509.Certificate) *identity {
	if id := s.certs[certKey{"cn", c.Subject.CommonName}]; id != nil && c.Subject.CommonName != "" {
		return id
	}
	for _, n := range c.DNSNames {
		if id := s.certs[certKey{"dns", n}]; id != nil {
			return id
		}
	}
	for _, u := range c.URIs {
		if id := s.certs[certKey{"uri", u.String()}]; id != nil {
			return id
		}
	}
	for _, e := range c.EmailAddresses {
		if id := s.certs[certKey{"email", e}]; id != nil {
			return id
		}
	}
	return nil
}

// Len is the number of identity indexes given so far: every Index is
// below it. It grows when a reload brings new names.
func (a *Auth) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.indexes)
}

// ClaimKeys are the metadata keys claims travel under (every provider's
// ClaimsMetadata): a client's own values under them are dropped.
func (a *Auth) ClaimKeys() []string { return a.claimKeys }

// Issuers lists the providers' issuers, in order.
func (a *Auth) Issuers() []string {
	out := make([]string, len(a.providers))
	for i, p := range a.providers {
		out[i] = p.Issuer()
	}
	return out
}

// Providers returns the identity providers, in order.
func (a *Auth) Providers() []*Provider { return slices.Clone(a.providers) }

// Pending lists the issuers whose keys have never loaded: their tokens
// are answered KeysNotLoaded meanwhile.
func (a *Auth) Pending() []string {
	var out []string
	for _, p := range a.providers {
		if !p.Loaded() {
			out = append(out, p.Issuer())
		}
	}
	return out
}
