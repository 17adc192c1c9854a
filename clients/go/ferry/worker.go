// Package ferry is the Go worker SDK for ferry, the Kafka consumer service
// that pushes events to gRPC Processor workers: write a processor as a plain
// function.
//
// ferry dials your worker and opens ferry.v1.Processor/Process streams to it
// (see proto/ferry/v1/processor.proto). A Worker implements the worker side
// of that protocol: it announces Ready{max_in_flight}, runs your Handler for
// every Event (at most Options.Concurrency at once, over all streams),
// batches the results into Results messages, returns credit (inside Results
// when ferry's call metadata allows it, else with Credit{n}), honours Cancel
// and stops gracefully.
//
//	func handle(ctx context.Context, ev *ferrypb.Event) ferry.Result {
//		if len(ev.Payload) == 0 {
//			return ferry.Fail("empty payload")
//		}
//		return ferry.OK() // or ferry.Retry("busy", 5*time.Second)
//	}
//
//	w := ferry.NewWorker(handle, ferry.Options{Name: "billing", MaxInFlight: 64})
//	lis, _ := net.Listen("tcp", ":50051")
//	go w.Serve(lis)
//	...
//	w.GracefulStop(20 * time.Second)
//
// Handler contract:
//   - Handlers run on a pool of Options.Concurrency goroutines, several at
//     once (also events of one stream message), so they must be safe for
//     concurrent use. ferry keeps per-key order by not sending a key's next
//     event before the previous one's result, or by sending them as a run.
//   - ctx is cancelled when ferry cancels the event (Cancel{ids}: its result
//     is then dropped) and when its stream ends. Events cancelled before
//     they start are skipped.
//   - A panic is recovered and reported as FAIL with the panic value; the
//     stream goes on.
//   - The *ferrypb.Event is the handler's to keep: the SDK does not reuse it.
//     Its Key, Payload and header values share one buffer with the other
//     events of its Events message (one copy instead of one per field), so
//     keeping one keeps that message's bytes alive; unknown fields of a newer
//     ferry are dropped.
//   - Handlers should return soon after ctx is done; Stop waits for running
//     handlers (up to its grace).
//
// Runs (proto/ferry/v1/processor.proto, "Runs"): the Worker announces
// Options.MaxRun in Ready.max_run, and ferry may then send consecutive
// events of one ordering lane in one message, sharing a non-zero
// Event.RunId. The Worker hands a run's members to the handler one at a
// time, in message order, on one goroutine: the next starts only after the
// previous returned OK. After a member that did not end OK (Retry, Fail, a
// panic, a Cancel, its stream ending) or once Stop has begun, the rest of the
// run is answered NOT_ATTEMPTED without calling the handler, and ferry
// delivers them again later without counting an attempt. Events with
// RunId 0 are handled independently, as always.
package ferry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/ferry/ferry/clients/go/ferrypb"
)

// Handler processes one event. See the package documentation for its contract.
type Handler func(ctx context.Context, ev *ferrypb.Event) Result

// Options configure a Worker. Zero values mean the defaults.
type Options struct {
	// Name is sent to ferry in Ready.worker_name (logs, status). Default: the host name.
	Name string
	// MaxInFlight is the credit per stream (Ready.max_in_flight): the most
	// events ferry may have outstanding on one stream. 1 .. 2^31-1; default 64.
	MaxInFlight int
	// Concurrency is the most handlers running at once, over all streams. Default 8.
	Concurrency int
	// MaxRun is the longest run this worker takes (Ready.max_run): ferry
	// may then send up to MaxRun consecutive events of one ordering lane in
	// one message, which the Worker handles one at a time, in order (see
	// "Runs" in the package documentation). 0 means the default, 64; 1 turns
	// runs off. At most 2^31-1.
	MaxRun int
	// MaxResultsBatch is the most results put in one Results message. Default 256.
	MaxResultsBatch int
	// Logger receives the SDK's logs (nothing per event at Info). Default slog.Default().
	Logger *slog.Logger
	// ShutdownGrace is the grace ListenAndServe gives GracefulStop on
	// SIGTERM/SIGINT. Default 5s.
	ShutdownGrace time.Duration
	// ServerOptions are added to the gRPC server's options.
	ServerOptions []grpc.ServerOption
}

// ErrStopped is returned by Serve and ListenAndServe once the Worker was stopped.
var ErrStopped = errors.New("ferry: worker stopped")

