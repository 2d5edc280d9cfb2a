package state

import "github.com/tinyhost/tinyhost/host"

// OnKeyListed has f called by b's listings after each key they take.
func OnKeyListed(b host.KVBucket, f func()) { b.(*bucket).listed = f }
