package framework

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// OutputWait bounds how long a command the suite runs to completion is
// waited for once it has ended (or was killed when its context ended)
// while something it started still holds its output. exec.Cmd.Wait waits
// for every holder of the output pipes it made, not only for the process:
// a command that leaves a daemon with its stdout or stderr (`virtop up`
// starts several) would otherwise keep Wait for as long as that daemon
// lives.
const OutputWait = 5 * time.Second

// Command is exec.CommandContext(ctx, name, args...) for a command the
// suite runs to completion: killed when ctx ends, and its output pipes
// waited for at most OutputWait after that or after it exits. Give it a
// ctx with a deadline: the deadline is what bounds the run.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = OutputWait
	return cmd
}

// CommandError says what a command run by Command ran into, with its
// bound: killed at its deadline, its output still held after it ended, or
// the command's own failure.
func CommandError(ctx context.Context, cmd *exec.Cmd, bound time.Duration, err error) error {
	if err == nil {
		return nil
	}
	what := strings.Join(cmd.Args, " ")
	switch {
	case errors.Is(err, exec.ErrWaitDelay):
		return fmt.Errorf("%s: exited, but something it started still held its output %s later (closed): %w", what, OutputWait, err)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: did not finish within %s (killed): %w", what, bound, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
