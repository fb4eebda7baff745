package backend

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDetector: what ejects an address, for how long, and what does not.
func TestDetector(t *testing.T) {
	fail := outcome{kind: failed, reason: "test"}
	ok := outcome{kind: answered}
	var none outcome
	for _, tc := range []struct {
		name     string
		outcomes []outcome
		ejected  bool
	}{
		{name: "five failures in a row", outcomes: []outcome{fail, fail, fail, fail, fail}, ejected: true},
		{name: "four", outcomes: []outcome{fail, fail, fail, fail}},
		{name: "a success between", outcomes: []outcome{fail, fail, fail, ok, fail, fail}},
		{name: "neutral ends between", outcomes: []outcome{fail, fail, none, fail, none, fail, fail}, ejected: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, LeastRequest, 4)
			a := p.view.Load().ready[1]
			for _, o := range tc.outcomes {
				p.end(a, true, true, p.begin(a, true), o)
			}
			if a.isEjected() != tc.ejected {
				t.Fatalf("ejected %v, want %v", a.isEjected(), tc.ejected)
			}
		})
	}

	t.Run("ejection time grows, up to the maximum, and a success resets it", func(t *testing.T) {
		p := newTestPool(t, LeastRequest, 4)
		p.opts.Outlier.EjectionTime, p.opts.Outlier.MaxEjectionTime = time.Hour, 3*time.Hour
		a := p.view.Load().ready[1]
		for _, want := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 3 * time.Hour, time.Hour} {
			if want == time.Hour && a.ejections.Load() > 0 {
				p.end(a, true, true, p.begin(a, true), ok) // back and answering
			}
			for range 5 {
				p.end(a, true, true, p.begin(a, true), fail)
			}
			got := time.Duration(a.until.Load() - p.now())
			if got > want || got < want-time.Minute {
				t.Fatalf("ejected for %s, want %s", got, want)
			}
			p.restore(a, got)
		}
	})

	t.Run("off", func(t *testing.T) {
		p := newTestPool(t, LeastRequest, 4)
		p.opts.Outlier.ConsecutiveFailures = 0
		a := p.view.Load().ready[1]
		for range 50 {
			p.end(a, true, true, p.begin(a, true), fail)
		}
		if a.isEjected() {
			t.Fatal("ejected with outlier detection off")
		}
	})

	t.Run("a deadline with no answer while the others answer", func(t *testing.T) {
		p := newTestPool(t, LeastRequest, 4)
		v := p.view.Load()
		a := v.ready[1]
		start := p.begin(a, true)
		other := v.ready[2]
		p.end(other, true, true, p.begin(other, true), ok)
		p.end(a, true, true, start, outcome{kind: failed, reason: noHeaders, deadline: true})
		if !a.isEjected() {
			t.Fatal("an address that answered nothing while the others did is not ejected at its first deadline")
		}
	})

	t.Run("a deadline when no address answers", func(t *testing.T) {
		p := newTestPool(t, LeastRequest, 4)
		a := p.view.Load().ready[1]
		p.end(a, true, true, p.begin(a, true), outcome{kind: failed, reason: noHeaders, deadline: true})
		if a.isEjected() {
			t.Fatal("ejected at one deadline while the whole backend is silent")
		}
	})
}

// TestGRPCOutcome: what the end of a grpc-go call tells the detector.
func TestGRPCOutcome(t *testing.T) {
	p := newTestPool(t, LeastRequest, 1)
	for _, tc := range []struct {
		name  string
		di    balancer.DoneInfo
		unary bool
		want  outcomeKind
	}{
		{name: "success", di: balancer.DoneInfo{BytesReceived: true}, want: answered},
		{name: "never sent", di: balancer.DoneInfo{}, want: neutral},
		{name: "UNAVAILABLE from the backend", di: balancer.DoneInfo{Err: status.Error(codes.Unavailable, "down"), BytesReceived: true}, want: failed},
		{name: "NOT_FOUND from the backend", di: balancer.DoneInfo{Err: status.Error(codes.NotFound, "no"), BytesReceived: true}, want: answered},
		{name: "a connection failure", di: balancer.DoneInfo{Err: status.Error(codes.Unavailable, "error reading from server: EOF")}, want: failed},
		{name: "left out by a GOAWAY", di: balancer.DoneInfo{Err: status.Error(codes.Unavailable, "the connection is draining")}, want: neutral},
		{name: "refused", di: balancer.DoneInfo{Err: status.Error(codes.Unavailable, rstPrefix+"REFUSED_STREAM")}, want: neutral},
		{name: "a unary deadline with no answer", di: balancer.DoneInfo{Err: status.Error(codes.DeadlineExceeded, "d")}, unary: true, want: failed},
		{name: "a stream's deadline with no answer", di: balancer.DoneInfo{Err: status.Error(codes.DeadlineExceeded, "d")}, want: neutral},
		{name: "cancelled", di: balancer.DoneInfo{Err: status.Error(codes.Canceled, "c"), BytesReceived: true}, want: neutral},
		{name: "not a status", di: balancer.DoneInfo{Err: errors.New("x")}, want: neutral},
	} {
		if got := p.grpcOutcome(tc.di, tc.unary); got.kind != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got.kind, tc.want)
		}
	}
}
