package bridge

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	lean "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/internal/unary"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// batch runs the members of the batch array b concurrently, at most
// BatchParallelism at a time, and appends the array of their replies in
// member order. When every member is a notification it appends nothing.
func (s *Server) batch(ctx context.Context, t *table, reqs []wire.Request, dst []byte) []byte {
	s.opts.Metrics.batch(len(reqs))
	budget := s.newBudget()
	replies := make([][]byte, len(reqs))
	rest := s.batchDirect(ctx, t, reqs, replies, budget)
	var next atomic.Int64
	work := func() {
		for {
			n := int(next.Add(1) - 1)
			if n >= len(rest) {
				return
			}
			i := rest[n]
			replies[i] = s.callWithin(ctx, t, &reqs[i], nil, budget)
		}
	}
	var wg sync.WaitGroup
	for range min(len(rest), s.opts.BatchParallelism) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()

	size := 2
	for _, rep := range replies {
		size += len(rep) + 1
	}
	start := len(dst)
	dst = append(slices.Grow(dst, size), '[')
	for i, rep := range replies {
		replies[i] = nil // for the collector, once copied
		if len(rep) == 0 {
			continue
		}
		if len(dst) > start+1 {
			dst = append(dst, ',')
		}
		dst = append(dst, rep...)
	}
	if len(dst) == start+1 {
		return dst[:start] // only notifications: nothing to reply
	}
	return append(dst, ']')
}

// batchDirect runs the members of a batch that can go through a direct
// path (DirectConn) in Groups of at most BatchParallelism calls, whose
// frames leave together and whose waiter wakes once, and puts their
// replies in replies. It returns the indexes of the other members.
func (s *Server) batchDirect(ctx context.Context, t *table, reqs []wire.Request, replies [][]byte, budget *atomic.Int64) []int {
	if t == nil || !t.direct {
		rest := make([]int, len(reqs))
		for i := range rest {
			rest[i] = i
		}
		return rest
	}
	var (
		rest    []int
		g       lean.Group
		started = make([]startedCall, 0, min(len(reqs), s.opts.BatchParallelism))
		index   = make([]int, 0, cap(started))
		md      = outgoingMD(ctx)
	)
	callCtx, cancel := context.WithTimeout(ctx, s.callTimeout(ctx))
	defer cancel()
	finish := func() {
		g.Wait(callCtx)
		for k := range started {
			replies[index[k]] = s.finishDirect(ctx, callCtx, t, &started[k], budget)
		}
		started, index = started[:0], index[:0]
	}
	for i := range reqs {
		started = started[:len(started)+1]
		if !s.startDirect(callCtx, t, &reqs[i], md, budget, &g, &started[len(started)-1]) {
			started = started[:len(started)-1]
			rest = append(rest, i)
			continue
		}
		index = append(index, i)
		if len(started) == cap(started) {
			finish()
		}
	}
	finish()
	return rest
}
