package ferry

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ferry/ferry/clients/go/ferrypb"
)

// errEnded: the stream ended (ferry closed it or it broke) while writing.
var errEnded = errors.New("stream ended")

// resultsCreditHeader: call metadata by which ferry says it takes credit
// inside Results (proto/ferry/v1/processor.proto).
const resultsCreditHeader = "ferry-results-credit"

type entry struct {
	count     int
	cancelled bool
	cancels   []context.CancelFunc
}

// One Process stream: a reader goroutine (Events, Cancel), a writer goroutine
// (Ready, then Results + Credit batches, or Results carrying the credit) and
// one goroutine per event.
// Locking: stream.mu may be held while taking Worker.mu, never the reverse.
type stream struct {
	w   *Worker
	srv ferrypb.Processor_ProcessServer

	ctx                context.Context // handler contexts derive from it; cancelled when the stream ends
	cancel             context.CancelFunc
	wake               chan struct{} // cap 1: the writer has something to do
	resultsCarryCredit bool          // ferry sent `ferry-results-credit: 1`

	mu              sync.Mutex
	granted         int64 // credit granted: Ready + Credits
	received        int64 // events accepted for processing
	held            int64 // received, credit not yet returned
	inflight        map[uint64]*entry
	completed       []*ferrypb.Result // nil: credit only (cancelled / skipped)
	ending          bool              // peer gone: results are dropped
	finishRequested bool              // graceful stop: flush, then UNAVAILABLE
}

func newStream(w *Worker, srv ferrypb.Processor_ProcessServer) *stream {
	ctx, cancel := context.WithCancel(srv.Context())
	return &stream{
		w:                  w,
		srv:                srv,
		ctx:                ctx,
		cancel:             cancel,
		wake:               make(chan struct{}, 1),
		resultsCarryCredit: resultsCarryCredit(srv.Context()),
		granted:            int64(w.opts.MaxInFlight),
		inflight:           make(map[uint64]*entry),
	}
}

// resultsCarryCredit: whether ferry takes credit inside Results. An older
// ferry ignores Results.credit: credit put there would be lost and the
// stream would starve.
func resultsCarryCredit(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(resultsCreditHeader) {
		if v == "1" {
			return true
		}
	}
	return false
}

func (s *stream) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *stream) run() error {
	s.w.log.Debug("ferry stream opened")
	readerDone := make(chan error, 1)
	writerDone := make(chan error, 1)
	go func() { writerDone <- s.writeLoop() }()
	go func() { readerDone <- s.readLoop() }()

	var err error
	select {
	case err = <-readerDone:
		// ferry closed its side (EOF) or the call broke: end now; running
		// handlers are cancelled and their results dropped.
		s.end()
		<-writerDone
		if errors.Is(err, io.EOF) {
			err = nil
		}
	case err = <-writerDone:
		s.end()
		if err == nil { // graceful stop: everything flushed
			err = status.Error(codes.Unavailable, "worker shutting down")
		}
		// The reader returns once the call is over (after this handler returns).
	}
	s.w.log.Debug("ferry stream closed", "error", err)
	return err
}

// end marks the stream over: no more results, handler contexts cancelled.
func (s *stream) end() {
	s.mu.Lock()
	s.ending = true
	s.completed = nil
	s.held = 0
	s.mu.Unlock()
	s.cancel()
	s.notify()
}

func (s *stream) requestFinish() {
	s.mu.Lock()
	s.finishRequested = true
	s.mu.Unlock()
	s.notify()
}

func (s *stream) readLoop() error {
	for {
		req, err := s.srv.Recv()
		if err != nil {
			return err
		}
		switch k := req.GetKind().(type) {
		case *ferrypb.ProcessRequest_Events:
			s.takeEvents(k.Events.GetEvents())
		case *ferrypb.ProcessRequest_Cancel:
			s.cancelIDs(k.Cancel.GetIds())
		default:
			s.w.log.Debug("ignoring a ProcessRequest of unknown kind")
		}
	}
}

