package web

import (
	"net/http"
)

// jsonStream is an http.ResponseWriter's body for a JSON answer written piece by piece (the
// history of a plan of years, a row at a time): its header and status go out with the first
// byte, so an error found before anything was written can still be answered as an error.
type jsonStream struct {
	w       http.ResponseWriter
	started bool
}

func (j *jsonStream) Write(p []byte) (int, error) {
	if !j.started {
		j.started = true
		j.w.Header().Set("Content-Type", "application/json; charset=utf-8")
		j.w.WriteHeader(http.StatusOK)
	}
	return j.w.Write(p)
}
