package bridge

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
)

// batch runs the members of the batch array b concurrently, at most
// BatchParallelism at a time, and appends the array of their replies in
// member order. When every member is a notification it appends nothing.
func (s *Server) batch(ctx context.Context, t *table, b, dst []byte) []byte {
	members := splitArray(b)
	switch {
	case len(members) == 0:
		return appendError(dst, nullID, invalidRequest("empty batch"))
	case len(members) > s.opts.MaxBatchSize:
		return appendError(dst, nullID, invalidRequest("a batch of "+strconv.Itoa(len(members))+
			" requests is larger than max_batch_size ("+strconv.Itoa(s.opts.MaxBatchSize)+"); none of it ran"))
	}
	if out, ok := s.admit(ctx, dst, len(members)); !ok {
		return out
	}
	s.opts.Metrics.batch(len(members))
	budget := s.newBudget()
	reqs := make([]request, len(members))
	for i, m := range members {
		if m[0] == '{' {
			reqs[i] = parseRequest(m)
		} else {
			reqs[i] = request{invalid: invalidRequest("a batch member must be a request object")}
		}
	}
	replies := make([][]byte, len(reqs))
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(reqs) {
				return
			}
			replies[i] = s.callWithin(ctx, t, &reqs[i], nil, budget)
		}
	}
	var wg sync.WaitGroup
	for range min(len(reqs), s.opts.BatchParallelism) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()

	start := len(dst)
	dst = append(dst, '[')
	for _, rep := range replies {
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

// splitArray returns the members of the JSON array b, which scanValue has
// accepted.
func splitArray(b []byte) [][]byte {
	var members [][]byte
	i := skipSpace(b, 1)
	if b[i] == ']' {
		return nil
	}
	for {
		end := skipValue(b, i)
		members = append(members, b[i:end])
		i = skipSpace(b, end)
		if b[i] == ']' {
			return members
		}
		i = skipSpace(b, i+1)
	}
}
