package bridge

// This file is the front door's steps 5 to 7 (front.go lists them all) and
// the engine: answer, which POST / and MCP's tool calls share once a body
// is read, parses it once, fills its Exchange, takes its in-flight slot
// and rate limit, and runs it, or says it is to be answered live.

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/live"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// enter counts the request of x, whose body has been read, among the
// requests in flight (step 6), or refuses it when MaxInFlight are
// already being answered, or when the caller's rate limit has no token
// left. The caller must call leave when enter returns nil.
func (s *Server) enter(x *exchange) *refusal {
	if !s.takeSlot() {
		return s.inFlightRefusal()
	}
	if lim := s.guard.limiter; lim != nil {
		if spent, wait := lim.Spent(rateIdentity(x.caller())); spent {
			s.guard.inFlight.Add(-1)
			return s.rateRefusal(wait)
		}
	}
	s.opts.Metrics.RequestStarted()
	return nil
}

// takeSlot takes one of the MaxInFlight slots, shared by POST / requests
// and WebSocket frames, or returns false when none is free.
func (s *Server) takeSlot() bool {
	if s.guard.inFlight.Add(1) > int64(s.opts.MaxInFlight) {
		s.guard.inFlight.Add(-1)
		return false
	}
	return true
}

func (s *Server) inFlightRefusal() *refusal {
	return tooMany("in_flight", "the bridge is answering as many requests as max_in_flight ("+strconv.Itoa(s.opts.MaxInFlight)+"); retry later", time.Second)
}

func (s *Server) leave() {
	s.guard.inFlight.Add(-1)
	s.guard.served.Add(1)
	s.opts.Metrics.RequestDone()
}

// admit takes n calls' worth of the rate limit of id (step 7), or
// returns the refusal when there is not enough left: nothing of the
// message runs then. HTTP, MCP and WebSocket all ask it, after parsing a
// message and before running it: over HTTP POST the refusal is 429, over
// WebSocket a RESOURCE_EXHAUSTED error for each call of the frame. ctx
// bounds the wait for a shared store (see ratelimit.Limiter).
func (s *Server) admit(ctx context.Context, id *auth.Caller, n int) *refusal {
	lim := s.guard.limiter
	if lim == nil {
		return nil
	}
	if n > s.opts.RateBurst {
		return tooMany("rate_limit", "a batch of "+strconv.Itoa(n)+" calls is more than rate_burst ("+strconv.Itoa(s.opts.RateBurst)+") allows at once", time.Second)
	}
	if ok, wait := lim.Allow(ctx, rateIdentity(id), n); !ok {
		return s.rateRefusal(wait)
	}
	return nil
}

func (s *Server) rateRefusal(wait time.Duration) *refusal {
	return tooMany("rate_limit", "the caller's rate limit (rate_limit "+strconv.FormatFloat(s.opts.RateLimit, 'g', -1, 64)+" calls a second) is used up; retry later", wait)
}

// answer is what POST / and MCP's tool calls ask once the body of a
// request of x is read: the body parsed (the one look at it: one call or
// a batch), steps 5 to 7, and the engine's reply, appended to out's
// buffer; empty for notifications alone. h and peer are the request's
// headers and client address. On a refusal nothing ran and no slot is
// held; otherwise the request holds its in-flight slot, and the caller
// calls leave once the reply is written. r is POST /'s request (nil for
// MCP's tool calls): a single call of a stream it asks to be answered
// live comes back with its form and no reply, for the caller to serve
// (live.go), and a single call's reply comes with the backend's response
// metadata (md) when response headers are configured (Metadata).
func (s *Server) answer(ctx context.Context, x *exchange, h http.Header, peer string, body []byte, r *http.Request,
	msg *wire.Message, out *bytes.Buffer) (reply []byte, md dispatch.ResponseMetadata, live liveForm, ref *refusal) {
	e := wire.Parse(body, s.opts.MaxBatchSize, msg)
	if ref = s.exchangeOf(h, peer, x); ref != nil {
		return nil, md, notLive, ref
	}
	// The slot is taken for the work alone: the caller is authenticated
	// and its body read. It is held until the reply is written.
	if ref = s.enter(x); ref != nil {
		return nil, md, notLive, ref
	}
	if e != nil {
		return wire.AppendError(out.AvailableBuffer(), wire.NullID, e), md, notLive, nil
	}
	if ref = s.admit(ctx, x.caller(), msg.Len()); ref != nil {
		s.leave()
		return nil, md, notLive, ref
	}
	if r == nil { // MCP: its replies carry no headers
		reply, _ = s.run(ctx, msg, &x.Exchange, out.AvailableBuffer(), false)
		return reply, md, notLive, nil
	}
	if live = s.liveOf(r, msg); live != notLive {
		return nil, md, live, nil
	}
	reply, md = s.run(ctx, msg, &x.Exchange, out.AvailableBuffer(), s.md.capture())
	return reply, md, notLive, nil
}

// liveOf is the live form the request r offers for msg (not the calls of
// /mcp): a single call with an id whose Accept asks for one; live.None
// for everything else, answered as ever. Whether the call is answered
// live is the engine's to ask of live (a call of a server or bidi
// stream), once the method is known.
func (s *Server) liveOf(r *http.Request, msg *wire.Message) liveForm {
	if msg.Batch || msg.Single.ID == nil || msg.Single.Invalid != nil || r.URL.Path != "/" {
		return live.None
	}
	accept := r.Header["Accept"]
	if len(accept) == 0 {
		return live.None
	}
	return live.Accept(accept)
}
