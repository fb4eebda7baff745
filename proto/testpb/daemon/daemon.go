// Package daemon runs, for tests, the servers that Debian packages install
// (nginx, haproxy): it finds the program, skipping the test and naming the
// package where it is missing (failing it under CI, the variable CI set,
// where .ci/run installs it), runs it in the foreground until the test
// ends, and waits until it accepts connections.
package daemon

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Need returns the path of name, which the Debian package pkg installs: on
// PATH, or in /usr/sbin (not on every user's PATH).
func Need(t testing.TB, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/sbin/" + name; isFile(p) {
		return p
	}
	msg := name + " is missing: install the Debian package " + pkg + " (apt-get install -y " + pkg + "; .ci/run does)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// FreeAddr is a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Log is what a program wrote to its standard output and error.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is the log so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start runs cmd until the test ends, when it is sent stop (SIGTERM if
// nil) and killed 10 s later if it has not exited; its output is in the
// returned Log, and in the test's when the test failed. Start returns
// once cmd accepts connections on every one of addrs, and fails the test
// if it exits first or does not within 10 s.
func Start(t testing.TB, cmd *exec.Cmd, stop os.Signal, addrs ...string) *Log {
	t.Helper()
	if stop == nil {
		stop = syscall.SIGTERM
	}
	log := &Log{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(stop)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", cmd.Path, log.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, a := range addrs {
		for {
			select {
			case <-exited:
				t.Fatalf("%s exited at start:\n%s", cmd.Path, log.String())
			default:
			}
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not accept connections on %s within 10 s: %v\n%s", cmd.Path, a, err, log.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return log
}
