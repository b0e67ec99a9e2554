package watchdog

// PinCPUShort sets whether w's process counts as short of CPU (cpu.go),
// for tests.
func PinCPUShort[I any](w *Watchdog[I], short bool) { w.load.cpu.pin(short) }
