//go:build chaos

package chaos_test

import (
	"testing"

	"github.com/tenure-go/tenure/tests/chaos"
)

// TestChaos is tests/chaos's TestChaos, with the same -chaos.* flags.
func TestChaos(t *testing.T) { chaos.RunChecked(t) }
