package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/ferry/ferry/clients/go/ferry"
	"github.com/ferry/ferry/clients/go/ferrypb"
)

const timeout = 10 * time.Second

var (
	statusOK    = ferrypb.Result_OK
	statusRetry = ferrypb.Result_RETRY
	statusFail  = ferrypb.Result_FAIL
)

// harness: a Worker serving on an in-memory listener.
type harness struct {
	t      *testing.T
	w      *ferry.Worker
	lis    *bufconn.Listener
	served chan error
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func start(t *testing.T, h ferry.Handler, opts ferry.Options) *harness {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "test-worker"
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	hs := &harness{t: t, w: ferry.NewWorker(h, opts), lis: bufconn.Listen(1 << 20), served: make(chan error, 1)}
	go func() { hs.served <- hs.w.Serve(hs.lis) }()
	t.Cleanup(func() {
		hs.w.GracefulStop(0)
		select {
		case err := <-hs.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(timeout):
			t.Errorf("Serve did not return after stop")
		}
	})
	return hs
}

// client: a Process stream, as ferry opens it; a goroutine reads responses.
type client struct {
	t        *testing.T
	conn     *grpc.ClientConn
	stream   ferrypb.Processor_ProcessClient
	cancel   context.CancelFunc
	msgs     chan *ferrypb.ProcessResponse
	endErr   error // set when msgs is closed
	results  map[uint64]*ferrypb.Result
	credit   int64
	credits  int
	resMsgs  int
	readDone chan struct{}
	// resultsCredit: the stream sent `ferry-results-credit: 1`, as ferry
	// does, so the worker may carry credit inside Results.
	resultsCredit bool
}

func (h *harness) dial() *client {
	h.t.Helper()
	return newClient(h.t, h.conn(), false)
}

// dialResultsCredit opens a stream whose call metadata says
// `ferry-results-credit: 1`.
// dialReady opens a stream and reads the worker's Ready.
func (h *harness) dialReady() *client {
	h.t.Helper()
	c := h.dial()
	c.readReady()
	return c
}

func (h *harness) dialResultsCredit() *client {
	h.t.Helper()
	return newClient(h.t, h.conn(), true)
}

func (h *harness) conn() *grpc.ClientConn {
	h.t.Helper()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.t.Fatal(err)
	}
	return conn
}

func newClient(t *testing.T, conn *grpc.ClientConn, resultsCredit bool) *client {
	ctx, cancel := context.WithCancel(context.Background())
	if resultsCredit {
		ctx = metadata.AppendToOutgoingContext(ctx, "ferry-results-credit", "1")
	}
	stream, err := ferrypb.NewProcessorClient(conn).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, conn: conn, stream: stream, cancel: cancel,
		msgs: make(chan *ferrypb.ProcessResponse, 1024), results: map[uint64]*ferrypb.Result{},
		readDone: make(chan struct{}), resultsCredit: resultsCredit}
	go func() {
		defer close(c.readDone)
		defer close(c.msgs)
		for {
			m, err := stream.Recv()
			if err != nil {
				c.endErr = err
				return
			}
			c.msgs <- m
		}
	}()
	t.Cleanup(func() { cancel(); conn.Close() })
	return c
}

func (c *client) read() (*ferrypb.ProcessResponse, bool) {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		return m, ok
	case <-time.After(timeout):
		c.t.Fatalf("no message in %v", timeout)
		return nil, false
	}
}

func (c *client) mustRead() *ferrypb.ProcessResponse {
	c.t.Helper()
	m, ok := c.read()
	if !ok {
		c.t.Fatalf("stream ended: %v", c.endErr)
	}
	return m
}

// readEnd reads to the end of the stream and returns its status code.
func (c *client) readEnd() codes.Code {
	c.t.Helper()
	m, ok := c.read()
	if ok {
		c.t.Fatalf("expected the stream to end, got %v", m)
	}
	if errors.Is(c.endErr, io.EOF) {
		return codes.OK
	}
	return status.Code(c.endErr)
}

