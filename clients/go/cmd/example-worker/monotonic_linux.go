package main

import (
	"syscall"
	"unsafe"
)

const clockMonotonic = 1 // CLOCK_MONOTONIC

// monotonicNanos reads CLOCK_MONOTONIC, the clock other ferry tools record in.
func monotonicNanos() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
