package backend

import (
	"errors"
	"sync"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// A Call is one unary call, or one server-streaming call answered with all
// its messages, as both invokers make it: the method path, the request's
// wire bytes and metadata in; the response's wire bytes, the backend's
// metadata (with Capture) and what the response took of its budget out.
// Calls are pooled: take them with GetCall and give them back with PutCall.
type Call = unary.Call

// A Group starts calls that leave together and are waited for at once
// (see Invoker.Start).
type Group = unary.Group

// Statuses of the calls whose Budget, Limit or MaxMessages ended them.
var (
	ErrOverBudget      = unary.ErrOverBudget
	ErrTooManyMessages = unary.ErrTooManyMessages
)

// maxPooled keeps one huge call from pinning its buffers forever.
const maxPooled = 1 << 20

var callPool = sync.Pool{New: func() any { return new(Call) }}

// GetCall returns an empty call from the pool, its buffers kept.
func GetCall() *Call {
	c := callPool.Get().(*Call)
	c.Request, c.Response = c.Request[:0], c.Response[:0]
	return c
}

// PutCall gives c back to the pool; c must not be used afterwards.
func PutCall(c *Call) {
	if cap(c.Request) > maxPooled || cap(c.Response) > maxPooled {
		return
	}
	c.Metadata, c.Header, c.Trailer, c.Err = nil, nil, nil, nil
	c.Capture, c.Remote = false, false
	c.Stream, c.MaxMessages, c.Budget, c.Limit, c.Reserved = false, 0, nil, 0, 0
	callPool.Put(c)
}

// GiveBack gives back what the response of c took of its budget, as a
// call that failed or was refused must.
func GiveBack(c *Call) {
	if c.Budget != nil {
		c.Budget.Add(c.Reserved)
	}
	c.Budget, c.Reserved = nil, 0
}

// take takes n more bytes of the budget of c, as the direct client does
// for each message: from Budget when shared, within Limit otherwise.
func take(c *Call, n int64) bool {
	if c.Limit > 0 && c.Reserved+n > c.Limit {
		return false
	}
	if b := c.Budget; b != nil && n > 0 {
		if b.Add(-n) < 0 {
			b.Add(n)
			return false
		}
	}
	c.Reserved += n
	return true
}

// overBudget reports whether err ended a call for its budget.
func overBudget(err error) bool { return errors.Is(err, ErrOverBudget) }