func (c *client) readReady() *ferrypb.Ready {
	c.t.Helper()
	m := c.mustRead()
	if m.GetReady() == nil {
		c.t.Fatalf("first message is not Ready: %v", m)
	}
	return m.GetReady()
}

func (c *client) sendEvents(ids []uint64, payloads ...string) {
	c.t.Helper()
	var evs []*ferrypb.Event
	for i, id := range ids {
		p := "p"
		if i < len(payloads) {
			p = payloads[i]
		}
		evs = append(evs, &ferrypb.Event{Id: id, Key: []byte(fmt.Sprintf("k%d", id)), Payload: []byte(p), Attempt: 1})
	}
	if err := c.stream.Send(&ferrypb.ProcessRequest{Kind: &ferrypb.ProcessRequest_Events{Events: &ferrypb.Events{Events: evs}}}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) sendCancel(ids ...uint64) {
	c.t.Helper()
	if err := c.stream.Send(&ferrypb.ProcessRequest{Kind: &ferrypb.ProcessRequest_Cancel{Cancel: &ferrypb.Cancel{Ids: ids}}}); err != nil {
		c.t.Fatal(err)
	}
}

// readCredit reads until want more units of credit arrived, collecting results.
func (c *client) readCredit(want int64) {
	c.t.Helper()
	var got int64
	for got < want {
		m := c.mustRead()
		switch {
		case m.GetCredit() != nil:
			got += int64(m.GetCredit().GetN())
			c.credit += int64(m.GetCredit().GetN())
			c.credits++
		case m.GetResults() != nil:
			c.resMsgs++
			// Only a client that sent the header may get credit here: an
			// older ferry would ignore it and starve.
			n := int64(m.GetResults().GetCredit())
			if n != 0 && !c.resultsCredit {
				c.t.Errorf("credit %d inside Results without the header", n)
			}
			got += n
			c.credit += n
			for _, r := range m.GetResults().GetResults() {
				if _, dup := c.results[r.GetId()]; dup {
					c.t.Errorf("duplicate result for %d", r.GetId())
				}
				c.results[r.GetId()] = r
			}
		default:
			c.t.Fatalf("unexpected message %v", m)
		}
	}
}

func (c *client) resultIDs() []uint64 {
	var ids []uint64
	for id := range c.results {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func ok(context.Context, *ferrypb.Event) ferry.Result { return ferry.OK() }

func TestResultHelpers(t *testing.T) {
	cases := []struct {
		r    ferry.Result
		want uint32
	}{
		{ferry.Retry("x", 1500*time.Millisecond), 1500},
		{ferry.Retry("x", 0), 0},
		{ferry.Retry("x", time.Microsecond), 1},
		{ferry.Retry("x", -time.Second), 0},
		{ferry.Retry("x", 100*24*time.Hour), 1<<32 - 1},
	}
	for _, c := range cases {
		if got := c.r.RetryAfterMillis(); got != c.want {
			t.Errorf("%v: RetryAfterMillis = %d, want %d", c.r.RetryAfter, got, c.want)
		}
	}
	if ferry.OK().Status != statusOK || ferry.Fail("m").Status != statusFail || ferry.Fail("m").Message != "m" {
		t.Error("OK/Fail helpers")
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []ferry.Options{{MaxInFlight: -1}, {MaxInFlight: 1 << 31}, {Concurrency: -2}, {MaxResultsBatch: -1}} {
		w := ferry.NewWorker(ok, o)
		lis, _ := net.Listen("tcp", "127.0.0.1:0")
		if err := w.Serve(lis); err == nil {
			t.Errorf("Serve accepted %+v", o)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewWorker(nil) did not panic")
		}
	}()
	ferry.NewWorker(nil, ferry.Options{})
}

func TestReadyThenResultsAndCredit(t *testing.T) {
	h := start(t, ok, ferry.Options{MaxInFlight: 8, Name: "w-1"})
	c := h.dial()
	ready := c.readReady()
	if ready.GetMaxInFlight() != 8 || ready.GetWorkerName() != "w-1" {
		t.Fatalf("ready = %v", ready)
	}
	c.sendEvents([]uint64{1, 2, 3})
	c.readCredit(3)
	if c.credit != 3 || fmt.Sprint(c.resultIDs()) != "[1 2 3]" {
		t.Fatalf("credit %d, results %v", c.credit, c.resultIDs())
	}
	for id, r := range c.results {
		if r.GetStatus() != statusOK {
			t.Errorf("%d: %v", id, r)
		}
	}
	if h.w.EventsReceived() != 3 || h.w.CreditViolations() != 0 || h.w.MaxHeld() < 1 || h.w.MaxHeld() > 3 {
		t.Errorf("counters: received %d violations %d max_held %d", h.w.EventsReceived(), h.w.CreditViolations(), h.w.MaxHeld())
	}
}

func TestCreditRidesInResultsWhenFerryAsks(t *testing.T) {
	h := start(t, ok, ferry.Options{MaxInFlight: 8})
	c := h.dialResultsCredit()
	c.readReady()
	for id := uint64(1); id <= 20; id += 4 {
		c.sendEvents([]uint64{id, id + 1, id + 2, id + 3})
		c.readCredit(4)
	}
	if c.credit != 20 || c.credits != 0 || len(c.results) != 20 {
		t.Errorf("credit %d in %d Credit message(s) (want 20 in none), results %d",
			c.credit, c.credits, len(c.results))
	}
	if h.w.CreditViolations() != 0 {
		t.Errorf("violations %d", h.w.CreditViolations())
	}
}

func TestWithoutTheHeaderCreditIsItsOwnMessage(t *testing.T) {
	h := start(t, ok, ferry.Options{MaxInFlight: 8})
	c := h.dialReady()
	c.sendEvents([]uint64{1, 2, 3, 4})
	c.readCredit(4) // fails on credit inside Results
	if c.credit != 4 || c.credits < 1 || fmt.Sprint(c.resultIDs()) != "[1 2 3 4]" {
		t.Errorf("credit %d in %d Credit message(s), results %v", c.credit, c.credits, c.resultIDs())
	}
}

func TestCreditOfCancelledEventsRidesInAnEmptyResults(t *testing.T) {
	started := make(chan struct{})
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		close(started)
		<-ctx.Done()
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 4})
	c := h.dialResultsCredit()
	c.readReady()
	c.sendEvents([]uint64{1})
	<-started
	c.sendCancel(1)
	m := c.mustRead()
	if rs := m.GetResults(); rs == nil || len(rs.GetResults()) != 0 || rs.GetCredit() != 1 {
		t.Errorf("want an empty Results with credit 1, got %v", m)
	}
}

func TestDefaults(t *testing.T) {
	h := start(t, ok, ferry.Options{Name: "x"})
	if got := h.dial().readReady().GetMaxInFlight(); got != 64 {
		t.Errorf("default MaxInFlight = %d", got)
	}
}

func TestOutcomesMapToStatuses(t *testing.T) {
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		switch string(e.GetPayload()) {
		case "retry":
			return ferry.Retry("later", 1500*time.Millisecond)
		case "retry-default":
			return ferry.Retry("again", 0)
		case "retry-1us":
			return ferry.Retry("soon", time.Microsecond)
		case "fail":
			return ferry.Fail("bad record")
		case "panic":
			panic("boom")
		case "panic-err":
			panic(errors.New("err boom"))
		case "zero":
			return ferry.Result{}
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 16})
	c := h.dialReady()
	c.sendEvents([]uint64{1, 2, 3, 4, 5, 6, 7, 8}, "retry", "retry-default", "retry-1us", "fail", "panic", "panic-err", "zero", "ok")
	c.readCredit(8)
	r := c.results
	check := func(id uint64, st ferrypb.Result_Status, msg string, after uint32) {
		t.Helper()
		if r[id].GetStatus() != st || r[id].GetMessage() != msg || r[id].GetRetryAfterMs() != after {
			t.Errorf("%d: got %v, want %v %q %d", id, r[id], st, msg, after)
		}
	}
	check(1, statusRetry, "later", 1500)
	check(2, statusRetry, "again", 0)
	check(3, statusRetry, "soon", 1)
	check(4, statusFail, "bad record", 0)
	check(5, statusFail, "panic: boom", 0)
	check(6, statusFail, "panic: err boom", 0)
	if r[7].GetStatus() != statusFail || r[7].GetMessage() == "" {
		t.Errorf("zero Result: %v", r[7])
	}
	check(8, statusOK, "", 0)

	// Panicking handlers did not kill the stream.
	c.sendEvents([]uint64{9})
	c.readCredit(1)
	if r[9].GetStatus() != statusOK {
		t.Errorf("after panic: %v", r[9])
	}
}

func TestEventsOfOneMessageRunConcurrently(t *testing.T) {
	var mu sync.Mutex
	started := 0
	all := make(chan struct{})
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		mu.Lock()
		started++
		if started == 3 {
			close(all)
		}
		mu.Unlock()
		select { // fails unless all three run at the same time
		case <-all:
			return ferry.OK()
		case <-time.After(timeout):
			return ferry.Fail("not concurrent")
		}
	}, ferry.Options{MaxInFlight: 8, Concurrency: 3})
	c := h.dialReady()
	c.sendEvents([]uint64{1, 2, 3})
	c.readCredit(3)
	for id, r := range c.results {
		if r.GetStatus() != statusOK {
			t.Errorf("%d: %v", id, r)
		}
	}
}

