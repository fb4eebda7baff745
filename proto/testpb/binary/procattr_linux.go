package binary

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes cmd's process get SIGKILL if the test process dies
// before its cleanup runs (a timeout, a crash).
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
