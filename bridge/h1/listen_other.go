//go:build !linux

package h1

import (
	"net"
	"time"
)

// stopListening does nothing here: the listener is closed at once, and
// the connections in its accept queue are reset.
func stopListening(net.Listener, time.Duration, time.Duration, func(net.Conn)) {}

func canDropSYNs() bool { return false }
