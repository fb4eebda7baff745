package dispatch

import (
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// The replies of one request share MaxResponseBytes. A batch's budget is
// an atomic counter of the bytes left, which its members take from as
// their responses arrive: the length of a response message, known from
// its gRPC prefix, is taken before the message is kept, and a collected
// stream takes each message as it comes; what does not fit is refused at
// once, before any JSON is built for it. capReply then settles what the
// reply really takes. A single call has no counter: its response is held
// to MaxResponseBytes alone.

// newBudget is the shared reply budget of one batch.
func (e *Engine) newBudget() *atomic.Int64 {
	b := new(atomic.Int64)
	b.Store(e.opts.MaxResponseBytes)
	return b
}

// errOverBudget stands for the refusal of a response that did not fit in
// what was left of its budget; execute turns it into call.over.
var errOverBudget = &mapping.Error{Code: mapping.Code(codes.ResourceExhausted), Message: "over budget"}

// overBudget is the error a call gets instead of a reply that does not
// fit: in MaxResponseBytes for a single call (budget nil), in what the
// other members of its batch left of it otherwise.
func (e *Engine) overBudget(budget *atomic.Int64) *mapping.Error {
	msg := "the reply is larger than max_response_bytes (" + strconv.FormatInt(e.opts.MaxResponseBytes, 10) + " bytes)"
	if budget != nil {
		msg = "the replies of the batch would be larger than max_response_bytes (" + strconv.FormatInt(e.opts.MaxResponseBytes, 10) + " bytes)"
	}
	return wire.Refused(codes.ResourceExhausted, msg)
}

// reservation is what the response of one call has taken of its budget
// so far: of budget, shared by a batch, or of limit for a single call.
type reservation struct {
	budget *atomic.Int64
	limit  int64
	n      int64
}

func (e *Engine) reservation(budget *atomic.Int64) reservation {
	if budget != nil {
		return reservation{budget: budget}
	}
	return reservation{limit: e.opts.MaxResponseBytes}
}

// take takes n more bytes, or returns false and takes nothing when fewer
// are left.
func (r *reservation) take(n int64) bool {
	switch {
	case n <= 0:
		return true
	case r.budget != nil:
		if r.budget.Add(-n) < 0 {
			r.budget.Add(n)
			return false
		}
	case r.n+n > r.limit:
		return false
	}
	r.n += n
	return true
}

// release gives back everything taken.
func (r *reservation) release() {
	if r.budget != nil && r.n > 0 {
		r.budget.Add(r.n)
	}
	r.n = 0
}

// reserved is what the response of c took of its budget as it arrived.
func (c *call) reserved() int64 {
	if c.bc != nil {
		return c.bc.Reserved
	}
	return c.res.n
}

// capReply enforces MaxResponseBytes on the reply of c appended to dst at
// start. A single call's reply may use all of MaxResponseBytes; the
// members of a batch share budget, charged as their responses arrive,
// and a member whose reply does not fit in what is left gets
// RESOURCE_EXHAUSTED instead of its reply, in a buffer of its own. A
// call refused as its response arrived (c.over) gets that error. It
// returns the reply and its JSON-RPC code.
func (e *Engine) capReply(dst []byte, start int, c *call, budget *atomic.Int64) ([]byte, mapping.Code) {
	n := int64(len(dst) - start)
	reserved := c.reserved()
	switch {
	case c.over:
		if budget != nil {
			budget.Add(reserved)
		}
	case budget == nil:
		if n <= e.opts.MaxResponseBytes {
			return dst, c.rec.Code
		}
	case n == 0:
		budget.Add(reserved)
		return dst, c.rec.Code
	default:
		d := n - reserved
		if d <= 0 || budget.Add(-d) >= 0 {
			if d < 0 {
				budget.Add(-d) // the reply took less than its response
			}
			return dst, c.rec.Code
		}
		budget.Add(n) // undo, and give back the reservation
		if start == 0 {
			dst = nil // keep nothing of the refused reply
		}
	}
	err := e.overBudget(budget)
	if c.req.Notification() {
		return dst[:start], err.Code
	}
	return wire.AppendError(dst[:start], c.req.ID, err), err.Code
}
