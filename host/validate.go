package host

// Validate checks o as New would, without starting anything: a program
// that takes its options from its user reports a mistake in them as such.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}
