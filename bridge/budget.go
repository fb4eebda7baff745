package bridge

import (
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// The replies of one request share MaxResponseBytes. A batch's budget is
// an atomic counter of the bytes left, which its members take from as
// their responses arrive: the length of a response message, known from
// its gRPC prefix (direct path) or from the codec (grpc-go), is taken
// before the message is kept, and a collected stream takes each message
// as it comes; what does not fit is refused at once, before any JSON is
// built for it. capReply then settles what the reply really takes. A
// single call has no counter: its response is held to MaxResponseBytes
// alone.

// newBudget is the shared reply budget of one batch.
func (s *Server) newBudget() *atomic.Int64 {
	b := new(atomic.Int64)
	b.Store(s.opts.MaxResponseBytes)
	return b
}

// errOverBudget stands for the refusal of a response that did not fit in
// what was left of its budget; run turns it into overBudget's error.
var errOverBudget = &mapping.Error{Code: mapping.Code(codes.ResourceExhausted), Message: "over budget"}

// overBudget is the error a call gets instead of a reply that does not
// fit: in MaxResponseBytes for a single call (budget nil), in what the
// other members of its batch left of it otherwise.
func (s *Server) overBudget(budget *atomic.Int64) *mapping.Error {
	msg := "the reply is larger than max_response_bytes (" + strconv.FormatInt(s.opts.MaxResponseBytes, 10) + " bytes)"
	if budget != nil {
		msg = "the replies of the batch would be larger than max_response_bytes (" + strconv.FormatInt(s.opts.MaxResponseBytes, 10) + " bytes)"
	}
	return mapping.StatusError(status.New(codes.ResourceExhausted, msg), nil)
}

// reservation is what the response of one call has taken of its budget
// so far: of budget, shared by a batch, or of limit for a single call.
type reservation struct {
	budget *atomic.Int64
	limit  int64
	n      int64
}

func (s *Server) reservation(budget *atomic.Int64) reservation {
	if budget != nil {
		return reservation{budget: budget}
	}
	return reservation{limit: s.opts.MaxResponseBytes}
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

// capReply enforces MaxResponseBytes on the reply of r that call appended
// to dst at start, whose response took o.reserved bytes of budget as it
// was read. A single call's reply may use all of MaxResponseBytes; the
// members of a batch share budget, charged as their responses arrive,
// and a member whose reply does not fit in what is left gets
// RESOURCE_EXHAUSTED instead of its reply, in a buffer of its own. A
// reply refused as its response arrived (o.overBudget) is that error
// already. It returns the reply and its JSON-RPC code.
func (s *Server) capReply(dst []byte, start int, r *wire.Request, o outcome, budget *atomic.Int64) ([]byte, mapping.Code) {
	n := int64(len(dst) - start)
	switch {
	case o.overBudget:
		if budget != nil {
			budget.Add(o.reserved)
		}
		return dst, o.code
	case budget == nil:
		if n <= s.opts.MaxResponseBytes {
			return dst, o.code
		}
	case n == 0:
		budget.Add(o.reserved)
		return dst, o.code
	default:
		d := n - o.reserved
		if d <= 0 || budget.Add(-d) >= 0 {
			if d < 0 {
				budget.Add(-d) // the reply took less than its response
			}
			return dst, o.code
		}
		budget.Add(n) // undo, and give back the reservation
		if start == 0 {
			dst = nil // keep nothing of the refused reply
		}
	}
	e := s.overBudget(budget)
	return wire.AppendError(dst[:start], r.ID, e), e.Code
}
