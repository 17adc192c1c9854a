package ferry_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/ferry/ferry/clients/go/ferry"
	"github.com/ferry/ferry/clients/go/ferrypb"
)

var statusNotAttempted = ferrypb.Result_NOT_ATTEMPTED

// sendRuns sends one Events message; runIDs[i] is the run_id of ids[i].
func (c *client) sendRuns(ids, runIDs []uint64) {
	c.t.Helper()
	evs := make([]*ferrypb.Event, len(ids))
	for i, id := range ids {
		evs[i] = &ferrypb.Event{Id: id, Key: []byte("k"), Payload: []byte(fmt.Sprint(id)), Attempt: 1, RunId: runIDs[i]}
	}
	if err := c.stream.Send(&ferrypb.ProcessRequest{Kind: &ferrypb.ProcessRequest_Events{Events: &ferrypb.Events{Events: evs}}}); err != nil {
		c.t.Fatal(err)
	}
}

// statuses: "id:STATUS" of every result so far, by id.
func (c *client) statuses() string {
	var out string
	for _, id := range c.resultIDs() {
		out += fmt.Sprintf("%d:%v ", id, c.results[id].GetStatus())
	}
	return out
}

// callLog records the handler calls, in order.
type callLog struct {
	mu    sync.Mutex
	ids   []uint64
	inRun atomic.Int32 // handlers of run 1 running now
	over  atomic.Bool  // two members of run 1 ran at once
}

func (l *callLog) add(ev *ferrypb.Event) {
	l.mu.Lock()
	l.ids = append(l.ids, ev.GetId())
	l.mu.Unlock()
}

func (l *callLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.ids)
}

func TestReadyAnnouncesMaxRun(t *testing.T) {
	for _, tc := range []struct{ opt, want int }{{0, 64}, {1, 1}, {7, 7}} {
		h := start(t, ok, ferry.Options{MaxRun: tc.opt})
		if got := h.dial().readReady().GetMaxRun(); got != uint32(tc.want) {
			t.Errorf("MaxRun %d: Ready.max_run %d, want %d", tc.opt, got, tc.want)
		}
	}
}

func TestMaxRunOutOfRange(t *testing.T) {
	for _, n := range []int{-1, 1 << 31} {
		w := ferry.NewWorker(ok, ferry.Options{MaxRun: n, Logger: quietLogger()})
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Serve(lis); err == nil {
			t.Errorf("MaxRun %d accepted", n)
		}
	}
}

// A run's members run one at a time in message order, even with idle
// handler slots; every one ends OK.
func TestRunMembersRunSequentiallyInOrder(t *testing.T) {
	var log callLog
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		if log.inRun.Add(1) > 1 {
			log.over.Store(true)
		}
		log.add(e)
		time.Sleep(2 * time.Millisecond) // a concurrent member would overlap
		log.inRun.Add(-1)
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 16, Concurrency: 8})
	c := h.dialReady()
	c.sendRuns([]uint64{5, 3, 9, 1, 7}, []uint64{1, 1, 1, 1, 1})
	c.readCredit(5)
	if got := log.String(); got != "[5 3 9 1 7]" || log.over.Load() {
		t.Errorf("calls %s (overlap %v), want [5 3 9 1 7] one at a time", got, log.over.Load())
	}
	if got := c.statuses(); got != "1:OK 3:OK 5:OK 7:OK 9:OK " {
		t.Errorf("results %s", got)
	}
}

// After a member ends RETRY, FAIL, with a zero Result or a panic, the later
// members are answered NOT_ATTEMPTED without calling the handler; the
// earlier ones keep their results.
func TestRunAfterNonOKMemberRestIsNotAttempted(t *testing.T) {
	for name, bad := range map[string]func() ferry.Result{
		"retry": func() ferry.Result { return ferry.Retry("busy", time.Second) },
		"fail":  func() ferry.Result { return ferry.Fail("bad") },
		"zero":  func() ferry.Result { return ferry.Result{} },
		"panic": func() ferry.Result { panic("boom") },
	} {
		t.Run(name, func(t *testing.T) {
			var log callLog
			h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
				log.add(e)
				if e.GetId() == 2 {
					return bad()
				}
				return ferry.OK()
			}, ferry.Options{MaxInFlight: 8})
			c := h.dialReady()
			c.sendRuns([]uint64{1, 2, 3, 4}, []uint64{9, 9, 9, 9})
			c.readCredit(4)
			if got := log.String(); got != "[1 2]" {
				t.Errorf("handler calls %s, want [1 2]", got)
			}
			want := map[uint64]ferrypb.Result_Status{1: statusOK, 3: statusNotAttempted, 4: statusNotAttempted}
			want[2] = statusFail
			if name == "retry" {
				want[2] = statusRetry
			}
			for id, st := range want {
				if r := c.results[id]; r.GetStatus() != st {
					t.Errorf("event %d: %v, want %v", id, r, st)
				}
			}
			if r := c.results[3]; r.GetMessage() != "" || r.GetRetryAfterMs() != 0 {
				t.Errorf("NOT_ATTEMPTED carries %v", r)
			}
		})
	}
}

// A Cancel of a running member drops its result and ends the run: the later
// members are not handled (those ferry did not cancel are NOT_ATTEMPTED).
func TestRunCancelledMemberEndsTheRun(t *testing.T) {
	var log callLog
	started := make(chan struct{})
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		log.add(e)
		if e.GetId() == 2 {
			close(started)
			<-ctx.Done()
			return ferry.OK() // an OK after the Cancel does not count
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 8})
	c := h.dialReady()
	c.sendRuns([]uint64{1, 2, 3, 4}, []uint64{5, 5, 5, 5})
	<-started
	c.sendCancel(2, 4)
	c.readCredit(4)
	if got := log.String(); got != "[1 2]" {
		t.Errorf("handler calls %s, want [1 2]", got)
	}
	if got := c.statuses(); got != "1:OK 3:NOT_ATTEMPTED " {
		t.Errorf("results %s, want 1:OK 3:NOT_ATTEMPTED", got)
	}
}

