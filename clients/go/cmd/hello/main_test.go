package main

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry/ferry/clients/go/ferrypb"
	"github.com/ferry/ferry/clients/go/internal/childtest"
)

const childEnv = "FERRY_HELLO_CHILD"

// The test binary doubles as hello (run as a child process).
func TestMain(m *testing.M) {
	childtest.Main(m, childEnv, func() int {
		main()
		return 0
	})
}

func TestHelloServesAndStopsOnSigterm(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	var stderr strings.Builder
	cmd := childtest.Command(t, childEnv, addr)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("hello not listening: %v", err)
		}
	}
	stream := childtest.Process(t, addr)
	if m, err := stream.Recv(); err != nil || m.GetReady().GetWorkerName() != "hello" {
		t.Fatalf("ready: %v %v", m, err)
	}
	childtest.SendEvents(t, stream, []*ferrypb.Event{{Id: 1, Topic: "t", Payload: []byte("hi")}, {Id: 2}})
	got := map[uint64]*ferrypb.Result{}
	for credit := 0; credit < 2; {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range m.GetResults().GetResults() {
			got[r.GetId()] = r
		}
		credit += int(m.GetCredit().GetN())
	}
	if got[1].GetStatus() != ferrypb.Result_OK || got[2].GetStatus() != ferrypb.Result_FAIL || got[2].GetMessage() != "empty payload" {
		t.Errorf("results %v", got)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v (stderr %s)", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), `t/0@0: "hi"`) {
		t.Errorf("stderr %q", stderr.String())
	}
}