// Worker serves ferry's Processor streams. Its methods are safe for concurrent use.
type Worker struct {
	handler  Handler
	opts     Options
	err      error // invalid options, reported by Serve
	log      *slog.Logger
	server   *grpc.Server
	dispatch dispatcher // runs the handlers: Concurrency goroutines
	poolOnce sync.Once

	eventsReceived   atomic.Int64
	maxHeld          atomic.Int64
	creditViolations atomic.Int64
	stopping         atomic.Bool

	mu        sync.Mutex
	draining  bool
	running   int64         // handler goroutines not completed
	idle      chan struct{} // closed when running drops to 0 during Stop
	streams   map[*stream]struct{}
	cancelled map[uint64]int // id -> streams on which it is cancelled

	stopMu      sync.Mutex
	stopStarted bool
	stopDone    chan struct{}
}

// NewWorker returns a Worker that runs h for every event. It panics if h is
// nil; invalid options are reported by Serve.
func NewWorker(h Handler, opts Options) *Worker {
	if h == nil {
		panic("ferry: nil Handler")
	}
	w := &Worker{
		handler:   h,
		streams:   make(map[*stream]struct{}),
		cancelled: make(map[uint64]int),
		stopDone:  make(chan struct{}),
	}
	switch {
	case opts.MaxInFlight < 0 || opts.MaxInFlight > math.MaxInt32:
		w.err = fmt.Errorf("ferry: Options.MaxInFlight %d out of range 1 .. 2^31-1", opts.MaxInFlight)
	case opts.Concurrency < 0:
		w.err = fmt.Errorf("ferry: Options.Concurrency %d must be >= 1", opts.Concurrency)
	case opts.MaxRun < 0 || opts.MaxRun > math.MaxInt32:
		w.err = fmt.Errorf("ferry: Options.MaxRun %d out of range 1 .. 2^31-1", opts.MaxRun)
	case opts.MaxResultsBatch < 0:
		w.err = fmt.Errorf("ferry: Options.MaxResultsBatch %d must be >= 1", opts.MaxResultsBatch)
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = 64
	}
	if opts.MaxRun <= 0 {
		opts.MaxRun = 64
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.MaxResultsBatch <= 0 {
		opts.MaxResultsBatch = 256
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 5 * time.Second
	}
	if opts.Name == "" {
		opts.Name, _ = os.Hostname()
		if opts.Name == "" {
			opts.Name = "ferry-go-worker"
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w.opts = opts
	w.log = opts.Logger.With("component", "ferry-worker", "worker", opts.Name)
	serverOpts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(math.MaxInt32),  // ferry bounds its batches by its own byte budget
		grpc.ForceServerCodecV2(newCodec()), // Events decoded by hand (codec.go)
		// ferry pings every processors[].keepalive.interval (at least 1s) to
		// notice a vanished worker; grpc-go's default (5 min) would answer
		// with GOAWAY too_many_pings. Half of ferry's 1s floor: the server
		// times the gap between arrivals, which can be a little under the
		// interval, and three early pings on an idle stream end it.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             500 * time.Millisecond,
			PermitWithoutStream: true,
		}),
	}
	w.server = grpc.NewServer(append(serverOpts, opts.ServerOptions...)...)
	ferrypb.RegisterProcessorServer(w.server, &service{w: w})
	return w
}

// Serve serves ferry's streams on lis until the Worker is stopped. It
// returns nil once Stop/GracefulStop has finished, ErrStopped if the Worker
// was stopped before, or the listener's error.
func (w *Worker) Serve(lis net.Listener) error {
	if w.err != nil {
		lis.Close()
		return w.err
	}
	w.stopMu.Lock()
	stopped := w.stopStarted
	w.stopMu.Unlock()
	if stopped {
		lis.Close()
		return ErrStopped
	}
	w.poolOnce.Do(func() {
		w.dispatch.start(w.opts.Concurrency, func(ec *eventCtx) { ec.s.runTask(ec) })
	})
	w.log.Info("ferry worker serving", "addr", lis.Addr().String(),
		"max_in_flight", w.opts.MaxInFlight, "concurrency", w.opts.Concurrency, "max_run", w.opts.MaxRun)
	err := w.server.Serve(lis)
	if w.stopping.Load() {
		<-w.stopDone
		if errors.Is(err, grpc.ErrServerStopped) {
			return ErrStopped
		}
		return nil
	}
	return err
}

// ListenAndServe listens on addr ("host:port", or "unix:/path") and serves
// until SIGTERM or SIGINT, then stops gracefully within Options.ShutdownGrace.
// It returns nil after that stop.
func (w *Worker) ListenAndServe(addr string) error {
	network := "tcp"
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", path
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- w.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	w.log.Info("ferry worker: signal received, stopping", "grace", w.opts.ShutdownGrace)
	w.GracefulStop(w.opts.ShutdownGrace)
	return <-served
}

