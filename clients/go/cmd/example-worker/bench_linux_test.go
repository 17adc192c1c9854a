package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/ferry/ferry/clients/go/ferrypb"
	"github.com/ferry/ferry/clients/go/internal/childtest"
)

// processCPU: user + system CPU time of process pid (/proc/PID/stat, in
// clock ticks of 10 ms).
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15 of stat(5)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// BenchmarkExampleWorker drives the example worker (a child process, as
// ferry runs it: no-op handler, credit 256, 4 handlers) with b.N events in
// Events messages of 64, as ferry does, and reports the worker process's
// CPU per event: the figure to compare with the C++ example worker's. Use
// -benchtime 500000x or more (CPU time is counted in 10 ms ticks).
// FERRY_BENCH_RUN=N sends runs of N events; FERRY_BENCH_WORKER=PATH runs
// another example worker with the same flags (e.g. the C++ one, for the
// same figure).
func BenchmarkExampleWorker(b *testing.B) {
	runLen, _ := strconv.Atoi(os.Getenv("FERRY_BENCH_RUN"))
	portFile := filepath.Join(b.TempDir(), "port")
	args := []string{"--listen", "127.0.0.1:0", "--port_file", portFile, "--max_in_flight=256", "--handler_threads=4"}
	cmd := childtest.Command(b, childEnv, args...)
	if other := os.Getenv("FERRY_BENCH_WORKER"); other != "" { // another SDK's example worker
		cmd = exec.Command(other, args...)
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var port string
	for deadline := time.Now().Add(20 * time.Second); port == ""; time.Sleep(10 * time.Millisecond) {
		if raw, err := os.ReadFile(portFile); err == nil {
			port = string(raw)
		} else if time.Now().After(deadline) {
			b.Fatal("no port file")
		}
	}
	conn, err := grpc.NewClient("127.0.0.1:"+port, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "ferry-results-credit", "1"))
	defer cancel()
	stream, err := ferrypb.NewProcessorClient(conn).Process(ctx)
	if err != nil {
		b.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil {
		b.Fatal(err)
	}
	credit := int(m.GetReady().GetMaxInFlight())
	credits := make(chan int, 1024)
	go func() {
		defer close(credits)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if n := m.GetResults().GetCredit(); n > 0 {
				credits <- int(n)
			}
		}
	}()
	payload := []byte(strings.Repeat("x", 64))
	cpu0 := processCPU(b, cmd.Process.Pid)
	b.ResetTimer()
	var id uint64
	for sent, done := 0, 0; done < b.N; {
		for credit > 0 && sent < b.N {
			evs := make([]*ferrypb.Event, min(credit, 64, b.N-sent))
			for i := range evs {
				id++
				evs[i] = &ferrypb.Event{Id: id, Topic: "orders", Partition: 1, Offset: int64(id),
					Key: []byte("key"), Type: "orders", Payload: payload, Attempt: 1}
				if runLen > 1 {
					evs[i].RunId = 1 + uint64(i/runLen)
				}
			}
			childtest.SendEvents(b, stream, evs)
			credit -= len(evs)
			sent += len(evs)
		}
		n, open := <-credits
		if !open {
			b.Fatal("stream ended")
		}
		credit += n
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b, cmd.Process.Pid)-cpu0).Nanoseconds())/1e3/float64(b.N), "worker-cpu-us/event")
}
