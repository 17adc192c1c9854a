// Package childtest runs a command's test binary again as a child process, so
// the example commands' tests (cmd/hello, cmd/example-worker) drive the
// command as a real process: flags, signals, exit codes. It also opens the
// Processor stream ferry would open to it.
//
// Threading: call from the test's goroutine; the helpers register their
// clean-up with t.Cleanup.
package childtest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ferry/ferry/clients/go/ferrypb"
)

// Main is the body of TestMain: in the child (environment variable `env` set
// to "1") it exits with what `child` returns; otherwise it runs the tests.
func Main(m *testing.M, env string, child func() int) {
	if os.Getenv(env) == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// Command is the test binary run as the child with `args`; the caller sets
// its pipes and starts it. A child still running when the test ends is
// killed.
func Command(t testing.TB, env string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env+"=1")
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// Process opens a Processor stream to `addr` (plaintext), as ferry does, with
// 20 s to live; it is closed when the test ends.
func Process(t *testing.T, addr string) ferrypb.Processor_ProcessClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	stream, err := ferrypb.NewProcessorClient(conn).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// SendEvents sends `events` in one Events message.
func SendEvents(t testing.TB, stream ferrypb.Processor_ProcessClient, events []*ferrypb.Event) {
	t.Helper()
	req := &ferrypb.ProcessRequest{Kind: &ferrypb.ProcessRequest_Events{Events: &ferrypb.Events{Events: events}}}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
}