func TestConcurrencyBoundsRunningHandlers(t *testing.T) {
	var running, peak atomic.Int64
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 20, Concurrency: 2})
	c := h.dialReady()
	c.sendEvents([]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	c.readCredit(10)
	if len(c.results) != 10 || peak.Load() != 2 {
		t.Errorf("results %d, peak %d", len(c.results), peak.Load())
	}
}

func TestCancelCancelsContextSuppressesResultReturnsCredit(t *testing.T) {
	var w atomic.Pointer[ferry.Worker]
	started := make(chan struct{})
	sawCancel := make(chan bool, 1)
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		if e.GetId() == 1 {
			close(started)
			select {
			case <-ctx.Done():
				sawCancel <- w.Load().IsCancelled(1)
			case <-time.After(timeout):
				sawCancel <- false
			}
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 4})
	w.Store(h.w)
	c := h.dialReady()
	c.sendEvents([]uint64{1})
	<-started
	c.sendCancel(1, 99) // 99 is unknown: ignored
	c.sendEvents([]uint64{2})
	c.readCredit(2)
	if c.credit != 2 || fmt.Sprint(c.resultIDs()) != "[2]" {
		t.Errorf("credit %d, results %v", c.credit, c.resultIDs())
	}
	if !<-sawCancel {
		t.Error("handler's ctx was not cancelled (or IsCancelled false)")
	}
	if h.w.IsCancelled(1) {
		t.Error("IsCancelled(1) after the handler finished")
	}
}