func (s *stream) writeLoop() error {
	w := s.w
	ready := &ferrypb.ProcessResponse{Kind: &ferrypb.ProcessResponse_Ready{Ready: &ferrypb.Ready{
		MaxInFlight: uint32(w.opts.MaxInFlight),
		WorkerName:  w.opts.Name,
	}}}
	if err := s.srv.Send(ready); err != nil {
		return err
	}
	for {
		s.mu.Lock()
		for !s.ending && len(s.completed) == 0 && !s.finishRequested {
			s.mu.Unlock()
			select {
			case <-s.wake:
			case <-s.ctx.Done():
				return errEnded
			}
			s.mu.Lock()
		}
		if s.ending {
			s.mu.Unlock()
			return errEnded
		}
		if n := len(s.completed); n > 0 && n < w.opts.MaxResultsBatch && s.held > int64(n) {
			// Other events of this stream are still running: let those about
			// to finish join this batch (fewer, larger messages).
			s.mu.Unlock()
			runtime.Gosched()
			s.mu.Lock()
			if s.ending {
				s.mu.Unlock()
				return errEnded
			}
		}
		if len(s.completed) == 0 { // finish requested, all flushed
			s.mu.Unlock()
			return nil
		}
		n := min(len(s.completed), w.opts.MaxResultsBatch)
		var results []*ferrypb.Result
		for _, r := range s.completed[:n] {
			if r != nil {
				results = append(results, r)
			}
		}
		s.completed = s.completed[n:]
		if len(s.completed) == 0 {
			s.completed = nil
		}
		s.held -= int64(n)
		grant := !w.stopping.Load() // draining: no new work
		if grant {
			s.granted += int64(n)
		}
		s.mu.Unlock()

		if grant && s.resultsCarryCredit {
			// One message instead of two; with no results (all cancelled) it
			// carries the credit alone.
			msg := &ferrypb.ProcessResponse{Kind: &ferrypb.ProcessResponse_Results{
				Results: &ferrypb.Results{Results: results, Credit: uint32(n)}}}
			if err := s.srv.Send(msg); err != nil {
				return err
			}
			continue
		}
		if len(results) > 0 {
			msg := &ferrypb.ProcessResponse{Kind: &ferrypb.ProcessResponse_Results{
				Results: &ferrypb.Results{Results: results}}}
			if err := s.srv.Send(msg); err != nil {
				return err
			}
		}
		if grant {
			msg := &ferrypb.ProcessResponse{Kind: &ferrypb.ProcessResponse_Credit{
				Credit: &ferrypb.Credit{N: uint32(n)}}}
			if err := s.srv.Send(msg); err != nil {
				return err
			}
		}
	}
}

func (s *stream) takeEvents(events []*ferrypb.Event) {
	w := s.w
	n := int64(len(events))
	if n == 0 {
		return
	}
	w.eventsReceived.Add(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ending || s.finishRequested {
		return
	}
	w.mu.Lock()
	if w.draining {
		w.mu.Unlock()
		return // not started: ferry redelivers them when this stream closes
	}
	w.running += n
	w.mu.Unlock()

	s.received += n
	if s.received > s.granted {
		over := min(n, s.received-s.granted)
		w.creditViolations.Add(over)
		w.log.Warn("ferry protocol violation: events beyond the credit granted; processing them",
			"over", over, "granted", s.granted)
	}
	s.held += n
	w.updateMaxHeld(s.held)
	for _, ev := range events {
		e := s.inflight[ev.GetId()]
		if e == nil {
			e = &entry{}
			s.inflight[ev.GetId()] = e
		}
		e.count++
		ctx, cancel := context.WithCancel(s.ctx)
		e.cancels = append(e.cancels, cancel)
		if e.cancelled { // a duplicate of an id cancelled already
			cancel()
		}
		go s.runEvent(ctx, cancel, ev, e)
	}
}

func (s *stream) cancelIDs(ids []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var marked []*entry
	var markedIDs []uint64
	for _, id := range ids {
		e := s.inflight[id]
		if e == nil || e.cancelled {
			continue // finished already, or unknown
		}
		e.cancelled = true
		marked = append(marked, e)
		markedIDs = append(markedIDs, id)
	}
	if len(marked) == 0 {
		return
	}
	// IsCancelled is true before any handler sees its ctx done.
	s.w.mu.Lock()
	for _, id := range markedIDs {
		s.w.cancelled[id]++
	}
	s.w.mu.Unlock()
	for _, e := range marked {
		for _, c := range e.cancels {
			c()
		}
	}
}

func (s *stream) runEvent(ctx context.Context, cancel context.CancelFunc, ev *ferrypb.Event, e *entry) {
	res, ran := s.w.call(ctx, ev)
	cancel()
	s.complete(ev.GetId(), res, ran, e)
}

func (s *stream) complete(id uint64, res Result, ran bool, e *entry) {
	w := s.w
	s.mu.Lock()
	e.count--
	cancelled := e.cancelled
	uncancel := false
	if e.count == 0 {
		if s.inflight[id] == e {
			delete(s.inflight, id)
		}
		uncancel = cancelled
	}
	// Under s.mu: Stop sees running == 0 only with this result queued, and
	// IsCancelled forgets the id before the credit is sent.
	w.mu.Lock()
	w.running--
	if uncancel {
		if w.cancelled[id]--; w.cancelled[id] <= 0 {
			delete(w.cancelled, id)
		}
	}
	if w.running == 0 && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
	w.mu.Unlock()
	if s.ending {
		s.mu.Unlock()
		return
	}
	var r *ferrypb.Result
	if ran && !cancelled {
		r = res.toProto(id)
	}
	s.completed = append(s.completed, r)
	s.mu.Unlock()
	s.notify()
}
