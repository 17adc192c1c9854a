// example-worker: a ferry processor that acks every event, with the knobs that
// end-to-end tests, benchmarks and the k8s example need (the flags of
// clients/cpp/examples/example_worker.cc).
//
// The processor itself is handleEvent below; everything else is plumbing:
//
//	--listen ADDR        address to serve on (default 127.0.0.1:50051; port 0 = any; unix:/path)
//	--max_in_flight N    credit per stream (default 64)
//	--concurrency N      handlers running at once (default 4; --handler_threads is an alias)
//	--name NAME          worker name sent in Ready (default: host name)
//	--work_us N          simulated work per event, microseconds (default 0)
//	--record FILE        append "<key>\t<payload>\t<CLOCK_MONOTONIC ns at handler start>\t
//	                     <partition>\t<offset>\n" per event (buffered, flushed on shutdown;
//	                     '\\', tab, CR and LF inside key/payload are escaped as \\ \t \r \n)
//	--stats FILE         on shutdown write "events_received=N\nmax_held=M\ncredit_violations=K\n"
//	--port_file FILE     after binding, write the port (atomically: temp file + rename)
//
// SIGTERM / SIGINT: graceful stop with a 5 s grace, then exit 0.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ferry/ferry/clients/go/ferry"
	"github.com/ferry/ferry/clients/go/ferrypb"
)

// recorder appends one line per event; many handlers share it.
type recorder struct {
	mu   sync.Mutex
	file *os.File
	w    *bufio.Writer
}

func openRecorder(path string) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &recorder{file: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

var escaper = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)

func escape(b []byte) string {
	if !bytes.ContainsAny(b, "\\\t\n\r") {
		return string(b)
	}
	return escaper.Replace(string(b))
}

func (r *recorder) record(e *ferrypb.Event, startNs int64) {
	line := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\n", escape(e.GetKey()), escape(e.GetPayload()), startNs,
		e.GetPartition(), e.GetOffset())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		r.w.WriteString(line)
	}
}

func (r *recorder) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return nil
	}
	err := r.w.Flush()
	if cerr := r.file.Close(); err == nil {
		err = cerr
	}
	r.w = nil
	return err
}

// writeFileAtomically writes content to path via a temporary file and rename(2).
func writeFileAtomically(path, content string) error {
	tmp := fmt.Sprintf("%s.tmp.%d", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func main() { os.Exit(run()) }

func run() int {
	listen := flag.String("listen", "127.0.0.1:50051", "address to serve on (port 0: any free port; unix:/path)")
	maxInFlight := flag.Int("max_in_flight", 64, "credit per stream: events ferry may have outstanding")
	concurrency := flag.Int("concurrency", 4, "handlers running at once")
	flag.IntVar(concurrency, "handler_threads", 4, "alias of --concurrency")
	name := flag.String("name", "", "worker name reported to ferry (default: host name)")
	recordPath := flag.String("record", "", "if set, append one line per handled event to this file")
	statsPath := flag.String("stats", "", "if set, write counters to this file on shutdown")
	workUs := flag.Int64("work_us", 0, "simulated work per event, in microseconds")
	portFile := flag.String("port_file", "", "if set, write the bound port to this file")
	flag.Parse()

	level := slog.LevelInfo
	if v := os.Getenv("FERRY_LOG_LEVEL"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	// Taken before the worker starts, so a SIGTERM is never lost.
	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()

	var rec *recorder
	if *recordPath != "" {
		var err error
		if rec, err = openRecorder(*recordPath); err != nil {
			fmt.Fprintf(os.Stderr, "example-worker: cannot open --record %s: %v\n", *recordPath, err)
			return 1
		}
	}
	work := time.Duration(*workUs) * time.Microsecond

	// ---- The processor. This is the part to copy. ----
	handleEvent := func(ctx context.Context, ev *ferrypb.Event) ferry.Result {
		start := monotonicNanos()
		// Real work goes here. Return ferry.Retry("why", after) to be called
		// again later or ferry.Fail("why") to dead-letter the event; a panic
		// counts as Fail. ctx is cancelled if ferry gives up on the event.
		if work > 0 {
			time.Sleep(work)
		}
		if rec != nil {
			rec.record(ev, start)
		}
		return ferry.OK()
	}

	w := ferry.NewWorker(handleEvent, ferry.Options{
		Name:        *name,
		MaxInFlight: *maxInFlight,
		Concurrency: *concurrency,
		Logger:      logger,
	})
	network, addr := "tcp", *listen
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", path
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "example-worker: cannot listen on %s: %v\n", *listen, err)
		return 1
	}
	port := 0
	if tcp, ok := lis.Addr().(*net.TCPAddr); ok {
		port = tcp.Port
	}
	if *portFile != "" {
		if err := writeFileAtomically(*portFile, strconv.Itoa(port)); err != nil {
			fmt.Fprintf(os.Stderr, "example-worker: cannot write --port_file %s: %v\n", *portFile, err)
			return 1
		}
	}
	served := make(chan error, 1)
	go func() { served <- w.Serve(lis) }()
	host := *listen
	if i := strings.LastIndex(host, ":"); i >= 0 {
		host = host[:i]
	}
	fmt.Printf("example_worker listening on %s:%d (max_in_flight=%d)\n", host, port, *maxInFlight)

	select {
	case err := <-served:
		fmt.Fprintf(os.Stderr, "example-worker: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	fmt.Fprintln(os.Stderr, "example-worker: signal received, shutting down")
	w.GracefulStop(5 * time.Second)
	<-served
	if rec != nil {
		if err := rec.close(); err != nil {
			fmt.Fprintf(os.Stderr, "example-worker: --record: %v\n", err)
		}
	}
	if *statsPath != "" {
		stats := fmt.Sprintf("events_received=%d\nmax_held=%d\ncredit_violations=%d\n",
			w.EventsReceived(), w.MaxHeld(), w.CreditViolations())
		if err := writeFileAtomically(*statsPath, stats); err != nil {
			fmt.Fprintf(os.Stderr, "example-worker: cannot write --stats %s: %v\n", *statsPath, err)
		}
	}
	return 0
}
