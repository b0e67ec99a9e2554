//go:build tenure_broken

package lease

import (
	"os"
	"sync"
	"time"
)

// A build with the tag tenure_broken breaks the lease on purpose, as the
// environment variable TENURE_BREAK says, so that the chaos runner can show
// that its checker catches each kind of broken promise
// (tests/chaos/broken_test.go). Never ship it.
//
//	TENURE_BREAK=nocancel    a lost lease's context is never cancelled by the
//	                         loss; only Release (or Close) ends it
//	TENURE_BREAK=latecancel  a lost lease's context is cancelled a quarter of
//	                         its TTL after the loss, so after the key expired
//	                         on the server
//	TENURE_BREAK=refence     every acquisition of a name gets the fence the
//	                         first one in this process got, as a fencing
//	                         counter stuck after a rollback would hand out
//	TENURE_BREAK=overbook    a semaphore of n permits grants n+1
//	TENURE_BREAK=kshort      a request for k > 1 permits at once takes k - 1
//	                         of them on the server, and returns as if k
//	TENURE_BREAK=setnocancel a Set's context is not cancelled when one of
//	                         its leases is lost; only Release ends it
const broken = true

func breakMode() string { return os.Getenv("TENURE_BREAK") }

var (
	// delayed holds the leases whose loss latecancel postponed once: the
	// postponed call, and Release's, then go through.
	delayed sync.Map // *Lease -> struct{}

	fencesMu sync.Mutex
	fences   = map[string]int64{}
)

// breakLoss reports whether the loss of l for reason must be ignored now.
func breakLoss(l *Lease, reason error) bool {
	switch breakMode() {
	case "nocancel":
		return true
	case "latecancel":
		if _, again := delayed.LoadOrStore(l, struct{}{}); again {
			return false
		}
		time.AfterFunc(l.entry.TTL()/4, func() { l.lost(reason) })
		return true
	}
	return false
}

// breakFence returns the fence to hand out for an acquisition of name that
// the server gave fence.
func breakFence(name string, fence int64) int64 {
	if breakMode() != "refence" {
		return fence
	}
	fencesMu.Lock()
	defer fencesMu.Unlock()
	if f, ok := fences[name]; ok {
		return f
	}
	fences[name] = fence
	return fence
}

// breakLimit returns the number of permits to ask the server for, for a
// semaphore of n.
func breakLimit(n int) int {
	if breakMode() == "overbook" {
		return n + 1
	}
	return n
}

// breakSetContext reports whether a Set's context must ignore its leases'
// losses.
func breakSetContext() bool { return breakMode() == "setnocancel" }

// breakK returns how many permits to take for a request of k.
func breakK(k int) int {
	if breakMode() == "kshort" && k > 1 {
		return k - 1
	}
	return k
}
