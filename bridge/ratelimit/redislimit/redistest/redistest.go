// Package redistest runs a real redis-server (the Debian package
// redis-server) on a loopback port for tests: no persistence, stopped when
// the test ends. A test that needs one is skipped, naming the package,
// where it is missing.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a redis-server process of a test.
type Server struct {
	tb       testing.TB
	bin      string
	port     int
	password string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start runs redis-server on a free loopback port, with requirepass
// password unless it is empty, and waits until it answers. Cleanup kills
// it.
func Start(tb testing.TB, password string) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server is missing: install the Debian package redis-server (.ci/run does)")
	}
	s := &Server{tb: tb, bin: bin, port: freePort(tb), password: password}
	s.Restart()
	tb.Cleanup(s.Kill)
	return s
}

// freePort is a loopback TCP port nothing listens on now.
func freePort(tb testing.TB) int {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's redis:// URL, database 0, without the password.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Kill stops the server at once (SIGKILL), if it runs.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port, empty, and waits
// until it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	if s.password != "" {
		args = append(args, "--requirepass", s.password)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		cmd := exec.Command(s.bin, args...)
		if err := cmd.Start(); err != nil {
			s.tb.Fatal(err)
		}
		if s.answers(deadline) {
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			return
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server on port %d did not answer within 10s", s.port)
		}
		time.Sleep(100 * time.Millisecond) // the port may still be held by the last one
	}
}

// answers waits until the server answers PING (NOAUTH counts: it
// answers), for up to 3 s and no later than deadline.
func (s *Server) answers(deadline time.Time) bool {
	if d := time.Now().Add(3 * time.Second); d.Before(deadline) {
		deadline = d
	}
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, "PING\r\n")
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err == nil && (strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH")) {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
