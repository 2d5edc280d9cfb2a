//go:build !unix

package secret

// openNonblock is 0 where opening a file cannot wait for a writer.
const openNonblock = 0
