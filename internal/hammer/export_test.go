package hammer

import "time"

// SetSettle sets settle and returns what puts it back.
func SetSettle(d time.Duration) (restore func()) {
	old := settle
	settle = d
	return func() { settle = old }
}
