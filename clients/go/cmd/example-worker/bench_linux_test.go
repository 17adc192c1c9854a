package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry/ferry/clients/go/internal/benchdrive"
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
	var cpu0 time.Duration
	benchdrive.Drive(b, "127.0.0.1:"+port, 64, runLen, func() { cpu0 = processCPU(b, cmd.Process.Pid) })
	b.ReportMetric(float64((processCPU(b, cmd.Process.Pid)-cpu0).Nanoseconds())/1e3/float64(b.N), "worker-cpu-us/event")
}
