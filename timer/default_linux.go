package timer

// DefaultBackend is the timer backend of this operating system.
const DefaultBackend = "systemd"
