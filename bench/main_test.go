package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if one leaves a goroutine behind (the
// layout prototype's test talks to a redis-server through go-redis).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
