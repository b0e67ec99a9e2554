//go:build !tenure_broken

package lease

// broken is false in every normal build, so that the hooks below, which
// exist only for the chaos runner's tests of its own checker (see
// broken_on.go), compile to nothing.
const broken = false

func breakLoss(*Lease, error) bool { return false }

func breakFence(_ string, fence int64) int64 { return fence }

func breakLimit(n int) int { return n }

func breakSetContext() bool { return false }

func breakK(k int) int { return k }
