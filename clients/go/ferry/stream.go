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

// completion: how one held event ended, queued for the writer.
type completion struct {
	id     uint64
	status completionStatus
	res    Result // for handled
}

type completionStatus uint8

const (
	skipped      completionStatus = iota // not run, or cancelled: credit only, no result
	handled                              // res is the result
	notAttempted                         // a run member after one that did not end OK
)

// One Process stream: a reader goroutine (Events, Cancel), a writer goroutine
// (Ready, then Results + Credit batches, or Results carrying the credit);
// its events run on the Worker's dispatcher pool (dispatch.go).
// Locking: stream.mu may be held while taking Worker.mu, never the reverse.
type stream struct {
	w   *Worker
	srv ferrypb.Processor_ProcessServer

	ctx                context.Context // handler contexts take Value/Deadline from it; cancelled when the stream ends
	cancel             context.CancelFunc
	wake               chan struct{} // cap 1: the writer has something to do
	resultsCarryCredit bool          // ferry sent `ferry-results-credit: 1`

	mu              sync.Mutex
	granted         int64                // credit granted: Ready + Credits
	received        int64                // events accepted for processing
	held            int64                // received, credit not yet returned
	inflight        map[uint64]*eventCtx // by id; duplicates chained by dupNext
	completed       []completion
	ending          bool // peer gone: results are dropped
	finishRequested bool // graceful stop: flush, then UNAVAILABLE
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
		inflight:           make(map[uint64]*eventCtx),
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
	for _, ec := range s.inflight {
		for ; ec != nil; ec = ec.dupNext {
			ec.cancel()
		}
	}
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
		MaxRun:      uint32(w.opts.MaxRun),
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
		results := toResults(s.completed[:n])
		clear(s.completed[:n]) // drop the Results' strings
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

// toResults: the Results of cs, in one allocation.
func toResults(cs []completion) []*ferrypb.Result {
	k := 0
	for i := range cs {
		if cs[i].status != skipped {
			k++
		}
	}
	if k == 0 {
		return nil
	}
	slab := make([]ferrypb.Result, k)
	results := make([]*ferrypb.Result, 0, k)
	for i := range cs {
		c := &cs[i]
		if c.status == skipped {
			continue
		}
		r := &slab[len(results)]
		if c.status == notAttempted {
			r.Id, r.Status = c.id, ferrypb.Result_NOT_ATTEMPTED
		} else {
			c.res.fill(r, c.id)
		}
		results = append(results, r)
	}
	return results
}

func (s *stream) takeEvents(events []*ferrypb.Event) {
	w := s.w
	n := int64(len(events))
	if n == 0 {
		return
	}
	w.eventsReceived.Add(n)
	s.mu.Lock()
	if s.ending || s.finishRequested {
		s.mu.Unlock()
		return
	}
	w.mu.Lock()
	if w.draining {
		w.mu.Unlock()
		s.mu.Unlock()
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
	tasks := make([]*eventCtx, 0, len(events))
	ecs := make([]eventCtx, len(events)) // one allocation for the message
	var runs []runTail                   // the runs of this message so far
	for i, ev := range events {
		ec := &ecs[i]
		ec.s, ec.ev = s, ev
		id := ev.GetId()
		if prev := s.inflight[id]; prev != nil {
			ec.dupNext = prev
			if prev.cancelled { // a duplicate of an id cancelled already
				s.markCancelled(ec)
			}
		}
		s.inflight[id] = ec
		if rid := ev.GetRunId(); rid != 0 {
			if i := findRun(runs, rid); i >= 0 {
				runs[i].tail.runNext = ec
				runs[i].tail = ec
				continue
			}
			runs = append(runs, runTail{rid, ec})
		}
		tasks = append(tasks, ec)
	}
	s.mu.Unlock()
	w.dispatch.push(tasks)
}

type runTail struct {
	id   uint64
	tail *eventCtx
}

// findRun: runs are usually contiguous, so the last one is checked first.
func findRun(runs []runTail, id uint64) int {
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].id == id {
			return i
		}
	}
	return -1
}

// markCancelled: under s.mu. IsCancelled is true before the handler sees
// its ctx done.
func (s *stream) markCancelled(ec *eventCtx) {
	ec.cancelled = true
	s.w.mu.Lock()
	s.w.cancelled[ec.ev.GetId()]++
	s.w.mu.Unlock()
	ec.cancel()
}

func (s *stream) cancelIDs(ids []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		for ec := s.inflight[id]; ec != nil; ec = ec.dupNext {
			if !ec.cancelled {
				s.markCancelled(ec)
			}
		}
	}
}

func (s *stream) complete(ec *eventCtx, c completion) {
	w := s.w
	id := ec.ev.GetId()
	c.id = id
	s.mu.Lock()
	// Unlink ec from its id's chain.
	if head := s.inflight[id]; head == ec {
		if ec.dupNext == nil {
			delete(s.inflight, id)
		} else {
			s.inflight[id] = ec.dupNext
		}
	} else {
		for p := head; p != nil; p = p.dupNext {
			if p.dupNext == ec {
				p.dupNext = ec.dupNext
				break
			}
		}
	}
	cancelled := ec.cancelled
	// Under s.mu: Stop sees running == 0 only with this result queued, and
	// IsCancelled forgets the id before the credit is sent.
	w.mu.Lock()
	w.running--
	if cancelled {
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
	if cancelled {
		c = completion{id: id, status: skipped}
	}
	s.completed = append(s.completed, c)
	s.mu.Unlock()
	s.notify()
}
