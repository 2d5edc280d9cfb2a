package host

// SetPanicHook makes hook run at every entry into wazero (compile,
// instantiate, call), where a panic of hook stands for one of wazero's;
// nil removes it.
func SetPanicHook(hook func(op string)) {
	if hook == nil {
		panicHook.Store(nil)
		return
	}
	panicHook.Store(&hook)
}
