package backend

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Outlier configures the outlier detection of a backend: an address whose
// last ConsecutiveFailures calls failed is ejected, out of the rotation of
// both call paths, for EjectionTime times the number of times it has been
// ejected since its last success, up to MaxEjectionTime; never more than
// MaxEjectionPercent of the addresses at once (but one of two or more),
// never the last one.
//
// A failure is a call that ended with one of Codes from the address, a
// connection failure or reset on it, or a unary call that got no
// response headers from it before its deadline; an application's answer
// with another code is a success, as is any answer. A call cancelled by
// its client, one never sent (tried on another address), or one the
// bridge refused (a response over its budget) counts neither way.
type Outlier struct {
	// ConsecutiveFailures is how many failures in a row eject an
	// address; 0 turns outlier detection off.
	ConsecutiveFailures int
	// Codes are the statuses from the backend that count as failures.
	Codes []codes.Code
	// EjectionTime is the ejection's base time; MaxEjectionTime caps it
	// (as Envoy's max_ejection_time, the larger of the two does).
	EjectionTime, MaxEjectionTime time.Duration
	// MaxEjectionPercent bounds the share of the addresses ejected at
	// once, 0 to 100.
	MaxEjectionPercent int
}

// Outlier detection's defaults.
const (
	DefaultConsecutiveFailures = 5
	DefaultEjectionTime        = 30 * time.Second
	DefaultMaxEjectionTime     = 5 * time.Minute
	DefaultMaxEjectionPercent  = 50
)

// DefaultOutlier returns the defaults: 5 failures in a row, of
// UNAVAILABLE, eject an address for 30 s (times its ejections, up to
// 5 min), at most half of the addresses at once.
func DefaultOutlier() Outlier {
	return Outlier{ConsecutiveFailures: DefaultConsecutiveFailures, Codes: []codes.Code{codes.Unavailable},
		EjectionTime: DefaultEjectionTime, MaxEjectionTime: DefaultMaxEjectionTime, MaxEjectionPercent: DefaultMaxEjectionPercent}
}

// ErrOutlier is the error of Dial for Outlier settings out of range.
var ErrOutlier = errors.New("backend: outlier detection")

// check reports what of o is out of range.
func (o Outlier) check() error {
	switch {
	case o.ConsecutiveFailures < 0:
		return fmt.Errorf("%w: consecutive failures %d: want 0 (off) or more", ErrOutlier, o.ConsecutiveFailures)
	case o.ConsecutiveFailures == 0:
		return nil
	case o.EjectionTime <= 0:
		return fmt.Errorf("%w: ejection time %s: want more than 0", ErrOutlier, o.EjectionTime)
	case o.MaxEjectionPercent < 0 || o.MaxEjectionPercent > 100:
		return fmt.Errorf("%w: max ejection percent %d: want 0 to 100", ErrOutlier, o.MaxEjectionPercent)
	}
	for _, c := range o.Codes {
		if c == codes.OK || c > codes.Unauthenticated {
			return fmt.Errorf("%w: code %d: want a code from 1 to 16", ErrOutlier, c)
		}
	}
	return nil
}

// An outcome is what a call's end tells of its address.
type outcome struct {
	kind   outcomeKind
	reason string // why it failed
	// deadline is set for a unary call that got no response headers
	// before its deadline.
	deadline bool
}

type outcomeKind uint8

const (
	neutral  outcomeKind = iota // not the address's doing, or not the detector's concern
	answered                    // the address answered with no failing code: a success
	failed                      // the address failed the call
)

// begin counts a call sent to a, for either path; unary (a call whose
// request is all sent at once and is answered once: unary and
// server-streaming calls read whole) calls also wait for their answer
// (see stalled). It returns the call's start on the pool's clock.
func (p *pool) begin(a *address, unaryCall bool) int64 {
	a.calls.Add(1)
	a.inFlight.Add(1)
	now := p.now()
	if unaryCall && a.waiting.Add(1) == 1 {
		a.quiet.Store(now)
	}
	return now
}

// end counts the end of a call begun at start on a, and tells the
// detector its outcome; sample takes its time into the backend's recent
// latency.
func (p *pool) end(a *address, unaryCall, sample bool, start int64, o outcome) {
	a.inFlight.Add(-1)
	if unaryCall {
		a.waiting.Add(-1)
	}
	switch o.kind {
	case answered:
		now := p.now()
		a.quiet.Store(now)
		if unaryCall && sample {
			p.sample(now - start)
		}
		if a.failures.Load() != 0 {
			a.failures.Store(0)
		}
		if a.ejections.Load() != 0 && !a.isEjected() {
			a.ejections.Store(0)
		}
	case failed:
		p.failed(a, start, o)
	}
}

// failed counts a failure of a call begun at start on a, and ejects a
// when it is its ConsecutiveFailures-th in a row, or when it is a
// deadline a met without answering anything since the call was sent
// while other addresses answered (frozen, or cut off: its calls in
// flight all fail the same way, and one round of them is enough).
func (p *pool) failed(a *address, start int64, o outcome) {
	od := &p.opts.Outlier
	if od.ConsecutiveFailures == 0 || a.draining.Load() || a.isEjected() {
		return
	}
	n := a.failures.Add(1)
	if int(n) >= od.ConsecutiveFailures || o.deadline && p.unresponsive(a, start) {
		p.eject(a, int(n), o.reason)
	}
}

