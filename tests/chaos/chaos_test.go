//go:build chaos

package chaos

import "testing"

// TestChaos runs the runner with the -chaos.* flags (README.md) and fails
// on any violation, or when the run exercised too little to mean anything.
func TestChaos(t *testing.T) { RunChecked(t) }