func TestCancelledBeforeStartIsSkipped(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var ran sync.Map
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		ran.Store(e.GetId(), true)
		if e.GetId() == 1 {
			close(started)
			<-release
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 4, Concurrency: 1}) // event 2 waits for event 1's slot
	c := h.dialReady()
	c.sendEvents([]uint64{1})
	<-started
	c.sendEvents([]uint64{2})
	c.sendCancel(2)
	time.Sleep(100 * time.Millisecond) // let the Cancel arrive before the slot frees
	close(release)
	c.readCredit(2)
	if fmt.Sprint(c.resultIDs()) != "[1]" {
		t.Errorf("results %v", c.resultIDs())
	}
	if _, did := ran.Load(uint64(2)); did {
		t.Error("cancelled event 2 ran")
	}
}

func TestMaxHeldNeverExceedsCreditWhenClientRespectsIt(t *testing.T) {
	const credit, total = 4, 300
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		if e.GetId()%7 == 0 {
			return ferry.Retry("r", 0)
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: credit, Concurrency: 3, MaxResultsBatch: 3})
	c := h.dial()
	have := int64(c.readReady().GetMaxInFlight())
	next := uint64(1)
	for len(c.results) < total {
		var batch []uint64
		for have > 0 && next <= total {
			batch = append(batch, next)
			next++
			have--
		}
		if len(batch) > 0 {
			c.sendEvents(batch)
		}
		m := c.mustRead()
		if m.GetCredit() != nil {
			have += int64(m.GetCredit().GetN())
		}
		if rs := m.GetResults().GetResults(); rs != nil {
			if len(rs) > 3 {
				t.Errorf("Results message with %d results", len(rs))
			}
			for _, r := range rs {
				c.results[r.GetId()] = r
			}
		}
	}
	for id, r := range c.results {
		want := statusOK
		if id%7 == 0 {
			want = statusRetry
		}
		if r.GetStatus() != want {
			t.Errorf("%d: %v", id, r)
		}
	}
	if h.w.EventsReceived() != total || h.w.CreditViolations() != 0 || h.w.MaxHeld() < 1 || h.w.MaxHeld() > credit {
		t.Errorf("received %d violations %d max_held %d", h.w.EventsReceived(), h.w.CreditViolations(), h.w.MaxHeld())
	}
}

