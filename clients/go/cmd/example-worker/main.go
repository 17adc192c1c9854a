// example-worker: a ferry processor that acks every event, with the knobs that
// end-to-end tests, benchmarks and the k8s example need (the flags of
// clients/cpp/examples/example_worker.cc).
//
// The processor itself is handleEvent below; everything else is plumbing:
//
//	--listen ADDR        address to serve on (default 127.0.0.1:50051; port 0 = any; unix:/path)
//	--max_in_flight N    credit per stream (default 64)
//	--concurrency N      handlers running at once (default 4; --handler_threads is an alias)
//	--max_run N          longest run taken (Ready.max_run; default 0: the SDK's, 64; 1: no runs)
//	--name NAME          worker name sent in Ready (default: host name)
//	--work_us N          simulated work per event, microseconds (default 0)
//	--record FILE        append "<key>\t<payload>\t<CLOCK_MONOTONIC ns at handler start>\t
//	                     <partition>\t<offset>\t<answer>\n" per handler run (answer: OK, RETRY
//	                     or FAIL; buffered, flushed on shutdown; '\\', tab, CR and LF inside
//	                     key/payload are escaped as \\ \t \r \n)
//	--record_flush       write each --record line through before answering (kill -9 safe)
//	--stats FILE         on shutdown write "events_received=N\nmax_held=M\ncredit_violations=K\n
//	                     cancelled=C\n" (C: handler runs that saw ferry's Cancel for their event)
//	--port_file FILE     after binding, write the port (atomically: temp file + rename)
//
// Fault injection, for failure and conformance tests (all off by default):
//
//	--retry_attempts K   answer RETRY until the event's attempt reaches K
//	--fail_every N       answer FAIL when (payload as an integer + 1) % N == 0
//	--throw_every N      panic in the handler when (payload as an integer + 1) % N == 0
//	                     (the SDK reports it as FAIL; recorded as FAIL)
//	--fail_rate P, --retry_rate P, --stall_rate P   random FAIL / RETRY / stall
//	--stall_ms MS        how long a stall holds the event (default 2000); it ends early when
//	                     ferry cancels the event (ctx.Done), and the handler then answers
//	                     FAIL (which the SDK drops)
//	--seed S             seed of the random choices
//
// SIGTERM / SIGINT: graceful stop with a 5 s grace, then exit 0.
//
// Garbage collection: unless GOGC is set, the worker runs with GOGC=400
// (debug.SetGCPercent). Its live heap is small (the events in flight), so
// the default GOGC=100 collects every few MB of short-lived event garbage;
// 400 spends a few MB more memory to collect a quarter as often, which cuts
// the CPU per event at high rates. Set GOGC to override it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ferry/ferry/clients/go/ferry"
	"github.com/ferry/ferry/clients/go/ferrypb"
)

// recorder appends one line per event; many handlers share it.
type recorder struct {
	mu    sync.Mutex
	file  *os.File
	w     *bufio.Writer
	flush bool // write each line through (kill -9 safe)
}

func openRecorder(path string, flush bool) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &recorder{file: f, w: bufio.NewWriterSize(f, 1<<20), flush: flush}, nil
}

var escaper = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)

func escape(b []byte) string {
	if !bytes.ContainsAny(b, "\\\t\n\r") {
		return string(b)
	}
	return escaper.Replace(string(b))
}

func (r *recorder) record(e *ferrypb.Event, startNs int64, answer string) {
	line := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%s\n", escape(e.GetKey()), escape(e.GetPayload()), startNs,
		e.GetPartition(), e.GetOffset(), answer)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		r.w.WriteString(line)
		// In the kernel before the answer leaves, so a kill -9 loses no line
		// of an answered event.
		if r.flush {
			r.w.Flush()
		}
	}
}

// faults injects failures for tests; see the flags. Safe for concurrent use.
type faults struct {
	retryAttempts, failEvery, throwEvery int64
	failRate, retryRate, stallRate       float64
	stall                                time.Duration

	mu     sync.Mutex
	random *rand.Rand
}

