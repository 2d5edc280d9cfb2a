//go:build !linux

package memlimit

import "errors"

// imageFile is never made where the system has no sealed memory files:
// images are copied into each memory.
type imageFile struct{}

func newImageFile([]byte, [][2]uint64, uint64) (*imageFile, error) {
	return nil, errors.New("no memory files")
}

func (*imageFile) mapInto(*region, [][2]uint64) bool { return false }
func (*imageFile) readAt([]byte, uint64)             {}
func (*imageFile) close()                            {}

func takeAreas(int) bool { return false }
func untakeAreas(int)    {}
