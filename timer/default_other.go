//go:build !linux && !darwin

package timer

// DefaultBackend is empty where cryochamber has no timer backend.
const DefaultBackend = ""
