package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ferry/ferry/clients/go/ferrypb"
	"github.com/ferry/ferry/clients/go/internal/childtest"
)

const childEnv = "FERRY_EXAMPLE_WORKER_CHILD"

// The test binary doubles as the example worker (run as a child process).
func TestMain(m *testing.M) {
	childtest.Main(m, childEnv, run)
}

func startChild(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := childtest.Command(t, childEnv, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewReader(out)
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not written", path)
	return ""
}

func TestExampleWorkerFlagsRecordStatsAndSigterm(t *testing.T) {
	dir := t.TempDir()
	portFile, record, stats := filepath.Join(dir, "port"), filepath.Join(dir, "record.tsv"), filepath.Join(dir, "stats")
	cmd, stdout := startChild(t, "--listen", "127.0.0.1:0", "--max_in_flight=5", "--name", "ex-1",
		"--port_file", portFile, "--record", record, "--stats", stats, "--work_us", "100", "--handler_threads", "2", "--max_run=3")
	port, err := strconv.Atoi(waitFile(t, portFile))
	if err != nil {
		t.Fatal(err)
	}
	line, _ := stdout.ReadString('\n')
	if want := fmt.Sprintf("example_worker listening on 127.0.0.1:%d (max_in_flight=5)\n", port); line != want {
		t.Errorf("stdout %q, want %q", line, want)
	}

	stream := childtest.Process(t, fmt.Sprintf("127.0.0.1:%d", port))
	m, err := stream.Recv()
	if err != nil || m.GetReady().GetMaxInFlight() != 5 || m.GetReady().GetWorkerName() != "ex-1" || m.GetReady().GetMaxRun() != 3 {
		t.Fatalf("ready: %v %v", m, err)
	}
	before := monotonicNanos()
	childtest.SendEvents(t, stream, []*ferrypb.Event{
		{Id: 1, Key: []byte("k1"), Payload: []byte("a\tb"), Partition: 2, Offset: 10},
		{Id: 2, Key: []byte("k2"), Payload: []byte("plain"), Partition: 2, Offset: 11},
		{Id: 3, Key: []byte("k3"), Payload: []byte("x\\y\nz"), Partition: 3, Offset: 12},
	})
	results, credit := 0, 0
	for credit < 3 {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		results += len(m.GetResults().GetResults())
		credit += int(m.GetCredit().GetN())
	}
	if results != 3 {
		t.Errorf("results %d", results)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("stream end: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}

	kv := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(waitFile(t, stats)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		kv[k] = v
	}
	held, _ := strconv.Atoi(kv["max_held"])
	if kv["events_received"] != "3" || kv["credit_violations"] != "0" || kv["cancelled"] != "0" || held < 1 || held > 3 || len(kv) != 4 {
		t.Errorf("stats %v", kv)
	}
	raw, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	sort.Strings(lines)
	if len(lines) != 3 {
		t.Fatalf("record: %q", raw)
	}
	want := []string{"k1\ta\\tb\t%s\t2\t10\tOK", "k2\tplain\t%s\t2\t11\tOK", "k3\tx\\\\y\\nz\t%s\t3\t12\tOK"}
	for i, l := range lines {
		f := strings.Split(l, "\t")
		ns, err := strconv.ParseInt(f[len(f)-4], 10, 64)
		if err != nil || ns < before {
			t.Errorf("line %q: start ns %d before %d", l, ns, before)
		}
		if w := fmt.Sprintf(want[i], f[len(f)-4]); l != w {
			t.Errorf("record line %q, want %q", l, w)
		}
	}
}

func TestExampleWorkerBadListenAddressExits1(t *testing.T) {
	cmd, _ := startChild(t, "--listen", "256.1.1.1:99999")
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("exit: %v", err)
	}
}

// By default the worker takes runs of up to 64 (the SDK's default); a run
// member's injected FAIL leaves the rest NOT_ATTEMPTED, unrecorded.
func TestExampleWorkerRunsByDefault(t *testing.T) {
	dir := t.TempDir()
	portFile, record := filepath.Join(dir, "port"), filepath.Join(dir, "record.tsv")
	cmd, _ := startChild(t, "--listen", "127.0.0.1:0", "--port_file", portFile, "--record", record,
		"--fail_every=2")
	stream := childtest.Process(t, "127.0.0.1:"+waitFile(t, portFile))
	m, err := stream.Recv()
	if err != nil || m.GetReady().GetMaxRun() != 64 {
		t.Fatalf("ready: %v %v", m, err)
	}
	var evs []*ferrypb.Event
	for i := range 4 { // payload 1 FAILs ((1+1) % 2 == 0)
		evs = append(evs, &ferrypb.Event{Id: uint64(i + 1), Key: []byte("k"), Payload: []byte(strconv.Itoa(i)),
			Offset: int64(i), Attempt: 1, RunId: 7})
	}
	childtest.SendEvents(t, stream, evs)
	got := map[uint64]ferrypb.Result_Status{}
	for len(got) < 4 {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range m.GetResults().GetResults() {
			got[r.GetId()] = r.GetStatus()
		}
	}
	want := map[uint64]ferrypb.Result_Status{1: ferrypb.Result_OK, 2: ferrypb.Result_FAIL,
		3: ferrypb.Result_NOT_ATTEMPTED, 4: ferrypb.Result_NOT_ATTEMPTED}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", got, want)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	raw, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(raw), "\n"); lines != 2 || !strings.Contains(string(raw), "\tFAIL\n") {
		t.Errorf("record %q: want the OK and the FAIL only", raw)
	}
}
