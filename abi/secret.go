package abi

// ImportSecret: the value of a secret the module is granted (ABI.md 5.3).
// The request is the secret's name (a name as ValidName accepts); the
// result bytes are its current value, at most MaxSecretSize bytes. The
// host reads the value at every call, so a rotated secret reaches the
// module without a reload. Needs a CapSecret grant naming the secret.
//
// Statuses: StatusDenied (no grant names the secret), StatusNotFound (the
// host has no value for it now), StatusTooLarge (the value exceeds
// MaxSecretSize), StatusBadRequest (not a valid name). The reason of a
// failure names the secret, never its value.
const ImportSecret = "secret"

// CapSecret grants one secret: "secret:<name>". Plain "secret" names none
// and is refused.
const CapSecret = "secret"

// MaxSecretSize is the largest secret value, in bytes.
const MaxSecretSize = 64 << 10
