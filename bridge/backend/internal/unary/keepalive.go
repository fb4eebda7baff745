package unary

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// keepalive pings the backend when nothing was read for KeepaliveTime,
// and closes the connection when nothing comes back within
// KeepaliveTimeout, as grpc-go's keepalive does: while a ping waits for
// its answer the client looks again every KeepaliveTime, so that a
// connection that answers is pinged every KeepaliveTime of silence.
func (cn *conn) keepalive() {
	o := cn.client.opts
	o.KeepaliveTime = cn.kaTime
	t := time.NewTimer(o.KeepaliveTime)
	defer t.Stop()
	outstanding, left := false, time.Duration(0)
	for {
		select {
		case <-cn.done:
			return
		case <-t.C:
		}
		if cn.readSome.Swap(false) {
			outstanding = false
			t.Reset(o.KeepaliveTime)
			continue
		}
		if outstanding && left <= 0 {
			cn.client.opts.Logger.Debug("keepalive ping unanswered: closing the connection", "address", cn.client.ep.address)
			cn.shut(status.Error(codes.Unavailable, "keepalive ping failed to receive ACK within timeout"))
			return
		}
		if !outstanding {
			cn.mu.Lock()
			active := len(cn.streams) > 0 || len(cn.pending) > 0
			if active || o.KeepalivePermitWithoutStream {
				cn.ctrl = append(appendFrameHeader(cn.ctrl, 8, framePing, 0, 0), "bridgeka"...)
			}
			cn.mu.Unlock()
			if !active && !o.KeepalivePermitWithoutStream {
				t.Reset(o.KeepaliveTime) // dormant until a call comes
				continue
			}
			cn.kick()
			outstanding, left = true, o.KeepaliveTimeout
		}
		sleep := min(o.KeepaliveTime, left)
		left -= sleep
		t.Reset(sleep)
	}
}

// calmDown doubles the keepalive interval of the connections opened after
// cn, whose backend sent GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings"), as
// grpc-go's addrConn.adjustParams does: a backend whose keepalive policy
// allows fewer pings than the client sends is not sent them again and
// again, each time ending the connection and its calls.
func (c *Client) calmDown(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := 2 * cn.kaTime; v > c.kaTime {
		c.kaTime = v
	}
	c.opts.Logger.Warn("the backend sent GOAWAY too_many_pings: pinging new connections every "+c.kaTime.String(),
		"address", c.ep.address)
}
