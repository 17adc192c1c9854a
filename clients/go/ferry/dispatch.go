package ferry

import (
	"context"
	"sync"
	"time"

	"github.com/ferry/ferry/clients/go/ferrypb"
)

// The dispatcher: a fixed pool of Options.Concurrency goroutines that take
// tasks from one FIFO shared by all streams. A task is one event, or a run
// (its members linked by eventCtx.runNext), handled start to end by the one
// goroutine that took it, so a run's members run one at a time, in message
// order. A pool instead of a goroutine per event: no goroutine start, no
// semaphore hand-off and no fresh stack per event.
type dispatcher struct {
	mu     sync.Mutex
	cond   sync.Cond
	queue  []*eventCtx // tasks not started; queue[head:] is live
	head   int
	closed bool // no more tasks: the goroutines exit once the queue is empty
}

func (d *dispatcher) start(n int, run func(*eventCtx)) {
	d.cond.L = &d.mu
	for range n {
		go func() {
			for {
				t := d.take()
				if t == nil {
					return
				}
				run(t)
			}
		}()
	}
}

// push queues tasks (their order is kept).
func (d *dispatcher) push(tasks []*eventCtx) {
	d.mu.Lock()
	if d.head > 0 && d.head >= len(d.queue)/2 { // reuse the consumed front
		n := copy(d.queue, d.queue[d.head:])
		clear(d.queue[n:])
		d.queue, d.head = d.queue[:n], 0
	}
	d.queue = append(d.queue, tasks...)
	d.mu.Unlock()
	if len(tasks) == 1 {
		d.cond.Signal()
	} else {
		d.cond.Broadcast()
	}
}

func (d *dispatcher) take() *eventCtx {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.head == len(d.queue) {
		if d.closed {
			return nil
		}
		d.cond.Wait()
	}
	t := d.queue[d.head]
	d.queue[d.head] = nil
	d.head++
	return t
}

func (d *dispatcher) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cond.Broadcast()
}

// closedChan is the Done channel of an eventCtx cancelled before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// eventCtx is everything the SDK keeps about one delivered event, and the
// handler's context.Context, allocated together with the others of its
// Events message: no context.WithCancel (which also registers with its
// parent) and no separate entry per event.
// It is cancelled when ferry cancels the event and when its stream ends;
// Value and Deadline are the stream's.
type eventCtx struct {
	s  *stream
	ev *ferrypb.Event
	// runNext: the next member of this event's run (set before the task is
	// queued, read only by the goroutine running the run).
	runNext *eventCtx
	// Guarded by stream.mu.
	dupNext   *eventCtx // another delivery of the same id held on this stream
	cancelled bool      // by ferry's Cancel: no result is sent

	mu   sync.Mutex
	done chan struct{} // made on the first Done call
	err  error
}

func (c *eventCtx) Deadline() (time.Time, bool) { return c.s.ctx.Deadline() }
func (c *eventCtx) Value(key any) any           { return c.s.ctx.Value(key) }

func (c *eventCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			c.done = closedChan
		} else {
			c.done = make(chan struct{})
		}
	}
	return c.done
}

func (c *eventCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *eventCtx) String() string { return "ferry.eventCtx" }

func (c *eventCtx) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
}

// runTask handles one task: an event, or a run's members in order. After a
// member that did not end OK (RETRY, FAIL, a panic, a Cancel, a skip because
// its stream ended) and once the Worker is stopping, the rest of the run is
// answered NOT_ATTEMPTED without calling the handler: ferry puts them back
// at the head of their lane without counting an attempt.
func (s *stream) runTask(ec *eventCtx) {
	w := s.w
	inRun := ec.runNext != nil
	abort := false
	for first := true; ec != nil; first = false {
		next := ec.runNext
		ec.runNext = nil
		if abort || (inRun && !first && w.stopping.Load()) {
			abort = true
			s.complete(ec, completion{status: notAttempted})
			ec = next
			continue
		}
		res, ran := w.call(ec)
		if !ran {
			s.complete(ec, completion{status: skipped})
		} else {
			s.complete(ec, completion{status: handled, res: res})
		}
		abort = !ran || res.Status != ferrypb.Result_OK || ec.Err() != nil
		ec = next
	}
}
