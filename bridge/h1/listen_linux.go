package h1

import (
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// synDrop is a socket filter that drops TCP segments with SYN set and ACK
// not: new connections' first segments. On a listening socket it stops
// new handshakes while those under way complete (their ACKs pass), so
// that the accept queue can be emptied before the listener stops. A
// socket filter reads the segment from its TCP header: byte 13 is the
// flags (ACK 0x10, SYN 0x02).
var synDrop = func() []unix.SockFilter {
	raw, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 13, Size: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0x12},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x02, SkipFalse: 1},
		bpf.RetConstant{Val: 0},          // a SYN: dropped
		bpf.RetConstant{Val: 0xffffffff}, // the rest, whole
	})
	if err != nil {
		panic(err)
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return f
}()

// stopListening makes lis take no new connections, as closing it would,
// but without resetting those in its accept queue, whose clients (a
// proxy) may have sent a request on them that they cannot retry
// elsewhere, the call having maybe run; each of those is given to take.
// Closing a listener resets the connections in its queue; stopListening
// takes them out, in one go, and stops the socket listening at once
// after, so that a connection can slip in between only within
// microseconds. Where the kernel lets a listening socket have a filter,
// new SYNs are dropped first, until the queue stayed empty for settle
// (at most wait), so that handshakes under way also complete and are
// taken; those clients whose SYN was dropped try again (after 1 s, TCP's
// first retransmission) and find the port closed: refused, a failure a
// proxy retries safely. lis is closed by the caller after; a listener
// that is not TCP (TLS) is left to it.
func stopListening(lis net.Listener, settle, wait time.Duration, take func(net.Conn)) {
	tl, ok := lis.(*net.TCPListener)
	if !ok {
		return
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return
	}
	if attachSYNDrop(rc) {
		settleQueue(rc, settle, wait)
	}
	var fds []int
	rc.Control(func(fd uintptr) {
		for {
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			if err != nil {
				break
			}
			fds = append(fds, nfd)
		}
		// Linux stops a listening socket shut down for reading: new
		// connections are refused, and the accept loop's Accept fails.
		unix.Shutdown(int(fd), unix.SHUT_RD)
	})
	for _, nfd := range fds {
		f := os.NewFile(uintptr(nfd), "")
		c, err := net.FileConn(f)
		f.Close()
		if err == nil {
			take(c)
		}
	}
}

// settleQueue returns once the accept queue of the listening socket rc
// stayed empty for settle (the accept loop empties it), at most after
// wait.
func settleQueue(rc syscall.RawConn, settle, wait time.Duration) {
	start, empty := time.Now(), time.Time{}
	for time.Since(start) < wait {
		queued := -1
		rc.Control(func(fd uintptr) {
			// For a listening socket, tcpi_unacked is its accept queue.
			if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
				queued = int(info.Unacked)
			}
		})
		switch {
		case queued < 0:
			return
		case queued > 0:
			empty = time.Time{}
		case empty.IsZero():
			empty = time.Now()
		case time.Since(empty) >= settle:
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// attachSYNDrop gives the listening socket rc the filter synDrop, and
// tells whether the kernel took it.
func attachSYNDrop(rc syscall.RawConn) bool {
	ok := false
	rc.Control(func(fd uintptr) {
		prog := unix.SockFprog{Len: uint16(len(synDrop)), Filter: &synDrop[0]}
		ok = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog) == nil
	})
	return ok
}

// canDropSYNs tells whether this kernel lets a listening socket have
// synDrop (some sandboxes refuse socket filters).
func canDropSYNs() bool {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return false
	}
	defer l.Close()
	rc, err := l.(*net.TCPListener).SyscallConn()
	return err == nil && attachSYNDrop(rc)
}
