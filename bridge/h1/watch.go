package h1

import "time"

// watchAfter is how long a request runs before its connection is watched
// for the client going away, which then cancels the request's context, as
// net/http's background read does at once. Watching costs a goroutine and
// two system calls: a request that is answered sooner (most are, even on
// a loaded machine) never pays for it, and a call whose client went away
// holds its slot at most this long.
const watchAfter = 500 * time.Millisecond

// aLongTimeAgo is a deadline that has passed: it wakes a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// armWatch watches the connection for the client going away once the
// request has run for watchAfter; its body has been read.
func (cn *conn) armWatch() {
	cn.mu.Lock()
	cn.watchOK = cn.r == cn.w
	cn.mu.Unlock()
	after := cn.srv.watchAfter
	if after == 0 {
		after = watchAfter
	}
	if cn.watchT == nil {
		cn.watchT = time.AfterFunc(after, cn.startWatch)
		return
	}
	cn.watchT.Reset(after)
}

func (cn *conn) startWatch() {
	if f := cn.srv.beforeWatch; f != nil {
		f()
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if !cn.active || cn.watching || !cn.watchOK || cn.state == stateClosed {
		return // done, or the client sent more already: it is there
	}
	if !cn.rdl.Equal(cn.rdlSet) {
		cn.c.SetReadDeadline(cn.rdl)
		cn.rdlSet = cn.rdl
	}
	cn.watching, cn.aborted, cn.watchN = true, false, 0
	cn.watchEnd = make(chan struct{})
	go cn.watch(cn.watchEnd)
}

// watch reads one byte: the next request's first, or the end of the
// connection, which cancels the request.
func (cn *conn) watch(end chan struct{}) {
	n, err := cn.c.Read(cn.watchB[:])
	cn.mu.Lock()
	cn.watchN = n
	if n == 0 && err != nil && !cn.aborted {
		cn.gone = true
		if cn.cancel != nil {
			cn.cancel()
		}
	}
	cn.mu.Unlock()
	close(end)
}

// endWatch stops watching the connection once the handler is done and
// keeps the byte the watch read, if any.
func (cn *conn) endWatch() {
	if cn.watchT != nil {
		cn.watchT.Stop()
	}
	cn.mu.Lock()
	// A timer that fired before Stop may still run startWatch, late: it
	// must not start a watch during the next request (whose body the
	// watch would read from) until that request arms its own.
	cn.active, cn.cancel, cn.watchOK = false, nil, false
	watching, end := cn.watching, cn.watchEnd
	if watching {
		cn.aborted = true
		cn.c.SetReadDeadline(aLongTimeAgo)
		cn.rdlSet = aLongTimeAgo
	}
	cn.mu.Unlock()
	if !watching {
		return
	}
	<-end
	cn.mu.Lock()
	cn.watching = false
	if cn.watchN == 1 { // the buffer is empty: the body was read whole
		cn.buf[0] = cn.watchB[0]
		cn.r, cn.w = 0, 1
	}
	cn.mu.Unlock()
}
