package auth

import "time"

// A Caller is an authenticated identity, as one credential authenticates
// as it: static tokens and certificates share their identity's, a JWT
// has its own, with its expiry and claim metadata. It is a
// dispatch.Caller.
type Caller struct {
	*identity
	expires  time.Time // when its token stops verifying (exp and the clock skew); zero for static credentials
	metadata []string  // claim metadata: key, value, key, value...
	subject  string    // a JWT's issuer and subject (see Principal), "" for static credentials
}

// Name is the identity's name.
func (id *identity) Name() string { return id.name }

// Index is the identity's place among every identity its Auth has known,
// for state kept per identity in slices (see Auth.Len): the same name
// keeps its index across reloads.
func (id *identity) Index() int { return id.index }

// Allows reports whether id may call the method named name: a nil id
// (authentication off) may call anything.
func (id *Caller) Allows(name string) bool {
	if id == nil {
		return true
	}
	return id.allows(name)
}

func (id *identity) allows(name string) bool {
	if id.all {
		return true
	}
	for _, p := range id.allow {
		if p.match(name) {
			return true
		}
	}
	return false
}

// Metadata returns the claim metadata of id, keys and values in turn
// (key, value, key, value...); the caller must not change it.
func (id *Caller) Metadata() []string { return id.metadata }

// Principal names the caller more finely than its identity, which many
// callers may share: a JWT's issuer and subject, or, for static
// credentials and a token without sub, the identity's name. Sessions are
// bound to it.
func (id *Caller) Principal() string {
	if id.subject != "" {
		return id.subject
	}
	return id.name
}

// Expires is when id's token stops verifying (its exp, and the clock
// skew); zero for a static credential.
func (id *Caller) Expires() time.Time { return id.expires }
