package ferry

import (
	"math"
	"math/rand"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ferry/ferry/clients/go/ferrypb"
)

func randomEvent(r *rand.Rand) *ferrypb.Event {
	pick := func(vals ...string) string { return vals[r.Intn(len(vals))] }
	raw := func() []byte {
		if r.Intn(4) == 0 {
			return nil
		}
		b := make([]byte, r.Intn(40))
		r.Read(b)
		return b
	}
	ev := &ferrypb.Event{
		Id: r.Uint64(), Topic: pick("", "orders", "payments", "ünïcode"),
		Partition: int32(r.Intn(100)) - 2, Offset: r.Int63() - math.MaxInt64/2,
		Key: raw(), Type: pick("", "orders", "t"), Payload: raw(),
		TimestampMs: r.Int63(), Attempt: int32(r.Intn(5)) - 1, DeadlineMs: r.Int63(), RunId: uint64(r.Intn(3)),
	}
	for range r.Intn(3) {
		ev.Headers = append(ev.Headers, &ferrypb.Header{Key: pick("", "h", "trace"), Value: raw(), RawKey: raw()})
	}
	return ev
}

func eventsRequest(evs ...*ferrypb.Event) []byte {
	b, err := proto.Marshal(&ferrypb.ProcessRequest{Kind: &ferrypb.ProcessRequest_Events{
		Events: &ferrypb.Events{Events: evs}}})
	if err != nil {
		panic(err)
	}
	return b
}

// check decodes b with the SDK's codec and with proto.Unmarshal: the same
// message (but for unknown fields, which the hand decoder drops), or both
// an error.
func check(t *testing.T, b []byte) *ferrypb.ProcessRequest {
	t.Helper()
	want := &ferrypb.ProcessRequest{}
	_, refused := decodeEvents(b)
	wantErr := proto.UnmarshalOptions{DiscardUnknown: refused == nil}.Unmarshal(b, want)
	got := &ferrypb.ProcessRequest{}
	err := newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(append([]byte(nil), b...))}, got)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("codec error %v, proto.Unmarshal error %v", err, wantErr)
	}
	if err == nil && !proto.Equal(got, want) {
		t.Fatalf("codec decoded\n%v\nproto.Unmarshal\n%v", got, want)
	}
	return got
}

func TestCodecDecodesEventsAsProtoDoes(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for range 300 {
		var evs []*ferrypb.Event
		for range r.Intn(6) {
			evs = append(evs, randomEvent(r))
		}
		check(t, eventsRequest(evs...))
	}
}

func TestCodecSkipsUnknownFields(t *testing.T) {
	ev, _ := proto.Marshal(&ferrypb.Event{Id: 7, Topic: "t", Payload: []byte("p"),
		Headers: []*ferrypb.Header{{Key: "h", Value: []byte("v")}}})
	unknown := func(b []byte) []byte { // a varint, a string and a fixed64 of fields ferry may add
		b = protowire.AppendTag(b, 13, protowire.VarintType)
		b = protowire.AppendVarint(b, 5)
		b = protowire.AppendTag(b, 40, protowire.BytesType)
		b = protowire.AppendString(b, "new")
		b = protowire.AppendTag(b, 41, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, 1)
	}
	header := unknown(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "h2"))
	ev = protowire.AppendBytes(protowire.AppendTag(unknown(ev), 8, protowire.BytesType), header)
	events := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), ev)
	events = unknown(events)
	req := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), events)
	if _, err := decodeEvents(req); err != nil {
		t.Fatalf("hand decoder refused unknown fields: %v", err)
	}
	got := check(t, req)
	if e := got.GetEvents().GetEvents(); len(e) != 1 || e[0].GetId() != 7 || len(e[0].GetHeaders()) != 2 {
		t.Errorf("decoded %v", got)
	}
}

func TestCodecOtherRequestsAndMalformedInput(t *testing.T) {
	cancel, _ := proto.Marshal(&ferrypb.ProcessRequest{Kind: &ferrypb.ProcessRequest_Cancel{
		Cancel: &ferrypb.Cancel{Ids: []uint64{1, 2, 3}}}})
	if got := check(t, cancel); len(got.GetCancel().GetIds()) != 3 {
		t.Errorf("cancel decoded as %v", got)
	}
	check(t, nil) // an empty request
	bad := eventsRequest(&ferrypb.Event{Topic: "tt"})
	bad[len(bad)-1] = 0xff // the topic is not UTF-8: proto.Unmarshal's error
	check(t, bad)
	ok := eventsRequest(randomEvent(rand.New(rand.NewSource(2))))
	for i := range ok { // every truncation
		check(t, ok[:i])
	}
	// A known field with another wire type.
	wrong := protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 1)
	check(t, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
		protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), wrong)))
}

// Key and Payload alias the message: an append to one must not write into
// the next field.
func TestCodecAliasedBytesAreCapped(t *testing.T) {
	got := check(t, eventsRequest(&ferrypb.Event{Key: []byte("key"), Payload: []byte("payload")}))
	ev := got.GetEvents().GetEvents()[0]
	_ = append(ev.Key, "XXXXXXXX"...)
	if string(ev.Payload) != "payload" {
		t.Errorf("payload %q after an append to the key", ev.Payload)
	}
}

// The hand-encoded Results are the bytes proto.Marshal writes (it writes
// fields in number order), for small and pooled sizes.
func TestCodecEncodesResultsAsProtoDoes(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, n := range []int{0, 1, 2, 7, 300, 3000} {
		rs := &ferrypb.Results{Credit: uint32(r.Intn(3)) * uint32(r.Uint32())}
		for i := range n {
			res := &ferrypb.Result{Id: uint64(i) * r.Uint64() % 1e12, Status: ferrypb.Result_Status(r.Intn(5)),
				RetryAfterMs: uint32(r.Intn(2)) * r.Uint32()}
			if r.Intn(3) == 0 {
				res.Message = "reason ü"[:r.Intn(8)]
			}
			rs.Results = append(rs.Results, res)
		}
		resp := &ferrypb.ProcessResponse{Kind: &ferrypb.ProcessResponse_Results{Results: rs}}
		want, err := proto.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		data, err := newCodec().Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got := data.Materialize()
		data.Free()
		if string(got) != string(want) {
			t.Fatalf("%d results: encoded %x, proto.Marshal %x", n, got, want)
		}
	}
	// Other responses: the standard codec.
	ready := &ferrypb.ProcessResponse{Kind: &ferrypb.ProcessResponse_Ready{Ready: &ferrypb.Ready{MaxInFlight: 3, MaxRun: 9}}}
	data, err := newCodec().Marshal(ready)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := proto.Marshal(ready); string(data.Materialize()) != string(want) {
		t.Error("Ready encoded differently")
	}
}

func TestResultMessageIsMadeValidUTF8(t *testing.T) {
	var p ferrypb.Result
	Fail("bad \xff byte").fill(&p, 1)
	if p.Message != "bad \uFFFD byte" {
		t.Errorf("message %q", p.Message)
	}
	if _, err := proto.Marshal(&p); err != nil {
		t.Error(err)
	}
}