func TestCreditViolationIsCountedAndStillProcessed(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		once.Do(func() { close(started) })
		<-release
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 2})
	c := h.dialReady()
	c.sendEvents([]uint64{1, 2, 3, 4, 5})
	<-started // the whole message was accepted by now
	if h.w.CreditViolations() != 3 || h.w.MaxHeld() != 5 {
		t.Errorf("violations %d max_held %d", h.w.CreditViolations(), h.w.MaxHeld())
	}
	close(release)
	c.readCredit(5)
	if len(c.results) != 5 {
		t.Errorf("results %v", c.resultIDs())
	}
}

func TestStreamClosedByFerryCancelsHandlersAndDropsResults(t *testing.T) {
	started := make(chan uint64, 4)
	cancelled := make(chan uint64, 4)
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		if e.GetId() < 10 {
			started <- e.GetId()
			<-ctx.Done() // the stream's end cancels it
			cancelled <- e.GetId()
		}
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 4})

	// ferry half-closes: the worker ends the stream (OK) without waiting.
	c1 := h.dialReady()
	c1.sendEvents([]uint64{1})
	<-started
	if err := c1.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if code := c1.readEnd(); code != codes.OK {
		t.Errorf("half-closed stream ended with %v", code)
	}
	if id := <-cancelled; id != 1 {
		t.Errorf("cancelled %d", id)
	}

	// ferry cancels the call with work in flight.
	c2 := h.dialReady()
	c2.sendEvents([]uint64{3})
	<-started
	c2.cancel()
	if code := c2.readEnd(); code != codes.Canceled {
		t.Errorf("cancelled stream ended with %v", code)
	}
	select {
	case <-cancelled:
	case <-time.After(timeout):
		t.Fatal("handler of a cancelled call not cancelled")
	}

	// The worker keeps serving new streams.
	c3 := h.dialReady()
	c3.sendEvents([]uint64{10})
	c3.readCredit(1)
	if fmt.Sprint(c3.resultIDs()) != "[10]" {
		t.Errorf("results %v", c3.resultIDs())
	}
}

