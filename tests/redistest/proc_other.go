//go:build !unix

package redistest

import (
	"errors"
	"os"
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalProcess only supports killing on platforms without POSIX signals;
// Pause and Resume report an error there.
func signalProcess(p *os.Process, sig procSignal) error {
	if sig == sigKill {
		return p.Kill()
	}
	return errors.New("redistest: pause/resume need POSIX signals")
}

func waitStopped(int, time.Duration) {}
