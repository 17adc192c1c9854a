//go:build !linux

package main

import "time"

var processStart = time.Now()

// monotonicNanos: a monotonic clock (not CLOCK_MONOTONIC's origin off Linux).
func monotonicNanos() int64 { return int64(time.Since(processStart)) }