func TestGracefulStopDeliversInFlightResultWithinGrace(t *testing.T) {
	var w atomic.Pointer[ferry.Worker]
	started := make(chan struct{})
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		close(started)
		for !w.Load().Stopping() { // still working when Stop begins
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 4})
	w.Store(h.w)
	c := h.dialReady()
	c.sendEvents([]uint64{7})
	<-started

	const grace = 5 * time.Second
	stopped := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		if err := h.w.GracefulStop(grace); err != nil {
			t.Errorf("GracefulStop: %v", err)
		}
		stopped <- time.Since(t0)
	}()
	m := c.mustRead()
	rs := m.GetResults().GetResults()
	if len(rs) != 1 || rs[0].GetId() != 7 || rs[0].GetStatus() != statusOK {
		t.Fatalf("want the result of 7, got %v", m)
	}
	// Draining: no more credit; the stream ends with UNAVAILABLE.
	if code := c.readEnd(); code != codes.Unavailable {
		t.Errorf("stream ended with %v", code)
	}
	if took := <-stopped; took >= grace {
		t.Errorf("stop took %v", took)
	}
	if err := <-h.served; err != nil {
		t.Errorf("Serve returned %v", err)
	}
	h.served <- nil                                 // for the cleanup
	if err := h.w.GracefulStop(grace); err != nil { // idempotent
		t.Errorf("second stop: %v", err)
	}
	// The server is gone: new streams fail.
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if late, err := ferrypb.NewProcessorClient(conn).Process(context.Background()); err == nil {
		if _, err := late.Recv(); status.Code(err) == codes.OK {
			t.Error("late stream succeeded")
		}
	}
	// Serve after Stop.
	if err := h.w.Serve(bufconn.Listen(1024)); !errors.Is(err, ferry.ErrStopped) {
		t.Errorf("Serve after stop: %v", err)
	}
}

func TestStopRefusesNewStreamsAndEventsWhileDraining(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var ran atomic.Int64
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		ran.Add(1)
		close(started)
		<-release
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 4})
	c := h.dialReady()
	c.sendEvents([]uint64{1})
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- h.w.GracefulStop(timeout) }()
	for !h.w.Stopping() {
		time.Sleep(time.Millisecond)
	}
	late := h.dial()
	if code := late.readEnd(); code != codes.Unavailable {
		t.Errorf("new stream while draining: %v", code)
	}
	c.sendEvents([]uint64{2}) // not started: no result, no credit
	time.Sleep(100 * time.Millisecond)
	close(release)
	m := c.mustRead()
	if rs := m.GetResults().GetResults(); len(rs) != 1 || rs[0].GetId() != 1 {
		t.Errorf("want only the result of 1, got %v", m)
	}
	if code := c.readEnd(); code != codes.Unavailable {
		t.Errorf("stream ended with %v", code)
	}
	if err := <-stopped; err != nil {
		t.Errorf("stop: %v", err)
	}
	if ran.Load() != 1 || h.w.EventsReceived() != 2 {
		t.Errorf("ran %d received %d", ran.Load(), h.w.EventsReceived())
	}
}

func TestStopGraceExpiryCancelsAndEndsStreams(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan struct{})
	h := start(t, func(ctx context.Context, e *ferrypb.Event) ferry.Result {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return ferry.OK()
	}, ferry.Options{MaxInFlight: 4})
	c := h.dialReady()
	c.sendEvents([]uint64{1})
	<-started
	t0 := time.Now()
	err := h.w.GracefulStop(300 * time.Millisecond)
	if took := time.Since(t0); took < 250*time.Millisecond || took > 3*time.Second {
		t.Errorf("stop took %v", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stop: %v", err)
	}
	if code := c.readEnd(); code != codes.Unavailable {
		t.Errorf("stream ended with %v", code)
	}
	select {
	case <-cancelled:
	case <-time.After(timeout):
		t.Error("handler ctx not cancelled after the stream ended")
	}
}

func TestStopBeforeServe(t *testing.T) {
	w := ferry.NewWorker(ok, ferry.Options{Logger: quietLogger()})
	if err := w.GracefulStop(0); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Serve(lis); !errors.Is(err, ferry.ErrStopped) {
		t.Errorf("Serve after Stop: %v", err)
	}
}

func TestLoopbackTCP(t *testing.T) {
	w := ferry.NewWorker(ok, ferry.Options{Name: "tcp", Logger: quietLogger()})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- w.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, conn, false)
	if c.readReady().GetWorkerName() != "tcp" {
		t.Fatal("ready")
	}
	c.sendEvents([]uint64{1, 2})
	c.readCredit(2)
	if err := w.GracefulStop(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
