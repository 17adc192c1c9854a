package ferry

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ferry/ferry/clients/go/ferrypb"
)

// codec is the Worker's gRPC codec: the standard proto codec, except that an
// Events request is decoded by hand (decodeEvents), the largest part of the
// SDK's per-event CPU, and a Results response is encoded by hand in one pass
// (encodeResults; the standard codec walks the message twice, for its size
// and to write it). Everything else (Cancel, Ready, Credit, unknown shapes)
// goes through the standard codec.
type codec struct{ std encoding.CodecV2 }

func newCodec() *codec { return &codec{std: encoding.GetCodecV2(protocodec.Name)} }

func (c *codec) Name() string { return protocodec.Name }

func (c *codec) Marshal(v any) (mem.BufferSlice, error) {
	if resp, ok := v.(*ferrypb.ProcessResponse); ok {
		if rs := resp.GetResults(); rs != nil {
			return encodeResults(rs), nil
		}
	}
	return c.std.Marshal(v)
}

// resultSize: the encoded size of r's fields.
func resultSize(r *ferrypb.Result) int {
	n := 1 + protowire.SizeVarint(r.Id) // field 1; proto3: 0 is not sent, see appendResult
	if r.Id == 0 {
		n = 0
	}
	if r.Status != 0 {
		n += 1 + protowire.SizeVarint(uint64(r.Status))
	}
	if r.Message != "" {
		n += 1 + protowire.SizeBytes(len(r.Message))
	}
	if r.RetryAfterMs != 0 {
		n += 1 + protowire.SizeVarint(uint64(r.RetryAfterMs))
	}
	return n
}

func appendResult(b []byte, r *ferrypb.Result, size int) []byte {
	b = protowire.AppendVarint(b, 1<<3|uint64(protowire.BytesType)) // Results.results
	b = protowire.AppendVarint(b, uint64(size))
	if r.Id != 0 {
		b = protowire.AppendVarint(protowire.AppendVarint(b, 1<<3|uint64(protowire.VarintType)), r.Id)
	}
	if r.Status != 0 {
		b = protowire.AppendVarint(protowire.AppendVarint(b, 2<<3|uint64(protowire.VarintType)), uint64(r.Status))
	}
	if r.Message != "" {
		b = protowire.AppendString(protowire.AppendVarint(b, 3<<3|uint64(protowire.BytesType)), r.Message)
	}
	if r.RetryAfterMs != 0 {
		b = protowire.AppendVarint(protowire.AppendVarint(b, 4<<3|uint64(protowire.VarintType)), uint64(r.RetryAfterMs))
	}
	return b
}

// encodeResults: ProcessResponse{results: rs}, as proto.Marshal writes it.
func encodeResults(rs *ferrypb.Results) mem.BufferSlice {
	body := 0
	for _, r := range rs.Results {
		n := resultSize(r)
		body += 1 + protowire.SizeVarint(uint64(n)) + n
	}
	if rs.Credit != 0 {
		body += 1 + protowire.SizeVarint(uint64(rs.Credit))
	}
	total := 1 + protowire.SizeVarint(uint64(body)) + body
	var buf *[]byte
	var b []byte
	pooled := !mem.IsBelowBufferPoolingThreshold(total)
	if pooled {
		buf = mem.DefaultBufferPool().Get(total)
		b = (*buf)[:0]
	} else {
		b = make([]byte, 0, total)
	}
	b = protowire.AppendVarint(b, 3<<3|uint64(protowire.BytesType)) // ProcessResponse.results
	b = protowire.AppendVarint(b, uint64(body))
	for _, r := range rs.Results {
		b = appendResult(b, r, resultSize(r))
	}
	if rs.Credit != 0 {
		b = protowire.AppendVarint(protowire.AppendVarint(b, 2<<3|uint64(protowire.VarintType)), uint64(rs.Credit))
	}
	if pooled {
		*buf = b
		return mem.BufferSlice{mem.NewBuffer(buf, mem.DefaultBufferPool())}
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}
}

