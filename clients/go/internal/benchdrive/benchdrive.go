// Package benchdrive plays ferry's side of one Process stream at full speed
// for the SDK's benchmarks (ferry's BenchmarkNoopEvents, the example worker's
// BenchmarkExampleWorker): Results carry the credit (ferry-results-credit),
// Events messages of up to batch no-op events, never more outstanding than
// the credit, optionally in runs.
//
// Threading: call from the benchmark's goroutine; it starts one receiving
// goroutine per call, which ends with the stream.
package benchdrive

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/ferry/ferry/clients/go/ferrypb"
)

// Drive sends b.N events to the worker at addr and returns once all are
// answered. start runs after the worker's Ready and before the first event
// (the caller reads its CPU clock there); the benchmark timer is reset then
// and stopped at the end. runLen > 1 puts consecutive events of a message in
// runs of that length.
func Drive(b *testing.B, addr string, batch, runLen int, start func()) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(
		metadata.AppendToOutgoingContext(context.Background(), "ferry-results-credit", "1"))
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
			if n := m.GetResults().GetCredit() + m.GetCredit().GetN(); n > 0 {
				credits <- int(n)
			}
		}
	}()
	payload := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	start()
	b.ResetTimer()
	var id uint64
	for sent, done := 0, 0; done < b.N; {
		for credit > 0 && sent < b.N {
			evs := make([]*ferrypb.Event, min(credit, batch, b.N-sent))
			for i := range evs {
				id++
				evs[i] = &ferrypb.Event{Id: id, Topic: "orders", Partition: 1, Offset: int64(id),
					Key: []byte("key"), Type: "orders", Payload: payload, Attempt: 1}
				if runLen > 1 {
					evs[i].RunId = 1 + uint64(i/runLen)
				}
			}
			if err := stream.Send(&ferrypb.ProcessRequest{Kind: &ferrypb.ProcessRequest_Events{
				Events: &ferrypb.Events{Events: evs}}}); err != nil {
				b.Fatal(err)
			}
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
}
