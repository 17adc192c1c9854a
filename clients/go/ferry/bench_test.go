package ferry_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ferry/ferry/clients/go/ferry"
	"github.com/ferry/ferry/clients/go/internal/benchdrive"
)

// benchStream drives one Process stream over loopback TCP the way ferry does
// (internal/benchdrive) and handles b.N no-op events. ns/op and allocs/op are
// per event, ferry's side included.
func benchStream(b *testing.B, opts ferry.Options, batch int, runLen int) {
	opts.Logger = quietLogger()
	opts.Name = "bench"
	w := ferry.NewWorker(ok, opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go w.Serve(lis)
	defer w.GracefulStop(0)
	var cpu0 time.Duration
	benchdrive.Drive(b, lis.Addr().String(), batch, runLen, func() {
		b.ReportAllocs()
		cpu0 = cpuTime()
	})
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-us/event")
}

// cpuTime: user + system CPU time of this process (both ends of the stream).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkNoopEvents(b *testing.B) {
	benchStream(b, ferry.Options{MaxInFlight: 256, Concurrency: 4}, 64, 0)
}
