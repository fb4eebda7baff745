package fleet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// podEnv names, in a pod's process, the address it serves.
const podEnv = "FLEET_POD_ADDR"

// ServeIfPod serves a pod and exits when the process was started as one
// by StartProcesses: the test binary runs itself again. A test package
// using StartProcesses calls it first in its TestMain.
func ServeIfPod() {
	addr := os.Getenv(podEnv)
	if addr == "" {
		return
	}
	p, err := servePod(addr)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	// The test ends the pod by killing it; should the test's process die
	// first, its end of the pipe closes (and the kernel kills the pod:
	// Pdeathsig).
	io.Copy(io.Discard, os.Stdin)
	p.srv.Stop()
	os.Exit(0)
}

// StartProcesses is Start with each pod a process of its own (the test
// binary, see ServeIfPod), which Freeze can stop: its kernel still
// accepts connections and takes the bytes sent to it, and nothing
// answers. Such pods are not slowed nor made to fail; Calls counts none
// of their calls. The test's cleanup resumes and kills every process.
func StartProcesses(t testing.TB, n int) *Fleet {
	t.Helper()
	return start(&Fleet{t: t, pods: map[string]*Pod{}, procs: true}, n)
}

// A process is the process of a pod.
type process struct {
	cmd   *exec.Cmd
	stdin io.Closer
	once  sync.Once
}

func (f *Fleet) startProcess(ip string) (*Pod, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), podEnv+"="+f.Addr(ip))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	proc := &process{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(l)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		if l != "ready" {
			proc.kill()
			return nil, errors.New("fleet: the pod's process says " + l)
		}
	case <-time.After(30 * time.Second):
		proc.kill()
		return nil, errors.New("fleet: the pod's process did not start")
	}
	p := &Pod{IP: ip, Addr: f.Addr(ip), proc: proc}
	f.mu.Lock()
	f.pods[ip] = p
	f.mu.Unlock()
	return p, nil
}

// kill resumes the process, should it be stopped, kills it and waits.
func (pr *process) kill() {
	pr.once.Do(func() {
		pr.cmd.Process.Signal(syscall.SIGCONT)
		pr.cmd.Process.Kill()
		pr.stdin.Close()
		pr.cmd.Wait()
	})
}

// Freeze stops the process of the pod (SIGSTOP); Thaw resumes it
// (SIGCONT). The fleet's cleanup resumes it too.
func (p *Pod) Freeze() error { return p.signal(syscall.SIGSTOP) }
func (p *Pod) Thaw() error   { return p.signal(syscall.SIGCONT) }

func (p *Pod) signal(sig syscall.Signal) error {
	if p.proc == nil {
		return errors.New("fleet: not a process pod")
	}
	return p.proc.cmd.Process.Signal(sig)
}
