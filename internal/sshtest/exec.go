package sshtest

import (
	"errors"
	"io"
	"os"
	"os/exec"
)

// ShellExec returns an Options.Exec handler that runs each command with
// /bin/sh -c in dir, as sshd runs commands through the user's shell: real
// programs such as scp -t and scp -f then serve the test's requests.
func ShellExec(dir string) func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
	return func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		// Like sshd, end the command's output when it exits, whether or
		// not the client has closed its input: exec.Cmd would wait for
		// that if it copied stdin itself.
		pr, pw, err := os.Pipe()
		if err != nil {
			io.WriteString(stderr, err.Error())
			return 1
		}
		go func() {
			io.Copy(pw, stdin)
			pw.Close()
		}()
		c := exec.Command("/bin/sh", "-c", cmd)
		c.Dir = dir
		c.Stdin, c.Stdout, c.Stderr = pr, stdout, stderr
		err = c.Run()
		pr.Close()
		pw.Close()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			return ee.ExitCode()
		case err != nil:
			io.WriteString(stderr, err.Error())
			return 1
		}
		return 0
	}
}