func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*ferrypb.ProcessRequest)
	if !ok {
		return c.std.Unmarshal(data, v)
	}
	// One copy of the message, which the events' Key and Payload alias (gRPC
	// recycles data's buffers once this returns).
	b := data.Materialize()
	if evs, err := decodeEvents(b); err == nil {
		proto.Reset(req)
		req.Kind = &ferrypb.ProcessRequest_Events{Events: &ferrypb.Events{Events: evs}}
		return nil
	}
	return proto.Unmarshal(b, req) // not a plain Events message, or malformed
}

// errFallback: decodeEvents does not take this message; proto.Unmarshal
// decides (and reports the error if it is malformed).
var errFallback = errors.New("not a plain Events request")

// decodeEvents decodes a ProcessRequest that is exactly one Events field. The
// events share one allocation, their Key, Payload and header values alias b
// and equal strings (topic, type) are one string per message. Unknown fields
// (of a newer ferry) are skipped and, unlike proto.Unmarshal, not kept.
func decodeEvents(b []byte) ([]*ferrypb.Event, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return nil, errFallback
	}
	body, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil, errFallback
	}
	count := 0
	for rest := body; len(rest) > 0; {
		num, typ, n := protowire.ConsumeField(rest)
		if n < 0 {
			return nil, errFallback
		}
		if num == 1 && typ == protowire.BytesType {
			count++
		}
		rest = rest[n:]
	}
	slab := make([]ferrypb.Event, count)
	evs := make([]*ferrypb.Event, count)
	var st strings2
	i := 0
	for rest := body; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		rest = rest[n:]
		if num != 1 || typ != protowire.BytesType {
			rest = rest[protowire.ConsumeFieldValue(num, typ, rest):]
			continue
		}
		v, m := protowire.ConsumeBytes(rest)
		rest = rest[m:]
		ev := &slab[i]
		if err := decodeEvent(v, ev, &st); err != nil {
			return nil, err
		}
		evs[i] = ev
		i++
	}
	return evs, nil
}

// strings2 remembers the last topic and type, so the events of one message
// share them.
type strings2 struct{ topic, typ string }

func (s *strings2) get(last *string, b []byte) (string, error) {
	if *last == string(b) { // no allocation: the compiler compares in place
		return *last, nil
	}
	if !utf8.Valid(b) {
		return "", errFallback // proto.Unmarshal rejects it
	}
	*last = string(b)
	return *last, nil
}

func decodeEvent(b []byte, ev *ferrypb.Event, st *strings2) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errFallback
		}
		b = b[n:]
		var x uint64
		var v []byte
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
			v = v[:len(v):len(v)] // an append to it must not overwrite the next field
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if num <= 12 { // a known field with another wire type
				return errFallback
			}
		}
		if n < 0 {
			return errFallback
		}
		b = b[n:]
		var err error
		switch {
		case num > 12: // unknown: skipped
		case (num == 2 || num == 5 || num == 6 || num == 7 || num == 8) != (typ == protowire.BytesType):
			return errFallback
		case num == 1:
			ev.Id = x
		case num == 2:
			ev.Topic, err = st.get(&st.topic, v)
		case num == 3:
			ev.Partition = int32(x)
		case num == 4:
			ev.Offset = int64(x)
		case num == 5:
			ev.Key = v
		case num == 6:
			ev.Type, err = st.get(&st.typ, v)
		case num == 7:
			ev.Payload = v
		case num == 8:
			var h *ferrypb.Header
			if h, err = decodeHeader(v); err == nil {
				ev.Headers = append(ev.Headers, h)
			}
		case num == 9:
			ev.TimestampMs = int64(x)
		case num == 10:
			ev.Attempt = int32(x)
		case num == 11:
			ev.DeadlineMs = int64(x)
		case num == 12:
			ev.RunId = x
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func decodeHeader(b []byte) (*ferrypb.Header, error) {
	h := &ferrypb.Header{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errFallback
		}
		b = b[n:]
		if num > 3 {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, errFallback
			}
			b = b[n:]
			continue
		}
		if typ != protowire.BytesType {
			return nil, errFallback
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, errFallback
		}
		b = b[n:]
		v = v[:len(v):len(v)]
		switch num {
		case 1:
			if !utf8.Valid(v) {
				return nil, errFallback
			}
			h.Key = string(v)
		case 2:
			h.Value = v
		case 3:
			h.RawKey = v
		}
	}
	return h, nil
}
