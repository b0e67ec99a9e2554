//go:build !linux

package main

// Whether stdin is a terminal, elsewhere than on Linux.

import "os"

// isTerminal reports whether f is a terminal; elsewhere than on Linux
// tenure does not tell, and reads stdin whatever it is.
func isTerminal(*os.File) bool { return false }
