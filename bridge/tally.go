package bridge

import (
	"hash/maphash"
	"net/http"
	"strings"
	"sync"
)

// tally counts what each key holds at once, such as the request bodies
// being read for one client, under a lock of one of its shards.
type tally struct {
	seed   maphash.Seed
	shards [16]struct {
		mu sync.Mutex
		n  map[string]int32
	}
}

func newTally() *tally {
	t := &tally{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].n = make(map[string]int32)
	}
	return t
}

// take counts one more for key and returns true, unless key already
// holds limit.
func (t *tally) take(key string, limit int) bool {
	sh := &t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := sh.n[key]
	if int(n) >= limit {
		return false
	}
	sh.n[key] = n + 1
	return true
}

// give gives back one that take counted for key.
func (t *tally) give(key string) {
	sh := &t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if n := sh.n[key] - 1; n > 0 {
		sh.n[key] = n
	} else {
		delete(sh.n, key)
	}
}

// clientKey names the client of r for the limits per client: its
// identity, or with authentication off its IP address.
func clientKey(r *http.Request, x *exchange) string {
	if id := x.caller(); id != nil {
		return id.Name()
	}
	addr := r.RemoteAddr
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		return addr[:i] // [::1] keeps its brackets: the key is only compared
	}
	return addr
}