// A member cancelled before it starts is skipped, and so is the rest.
func TestRunMemberCancelledBeforeStart(t *testing.T) {
	var log callLog
	started, release := make(chan struct{}), make(chan struct{})
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		log.add(e)
		if e.GetId() == 1 {
			close(started)
			<-release
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 8})
	c := h.dialReady()
	c.sendRuns([]uint64{1, 2, 3}, []uint64{5, 5, 5})
	<-started
	c.sendCancel(2)
	for deadline := time.Now().Add(timeout); !h.w.IsCancelled(2); { // the Cancel arrived
		if time.Now().After(deadline) {
			t.Fatal("event 2 not cancelled: did it run before event 1 ended?")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	c.readCredit(3)
	if got := log.String(); got != "[1]" {
		t.Errorf("handler calls %s, want [1]", got)
	}
	if got := c.statuses(); got != "1:OK 3:NOT_ATTEMPTED " {
		t.Errorf("results %s", got)
	}
}

// Graceful stop during a member: its result is sent, the rest of the run is
// NOT_ATTEMPTED, the handler is not called again.
func TestRunGracefulStopAnswersTheRestNotAttempted(t *testing.T) {
	var log callLog
	var w atomic.Pointer[ferry.Worker]
	started := make(chan struct{})
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		log.add(e)
		if e.GetId() == 1 {
			close(started)
			for !w.Load().Stopping() {
				time.Sleep(time.Millisecond)
			}
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 8})
	w.Store(h.w)
	c := h.dialReady()
	c.sendRuns([]uint64{1, 2, 3}, []uint64{4, 4, 4})
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- h.w.GracefulStop(timeout) }()
	for len(c.results) < 3 {
		m := c.mustRead()
		for _, r := range m.GetResults().GetResults() {
			c.results[r.GetId()] = r
		}
	}
	if code := c.readEnd(); code != codes.Unavailable {
		t.Errorf("stream ended with %v", code)
	}
	if err := <-stopped; err != nil {
		t.Errorf("stop: %v", err)
	}
	if got := log.String(); got != "[1]" {
		t.Errorf("handler calls %s, want [1]", got)
	}
	if got := c.statuses(); got != "1:OK 2:NOT_ATTEMPTED 3:NOT_ATTEMPTED " {
		t.Errorf("results %s", got)
	}
}

// Runs of one message are independent of each other and of run_id 0
// events: members of different runs (interleaved in the message) and plain
// events run at the same time, and one run's failure leaves the other alone.
func TestRunsAreIndependent(t *testing.T) {
	var log callLog
	var mu sync.Mutex
	running := map[uint64]bool{}
	together := make(chan struct{}) // closed when 1, 2 and 100 ran at once
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		log.add(e)
		id := e.GetId()
		if id == 1 || id == 2 || id == 100 {
			mu.Lock()
			running[id] = true
			if len(running) == 3 {
				close(together)
			}
			mu.Unlock()
			select {
			case <-together:
			case <-time.After(timeout):
				t.Errorf("event %d: the others did not run alongside", id)
			}
		}
		if id == 1 {
			return ferry.Fail("run A fails")
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 8, Concurrency: 4})
	c := h.dialReady()
	// Run 7 = A: 1, 3; run 8 = B: 2, 4; 100 and 101: no run.
	c.sendRuns([]uint64{1, 2, 100, 3, 4, 101}, []uint64{7, 8, 0, 7, 8, 0})
	c.readCredit(6)
	if got := c.statuses(); got != "1:FAIL 2:OK 3:NOT_ATTEMPTED 4:OK 100:OK 101:OK " {
		t.Errorf("results %s", got)
	}
}

// The stream ending mid-run: the rest of the run is not handled.
func TestRunStreamEndStopsTheRun(t *testing.T) {
	var log callLog
	started := make(chan struct{})
	done := make(chan struct{})
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		log.add(e)
		if e.GetId() == 1 {
			close(started)
			<-ctx.Done()
			defer close(done)
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 8})
	c := h.dialReady()
	c.sendRuns([]uint64{1, 2, 3}, []uint64{4, 4, 4})
	<-started
	c.cancel() // ferry goes away
	<-done
	// Another stream's events still run on the pool; the old run's rest was skipped.
	c2 := h.dialReady()
	c2.sendEvents([]uint64{50})
	c2.readCredit(1)
	if got := log.String(); got != "[1 50]" {
		t.Errorf("handler calls %s, want [1 50]", got)
	}
}

// The handler's context: ferry's Cancel is its cause and reaches contexts
// derived from it; its values are the stream's (the call metadata).
func TestHandlerContextCauseDerivedAndValues(t *testing.T) {
	type seen struct {
		cause, derived error
		header         []string
	}
	got := make(chan seen, 1)
	started := make(chan struct{})
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		md, _ := metadata.FromIncomingContext(ctx)
		child, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		close(started)
		<-child.Done()
		got <- seen{context.Cause(ctx), child.Err(), md.Get("ferry-results-credit")}
		return ferry.OK()
	}, ferry.Options{})
	c := h.dialResultsCredit()
	c.readReady()
	c.sendEvents([]uint64{1})
	<-started
	c.sendCancel(1)
	s := <-got
	if s.cause != context.Canceled || s.derived != context.Canceled || fmt.Sprint(s.header) != "[1]" {
		t.Errorf("cause %v, derived %v, metadata %v", s.cause, s.derived, s.header)
	}
}
