package bridge

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// outcome is what run learned about a call, for its metrics and log line.
type outcome struct {
	h    *handle      // the method called, nil if the name matched none
	code mapping.Code // the code of a notification, which has no reply to read it from
	// reserved is what the response took of the batch's budget as it
	// arrived, for capReply to settle; overBudget says it was refused
	// then, for not fitting in what was left.
	reserved   int64
	overBudget bool
}

// call runs one request and appends its reply; a notification appends
// nothing. Around run it enforces MaxResponseBytes and records the call's
// metrics and access log line.
func (s *Server) call(ctx context.Context, t *table, r *wire.Request, dst []byte) []byte {
	return s.callWithin(ctx, t, r, dst, nil)
}

// callWithin is call for a member of a batch, whose replies share budget
// (nil for a single call).
func (s *Server) callWithin(ctx context.Context, t *table, r *wire.Request, dst []byte, budget *atomic.Int64) []byte {
	observing := s.observing()
	var began time.Time
	if observing {
		began = s.startCall()
	}
	start := len(dst)
	var o outcome
	out := s.run(ctx, t, r, dst, budget, &o)
	return s.settle(ctx, out, start, r, o, budget, began)
}

// settle enforces MaxResponseBytes on the reply of r appended to out at
// start and records the call; o.code is the code of a notification, which
// has no reply to read it from.
func (s *Server) settle(ctx context.Context, out []byte, start int, r *wire.Request, o outcome, budget *atomic.Int64, began time.Time) []byte {
	if len(out) > start {
		o.code = replyCode(out[start:], r)
	}
	out, o.code = s.capReply(out, start, r, o, budget)
	if s.observing() {
		s.observe(ctx, r, o.h, o.code, began)
	}
	return out
}
