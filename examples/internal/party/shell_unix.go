//go:build unix

package party

import (
	"context"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// shellWaitDelay bounds how long a stopped command's output is drained.
const shellWaitDelay = 5 * time.Second

// runShell runs the command line cmdline with /bin/sh -c, in its own
// process group, with environment env, standard input stdin and output
// (stdout and stderr) out. When ctx ends, the whole group is killed, so a
// shell's children do not outlive it.
func runShell(ctx context.Context, cmdline string, env []string, stdin io.Reader, out io.Writer) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", cmdline)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, stdin, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = shellWaitDelay
	return cmd.Run()
}