// Stop stops the Worker gracefully; it is idempotent (a concurrent second
// call waits for the first). New streams are refused (UNAVAILABLE), no more
// credit is granted and events arriving from now on are not started (ferry
// redelivers them). Handlers already running may finish until ctx is done,
// and their results are sent; then every stream ends with UNAVAILABLE and the
// gRPC server stops. It returns ctx.Err() if handlers were still running when
// ctx was done (their contexts are cancelled and their results dropped).
func (w *Worker) Stop(ctx context.Context) error {
	w.stopMu.Lock()
	first := !w.stopStarted
	w.stopStarted = true
	w.stopMu.Unlock()
	if !first {
		select {
		case <-w.stopDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer close(w.stopDone)
	w.stopping.Store(true)

	w.mu.Lock()
	w.draining = true
	running := w.running
	var idle chan struct{}
	if running > 0 {
		idle = make(chan struct{})
		w.idle = idle
	}
	w.mu.Unlock()
	w.log.Info("ferry worker stopping", "running", running)

	var err error
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			err = ctx.Err()
			w.mu.Lock()
			running = w.running
			w.mu.Unlock()
			w.log.Warn("ferry worker: grace expired with handlers still running; their results are dropped",
				"running", running)
		}
	}
	w.mu.Lock()
	streams := make([]*stream, 0, len(w.streams))
	for s := range w.streams {
		streams = append(streams, s)
	}
	w.mu.Unlock()
	for _, s := range streams {
		s.requestFinish() // send what is queued, then end with UNAVAILABLE
	}

	// Flushing the last results gets a short budget beyond the grace.
	budget := 250 * time.Millisecond
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > budget {
		budget = time.Until(dl)
	}
	done := make(chan struct{})
	go func() {
		w.server.GracefulStop()
		close(done)
	}()
	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		w.server.Stop()
		<-done
	}
	// No stream is left to queue events; the pool ends once the handlers
	// still running (past the grace) return.
	w.dispatch.close()
	w.log.Info("ferry worker stopped")
	return err
}

// GracefulStop is Stop with a grace period.
func (w *Worker) GracefulStop(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return w.Stop(ctx)
}

// Stopping reports whether Stop was called. Long handlers may poll it.
func (w *Worker) Stopping() bool { return w.stopping.Load() }

// IsCancelled reports whether ferry cancelled the event with this delivery
// id (Event.Id) while it is being processed.
func (w *Worker) IsCancelled(id uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cancelled[id] > 0
}

// EventsReceived counts the events received over all streams.
func (w *Worker) EventsReceived() int64 { return w.eventsReceived.Load() }

// MaxHeld is the most events held at once on one stream (received, credit
// not yet returned).
func (w *Worker) MaxHeld() int64 { return w.maxHeld.Load() }

// CreditViolations counts events ferry sent beyond the credit granted (a
// protocol violation; they are processed anyway).
func (w *Worker) CreditViolations() int64 { return w.creditViolations.Load() }

// Name is the worker name sent in Ready.
func (w *Worker) Name() string { return w.opts.Name }

func (w *Worker) updateMaxHeld(held int64) {
	for {
		cur := w.maxHeld.Load()
		if held <= cur || w.maxHeld.CompareAndSwap(cur, held) {
			return
		}
	}
}

// call runs the handler for one event on a dispatcher goroutine. ran is
// false if the event was cancelled (or its stream ended) before it started.
func (w *Worker) call(ec *eventCtx) (res Result, ran bool) {
	if ec.Err() != nil {
		return Result{}, false
	}
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("ferry handler panicked", "event_id", ec.ev.GetId(), "panic", p,
				"stack", string(debug.Stack()))
			res, ran = Fail(fmt.Sprintf("panic: %v", p)), true
		}
	}()
	return w.handler(ec, ec.ev), true
}

type service struct {
	ferrypb.UnimplementedProcessorServer
	w *Worker
}

func (s *service) Process(srv ferrypb.Processor_ProcessServer) error {
	w := s.w
	w.mu.Lock()
	if w.draining {
		w.mu.Unlock()
		return status.Error(codes.Unavailable, "worker shutting down")
	}
	st := newStream(w, srv)
	w.streams[st] = struct{}{}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.streams, st)
		w.mu.Unlock()
	}()
	return st.run()
}