// unresponsive reports whether a has answered nothing since start while
// another address of the set answered since.
func (p *pool) unresponsive(a *address, start int64) bool {
	if a.quiet.Load() > start {
		return false
	}
	for _, x := range p.all() {
		if x != a && x.quiet.Load() > start {
			return true
		}
	}
	return false
}

// eject takes a out of the rotation, unless the set allows no more
// ejections; its failures keep counting then, and the next one tries
// again.
func (p *pool) eject(a *address, failures int, reason string) {
	od := &p.opts.Outlier
	p.mu.Lock()
	if p.closed || a.draining.Load() || a.isEjected() || !slices.Contains(p.addrs, a) {
		p.mu.Unlock()
		return
	}
	n, out := len(p.addrs), 0
	for _, x := range p.addrs {
		if x.isEjected() {
			out++
		}
	}
	limit := n * od.MaxEjectionPercent / 100
	if n >= 2 {
		limit = max(limit, 1)
	}
	if out >= min(limit, n-1) {
		p.mu.Unlock()
		return
	}
	k := a.ejections.Add(1)
	d := min(time.Duration(k)*od.EjectionTime, max(od.MaxEjectionTime, od.EjectionTime))
	a.until.Store(p.now() + int64(d))
	a.failures.Store(0)
	a.ejected.Add(1)
	a.back = time.AfterFunc(d, func() { p.restore(a, d) })
	p.rebuildLocked()
	p.mu.Unlock()
	p.log.Warn("backend address ejected: out of the rotation", "backend", p.name, "address", a.addr,
		"failures", failures, "reason", reason, "for", d.String())
}

// restore brings a, ejected for d, back into the rotation.
func (p *pool) restore(a *address, d time.Duration) {
	p.mu.Lock()
	if !a.isEjected() {
		p.mu.Unlock()
		return
	}
	a.until.Store(0)
	a.failures.Store(0)
	a.back = nil
	p.rebuildLocked()
	closed := p.closed || a.draining.Load()
	p.mu.Unlock()
	if !closed {
		p.log.Info("backend address back in the rotation", "backend", p.name, "address", a.addr, "ejected_for", d.String())
	}
}

// isFailure reports whether code, from the backend, is one of Codes.
func (p *pool) isFailure(code codes.Code) bool {
	return slices.Contains(p.opts.Outlier.Codes, code)
}

// directOutcome is what the end of c, a call of the direct path, tells
// of its address.
func (p *pool) directOutcome(c *Call) outcome {
	if c.Err == nil {
		return outcome{kind: answered}
	}
	if c.Unsent() {
		return outcome{}
	}
	code := status.Code(c.Err)
	if c.Remote {
		if p.isFailure(code) {
			return outcome{kind: failed, reason: codeReason(code)}
		}
		return outcome{kind: answered}
	}
	switch {
	case code == codes.Unavailable:
		return outcome{kind: failed, reason: "connection failure: " + status.Convert(c.Err).Message()}
	case code == codes.DeadlineExceeded && !c.Answered():
		return outcome{kind: failed, reason: noHeaders, deadline: true}
	case code == codes.Canceled, code == codes.DeadlineExceeded:
		return outcome{}
	case c.Answered():
		return outcome{kind: answered} // refused by the bridge (too large), or malformed: the address answered
	}
	return outcome{}
}

// grpcOutcome is what the end of a call of grpc-go's path tells of its
// address; unaryCall for a unary call, whose deadline passing without an
// answer is a failure (a stream's server may say nothing for long).
func (p *pool) grpcOutcome(di balancer.DoneInfo, unaryCall bool) outcome {
	if di.Err == nil {
		if di.BytesReceived {
			return outcome{kind: answered}
		}
		return outcome{} // not sent: grpc-go picks again
	}
	code := status.Code(di.Err)
	switch {
	case code == codes.Canceled:
		return outcome{}
	case di.BytesReceived: // the response began: its status is the address's
		if p.isFailure(code) {
			return outcome{kind: failed, reason: codeReason(code)}
		}
		return outcome{kind: answered}
	case code == codes.Unavailable && !unprocessed(di.Err):
		return outcome{kind: failed, reason: "connection failure: " + status.Convert(di.Err).Message()}
	case code == codes.DeadlineExceeded && unaryCall:
		return outcome{kind: failed, reason: noHeaders, deadline: true}
	}
	return outcome{}
}

const noHeaders = "no response headers before the deadline"

func codeReason(c codes.Code) string { return "status " + c.String() + " from the address" }

// unprocessed reports whether err is grpc-go's status for a stream the
// backend did not process, which grpc-go tries again transparently on
// another connection (the stream was above the last one of a GOAWAY, or
// refused): the messages of its transport (errStreamDrain,
// handleRSTStream), as the direct client's unsent calls.
func unprocessed(err error) bool {
	msg := status.Convert(err).Message()
	return msg == "the connection is draining" || msg == rstPrefix+"REFUSED_STREAM"
}
