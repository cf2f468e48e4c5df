// Package web is cryochamber's dashboard: a local HTTP server with one page listing every
// chamber of the user, a page per chamber (its state, upcoming wakes, messages, the latest
// block streaming live, markers and checks) and a JSON API with the CLI's field names.
//
// It reaches the chambers only through the chamber package's public API (Source), the same
// calls the CLI makes; it never opens a chamber's files, and no request path names a file.
// The pages show text an agent wrote, so html/template escapes all of it, a strict
// Content-Security-Policy forbids inline script, every request carries the dashboard's token
// and changes are made only by POST with the token in a header (security.go).
//
// The server runs in the foreground (`cryochamber web`) or is started on demand by the OS
// (socket activation, `cryochamber web --install`) and exits when idle: nothing of it runs
// when nobody looks. This package never reads the environment or chooses addresses: the
// caller passes listeners, the token and the clock in.
package web