// decide returns the injected result (ok false: process normally) and
// whether the handler should panic.
func (f *faults) decide(ctx context.Context, ev *ferrypb.Event) (res ferry.Result, ok, panicNow bool) {
	if f.retryAttempts > 0 && int64(ev.GetAttempt()) < f.retryAttempts {
		return ferry.Retry(fmt.Sprintf("injected: retry until attempt %d", f.retryAttempts), 0), true, false
	}
	sequence, err := strconv.ParseInt(string(ev.GetPayload()), 10, 64)
	numeric := err == nil
	if f.failEvery > 0 && numeric && (sequence+1)%f.failEvery == 0 {
		return ferry.Fail(fmt.Sprintf("injected: every %d", f.failEvery)), true, false
	}
	if f.throwEvery > 0 && numeric && (sequence+1)%f.throwEvery == 0 {
		return ferry.Fail(fmt.Sprintf("injected: throw every %d", f.throwEvery)), true, true
	}
	f.mu.Lock()
	roll := f.random.Float64()
	stall := f.random.Float64() < f.stallRate
	f.mu.Unlock()
	if stall {
		t := time.NewTimer(f.stall)
		select {
		case <-t.C:
		case <-ctx.Done(): // ferry cancelled it (or the stream ended)
			t.Stop()
			return ferry.Fail("cancelled by ferry"), true, false
		}
	}
	if roll < f.failRate {
		return ferry.Fail("injected: random failure"), true, false
	}
	if roll < f.failRate+f.retryRate {
		return ferry.Retry("injected: random", 0), true, false
	}
	return ferry.Result{}, false, false
}

func answerName(r ferry.Result) string {
	switch r.Status {
	case ferrypb.Result_OK:
		return "OK"
	case ferrypb.Result_RETRY:
		return "RETRY"
	}
	return "FAIL"
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
	maxRun := flag.Int("max_run", 0, "longest run of one lane's events taken in one message (0: the SDK default, 64; 1: no runs)")
	recordPath := flag.String("record", "", "if set, append one line per handled event to this file")
	statsPath := flag.String("stats", "", "if set, write counters to this file on shutdown")
	workUs := flag.Int64("work_us", 0, "simulated work per event, in microseconds")
	portFile := flag.String("port_file", "", "if set, write the bound port to this file")
	recordFlush := flag.Bool("record_flush", false, "write each --record line through before answering (survives kill -9)")
	f := &faults{}
	flag.Int64Var(&f.retryAttempts, "retry_attempts", 0, "answer RETRY until the event's attempt reaches this")
	flag.Int64Var(&f.failEvery, "fail_every", 0, "answer FAIL when (payload as an integer + 1) % N == 0")
	flag.Int64Var(&f.throwEvery, "throw_every", 0, "panic in the handler when (payload as an integer + 1) % N == 0")
	flag.Float64Var(&f.failRate, "fail_rate", 0, "probability of answering FAIL")
	flag.Float64Var(&f.retryRate, "retry_rate", 0, "probability of answering RETRY")
	flag.Float64Var(&f.stallRate, "stall_rate", 0, "probability of holding an event for --stall_ms first")
	stallMs := flag.Int64("stall_ms", 2000, "how long a stalled event is held")
	seed := flag.Int64("seed", 1, "seed of the random fault choices")
	flag.Parse()
	f.stall = time.Duration(*stallMs) * time.Millisecond
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400) // see the package comment
	}
	f.random = rand.New(rand.NewSource(*seed))

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
		if rec, err = openRecorder(*recordPath, *recordFlush); err != nil {
			fmt.Fprintf(os.Stderr, "example-worker: cannot open --record %s: %v\n", *recordPath, err)
			return 1
		}
	}
	work := time.Duration(*workUs) * time.Microsecond
	var cancelledRuns atomic.Int64 // handler runs that saw their event cancelled
	var w *ferry.Worker            // set before it serves; handlers ask it about Cancel

	// ---- The processor. This is the part to copy. ----
	handleEvent := func(ctx context.Context, ev *ferrypb.Event) ferry.Result {
		start := monotonicNanos()
		// Real work goes here. Return ferry.Retry("why", after) to be called
		// again later or ferry.Fail("why") to dead-letter the event; a panic
		// counts as Fail. ctx is cancelled if ferry gives up on the event.
		if work > 0 {
			time.Sleep(work)
		}
		res, injected, panicNow := f.decide(ctx, ev)
		if !injected {
			res = ferry.OK()
		}
		if w.IsCancelled(ev.GetId()) {
			cancelledRuns.Add(1)
		}
		if rec != nil {
			rec.record(ev, start, answerName(res))
		}
		if panicNow {
			panic(res.Message)
		}
		return res
	}

	w = ferry.NewWorker(handleEvent, ferry.Options{
		Name:        *name,
		MaxInFlight: *maxInFlight,
		Concurrency: *concurrency,
		MaxRun:      *maxRun,
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
		stats := fmt.Sprintf("events_received=%d\nmax_held=%d\ncredit_violations=%d\ncancelled=%d\n",
			w.EventsReceived(), w.MaxHeld(), w.CreditViolations(), cancelledRuns.Load())
		if err := writeFileAtomically(*statsPath, stats); err != nil {
			fmt.Fprintf(os.Stderr, "example-worker: cannot write --stats %s: %v\n", *statsPath, err)
		}
	}
	return 0
}
