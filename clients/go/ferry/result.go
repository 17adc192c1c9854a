package ferry

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferry/ferry/clients/go/ferrypb"
)

// Result is what a Handler decided about one event. Build it with OK, Retry
// or Fail; the zero Result is reported as FAIL.
type Result struct {
	Status  ferrypb.Result_Status
	Message string
	// RetryAfter, for RETRY: the earliest retry (rounded up to whole
	// milliseconds on the wire); 0 means ferry's own backoff.
	RetryAfter time.Duration
}

// OK reports the event processed: ferry may commit its offset.
func OK() Result { return Result{Status: ferrypb.Result_OK} }

// Retry asks ferry to deliver the event again later (up to the processor's
// max_attempts). after > 0 asks ferry to wait at least that long.
func Retry(msg string, after time.Duration) Result {
	if after < 0 {
		after = 0
	}
	return Result{Status: ferrypb.Result_RETRY, Message: msg, RetryAfter: after}
}

// Fail reports a terminal failure: ferry dead-letters (or skips) the event
// and moves on.
func Fail(msg string) Result { return Result{Status: ferrypb.Result_FAIL, Message: msg} }

// RetryAfterMillis is RetryAfter as sent in Result.retry_after_ms: rounded up
// to whole milliseconds, capped at 2^32-1.
func (r Result) RetryAfterMillis() uint32 {
	if r.RetryAfter <= 0 {
		return 0
	}
	ms := (r.RetryAfter + time.Millisecond - 1) / time.Millisecond
	if ms > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(ms)
}

// fill sets p to this result for event id. A status other than OK, RETRY
// or FAIL (NOT_ATTEMPTED is the SDK's to send) is a FAIL.
func (r Result) fill(p *ferrypb.Result, id uint64) {
	p.Id, p.Status, p.Message = id, r.Status, r.Message
	if !utf8.ValidString(p.Message) {
		// A proto3 string must be UTF-8: ferry would refuse the message
		// (and proto.Marshal the whole Results).
		p.Message = strings.ToValidUTF8(p.Message, "\uFFFD")
	}
	switch r.Status {
	case ferrypb.Result_OK, ferrypb.Result_FAIL:
	case ferrypb.Result_RETRY:
		p.RetryAfterMs = r.RetryAfterMillis()
	default:
		p.Status = ferrypb.Result_FAIL
		if p.Message == "" {
			p.Message = "handler returned a Result without a status (use ferry.OK, ferry.Retry or ferry.Fail)"
		}
	}
}
