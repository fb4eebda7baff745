// Package binary is the tests' one harness of a built program: it builds the
// bridge's binary once per test process (Build, BuildAsTests) and runs it, or
// any other program (an interop server, a client), for one test (Start). A
// started process is stopped when the test ends (its stop signal, then SIGKILL
// after a grace), its output is kept line by line and awaited (Line,
// Listening, Ready), and shown when the test failed.
//
// The cmd, deploy, interop and memory tests start the bridge through it; a
// package whose tests Build calls binary.Main from its TestMain, which removes
// the binaries once the tests have run.
package binary

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// Package is the bridge's main package, which Build builds.
const Package = "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/cmd/grpc-jsonrpc-bridge"

// Wait bounds every wait of this package: for a line, for the bridge to be
// ready, for a process to exit after SIGKILL.
const Wait = 30 * time.Second

var builds struct {
	mu  sync.Mutex
	dir string // the binaries' directory, made by the first Build
	by  map[bool]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// Build returns the path of the bridge's binary built without the race
// detector, once per test process: what deploy and memory measure is the
// binary as it ships.
func Build(tb testing.TB) string {
	tb.Helper()
	return built(tb, false)
}

// BuildAsTests returns the path of the bridge's binary built as the tests
// are: with -race when they run with it, so that a race inside the process
// shows in its output (the interop tests check it).
func BuildAsTests(tb testing.TB) string {
	tb.Helper()
	return built(tb, raceEnabled)
}

func built(tb testing.TB, race bool) string {
	tb.Helper()
	builds.mu.Lock()
	if builds.by == nil {
		builds.by = map[bool]*build{}
	}
	b := builds.by[race]
	if b == nil {
		b = &build{}
		builds.by[race] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() { b.path, b.err = goBuild(race) })
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

func goBuild(race bool) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go tool to build the bridge: %w", err)
	}
	builds.mu.Lock()
	if builds.dir == "" {
		builds.dir, err = os.MkdirTemp("", "bridge-test-binary-")
	}
	dir := builds.dir
	builds.mu.Unlock()
	if err != nil {
		return "", err
	}
	name, args := "grpc-jsonrpc-bridge", []string{"build"}
	if race {
		name, args = name+"-race", append(args, "-race")
	}
	path := filepath.Join(dir, name)
	out, err := exec.Command(goTool, append(args, "-o", path, Package)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", Package, err, out)
	}
	return path, nil
}

// Main runs the tests and then removes the binaries Build made; a TestMain
// calls it.
func Main(m *testing.M) {
	code := m.Run()
	builds.mu.Lock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	builds.mu.Unlock()
	os.Exit(code)
}

// Options are how Start runs a program. The zero value is a program in the
// test's directory, stopped with SIGTERM and killed 10 s later.
type Options struct {
	Name string   // in messages; argv[0]'s base name when empty
	Dir  string   // the working directory; the test's when empty
	Env  []string // added to the environment, which keeps none of the developer's BRIDGE_* variables
	// Stop is the signal sent when the test ends (SIGTERM when nil); a
	// test that checks how the program stops does so itself, before.
	Stop os.Signal
	// Grace is how long after Stop the process is killed; 10 s when zero.
	Grace time.Duration
}

// Proc is a started program.
type Proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited and its output is read

	mu      sync.Mutex
	lines   []string      // every output line, standard output and error as they came
	changed chan struct{} // closed and replaced at each new line
	next    int           // the first line Line has not looked at
}

// Start runs argv until the test ends (see Options) and returns at once.
func Start(tb testing.TB, argv []string, o Options) *Proc {
	tb.Helper()
	if o.Name == "" {
		o.Name = filepath.Base(argv[0])
	}
	if o.Stop == nil {
		o.Stop = syscall.SIGTERM
	}
	if o.Grace == 0 {
		o.Grace = 10 * time.Second
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = o.Dir
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "BRIDGE_") }), o.Env...)
	dieWithTest(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proc{name: o.Name, cmd: cmd, done: make(chan struct{}), changed: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", o.Name, err)
	}
	var wg sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		wg.Go(func() {
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				p.mu.Lock()
				p.lines = append(p.lines, sc.Text())
				close(p.changed)
				p.changed = make(chan struct{})
				p.mu.Unlock()
			}
			_, _ = io.Copy(io.Discard, r)
		})
	}
	go func() {
		wg.Wait()
		_ = cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		if !p.Stop(o.Stop, o.Grace) {
			p.Kill()
		}
		if tb.Failed() {
			tb.Logf("output of %s (last lines):\n%s", p.name, p.Tail(60))
		}
	})
	return p
}

// Name is the name the process was started with.
func (p *Proc) Name() string { return p.name }

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited and its output is read.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// State is how the process exited; nil while it runs.
func (p *Proc) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Signal sends sig to the process, unless it has exited.
func (p *Proc) Signal(sig os.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// Stop sends sig and waits up to d for the process to exit; it reports
// whether it did.
func (p *Proc) Stop(sig os.Signal, d time.Duration) bool {
	p.Signal(sig)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Kill kills the process and waits for it to exit.
func (p *Proc) Kill() {
	if !p.Stop(syscall.SIGKILL, Wait) {
		panic(p.name + " did not exit within " + Wait.String() + " of SIGKILL")
	}
}

// Wait waits up to d for the process to exit and returns its exit code,
// failing the test when it does not.
func (p *Proc) Wait(tb testing.TB, d time.Duration) int {
	tb.Helper()
	await.Receive(tb, d, p.name+"'s exit", p.done)
	return p.cmd.ProcessState.ExitCode()
}

// Output is every line the process has written so far, each ended by a
// newline.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// Tail is the last n lines of the output.
func (p *Proc) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// Line awaits the first line that match accepts among those no earlier Line
// call has looked at, and returns it; the test fails if the process exits
// or Wait passes first.
func (p *Proc) Line(tb testing.TB, what string, match func(string) bool) string {
	tb.Helper()
	timeout := time.NewTimer(Wait)
	defer timeout.Stop()
	for {
		p.mu.Lock()
		for p.next < len(p.lines) {
			l := p.lines[p.next]
			p.next++
			if match(l) {
				p.mu.Unlock()
				return l
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.done:
			p.mu.Lock()
			more := p.next < len(p.lines)
			p.mu.Unlock()
			if !more {
				tb.Fatalf("%s exited (%v) before %s; output:\n%s", p.name, p.cmd.ProcessState, what, p.Tail(60))
			}
		case <-timeout.C:
			tb.Fatalf("%s: no %s within %s; output:\n%s", p.name, what, Wait, p.Tail(60))
		}
	}
}

var textListening = regexp.MustCompile(`\bmsg=listening addr=(\S+)`)

// Listening awaits the bridge's "listening" log line, JSON or text, and
// returns the address in it.
func (p *Proc) Listening(tb testing.TB) string {
	tb.Helper()
	var addr string
	p.Line(tb, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
			return true
		}
		if m := textListening.FindStringSubmatch(l); m != nil {
			addr = m[1]
			return true
		}
		return false
	})
	return addr
}

// Ready awaits a 200 from the bridge's /readyz at addr (host:port) within
// d, failing the test if the process exits first.
func (p *Proc) Ready(tb testing.TB, addr string, d time.Duration) {
	tb.Helper()
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	await.NoError(tb, d, p.name+"'s /readyz 200", func() error {
		if p.State() != nil {
			tb.Fatalf("%s exited (%v) before it was ready; output:\n%s", p.name, p.cmd.ProcessState, p.Tail(60))
		}
		resp, err := client.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status + " " + strings.TrimSpace(string(body)))
		}
		return nil
	})
}
