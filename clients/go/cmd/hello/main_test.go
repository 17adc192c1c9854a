package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ferry/ferry/clients/go/ferrypb"
)

// The test binary doubles as hello (run as a child process).
func TestMain(m *testing.M) {
	if os.Getenv("FERRY_HELLO_CHILD") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestHelloServesAndStopsOnSigterm(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	var stderr strings.Builder
	cmd := exec.Command(os.Args[0], addr)
	cmd.Env = append(os.Environ(), "FERRY_HELLO_CHILD=1")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("hello not listening: %v", err)
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := ferrypb.NewProcessorClient(conn).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetReady().GetWorkerName() != "hello" {
		t.Fatalf("ready: %v %v", m, err)
	}
	evs := []*ferrypb.Event{{Id: 1, Topic: "t", Payload: []byte("hi")}, {Id: 2}}
	if err := stream.Send(&ferrypb.ProcessRequest{Kind: &ferrypb.ProcessRequest_Events{Events: &ferrypb.Events{Events: evs}}}); err != nil {
		t.Fatal(err)
	}
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
