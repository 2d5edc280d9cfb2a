package state_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when one leaves a goroutine behind:
// a closed engine stops its server and its connection whole.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
