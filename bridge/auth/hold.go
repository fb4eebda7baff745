package auth

import (
	"context"
	"net/http"
	"time"
)

// Changed is called when a provider's key set dropped a key: open
// connections check their callers again (Hold).
func (a *Auth) Changed() { a.notify() }

// notify wakes every Hold.
func (a *Auth) notify() {
	ch := make(chan struct{})
	if old := a.changed.Swap(&ch); old != nil {
		close(*old)
	}
}

// Hold waits while the credentials of r, which authenticated as id, still
// do: it returns "" when ctx is done, or why they stopped (the token
// expired, the identity is gone or changed, the token or key was
// removed), in words for the client. It checks at every change of the
// identities or of a key set, and when id's token expires.
func (a *Auth) Hold(ctx context.Context, r *http.Request, id *Caller) string {
	r = r.WithContext(ctx)
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	for {
		changed := *a.changed.Load()
		expiry.Stop()
		var expired <-chan time.Time
		if !id.expires.IsZero() {
			expiry.Reset(time.Until(id.expires))
			expired = expiry.C
		}
		select {
		case <-ctx.Done():
			return ""
		case <-changed:
		case <-expired:
		}
		now, fail := a.Authenticate(r)
		switch {
		case ctx.Err() != nil:
			return ""
		case fail != OK:
			return fail.Message()
		case now.print != id.print:
			return "the caller's identity or its permissions changed; connect again"
		}
		id = now
	}
}
