package ferry_test

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/ferry/ferry/clients/go/ferry"
	"github.com/ferry/ferry/clients/go/ferrypb"
)

// benchStream drives one Process stream over loopback TCP the way ferry does
// (results carry the credit, Events messages of up to batch events, never
// more outstanding than the credit) and handles b.N no-op events. ns/op and
// allocs/op are per event, ferry's side included.
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
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
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
		for {
			m, err := stream.Recv()
			if err != nil {
				close(credits)
				return
			}
			if n := m.GetResults().GetCredit() + m.GetCredit().GetN(); n > 0 {
				credits <- int(n)
			}
		}
	}()
	payload := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	var id uint64
	sent, done := 0, 0
	for done < b.N {
		for credit > 0 && sent < b.N {
			n := min(credit, batch, b.N-sent)
			evs := make([]*ferrypb.Event, n)
			for i := range evs {
				id++
				ev := &ferrypb.Event{Id: id, Topic: "orders", Partition: 1, Offset: int64(id),
					Key: []byte("key"), Type: "orders", Payload: payload, Attempt: 1}
				if runLen > 1 {
					ev.RunId = 1 + uint64(i/runLen)
				}
				evs[i] = ev
			}
			if err := stream.Send(&ferrypb.ProcessRequest{Kind: &ferrypb.ProcessRequest_Events{
				Events: &ferrypb.Events{Events: evs}}}); err != nil {
				b.Fatal(err)
			}
			credit -= n
			sent += n
		}
		n, open := <-credits
		if !open {
			b.Fatal("stream ended")
		}
		credit += n
		done += n
	}
	b.StopTimer()
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
