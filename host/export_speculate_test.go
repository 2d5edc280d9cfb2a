package host

// Speculations is how many compiles h made of a dropped file's kept
// rewrite before its digest was known (speculate.go), how many of them a
// load took, and how many are neither taken nor closed yet.
func Speculations(h *Host) (made, taken, pending int) {
	h.rewrites.mu.Lock()
	defer h.rewrites.mu.Unlock()
	return h.rewrites.specsMade, h.rewrites.specsTaken, len(h.rewrites.specs)
}

// SetInputPrint makes every module's fingerprint fp, as if all collided,
// until restore is called.
func SetInputPrint(fp uint64) (restore func()) {
	old := inputPrint
	inputPrint = func([]byte) uint64 { return fp }
	return func() { inputPrint = old }
}
