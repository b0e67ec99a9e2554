package leaktest

import (
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

func TestFindsWhatIsLeftRunning(t *testing.T) {
	ignore := IgnoreCurrent()
	stop := make(chan struct{})
	go leaky(stop)
	err := Find(ignore)
	close(stop)
	if err == nil || !strings.Contains(err.Error(), "leaktest.leaky") {
		t.Fatalf("Find with a goroutine left running = %v", err)
	}
	if err := Find(ignore); err != nil {
		t.Fatalf("Find after it ended: %v", err)
	}
}

func TestIgnoresTheTestingPackage(t *testing.T) {
	t.Run("sub", func(t *testing.T) {
		if err := Find(); err != nil {
			t.Fatalf("Find in a subtest: %v", err)
		}
	})
}

// A goroutine that ends a moment after Find starts is waited for.
func TestWaitsForGoroutinesEnding(t *testing.T) {
	go func() { time.Sleep(50 * time.Millisecond) }()
	if err := Find(); err != nil {
		t.Fatal(err)
	}
}

func leaky(stop chan struct{}) { <-stop }

func TestParse(t *testing.T) {
	dump := `goroutine 7 [running]:
main.main()
	/x/main.go:10 +0x1d

goroutine 18 [chan receive, 2 minutes]:
example.com/p.(*T).wait(0xc000010000, {0x1, 0x2})
	/x/p.go:5 +0x25
example.com/p.run(...)
	/x/p.go:9
created by example.com/p.Start in goroutine 7
	/x/p.go:3 +0x45
`
	gs := parse(dump)
	if len(gs) != 2 {
		t.Fatalf("parse: %d goroutines, want 2", len(gs))
	}
	g := gs[1]
	if g.id != 18 || g.state != "chan receive, 2 minutes" || g.top != "example.com/p.(*T).wait" ||
		!g.funcs["example.com/p.run"] || g.funcs["example.com/p.Start"] {
		t.Fatalf("parse: %+v", g)
	}
}
