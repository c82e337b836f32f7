//go:build !unix

package party

import (
	"context"
	"io"
	"os/exec"
	"runtime"
	"time"
)

// shellWaitDelay bounds how long a stopped command's output is drained.
const shellWaitDelay = 5 * time.Second

// runShell runs the command line cmdline with the system's shell (cmd /C
// on Windows, /bin/sh -c elsewhere), with environment env, standard input
// stdin and output (stdout and stderr) out; it is killed when ctx ends.
func runShell(ctx context.Context, cmdline string, env []string, stdin io.Reader, out io.Writer) error {
	name, flag := "/bin/sh", "-c"
	if runtime.GOOS == "windows" {
		name, flag = "cmd", "/C"
	}
	cmd := exec.CommandContext(ctx, name, flag, cmdline)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, stdin, out, out
	cmd.WaitDelay = shellWaitDelay
	return cmd.Run()
}
