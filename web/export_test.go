package web

import "time"

// SetStatusTTL changes how long the overview reuses a chamber's status (0: never), for the
// benchmark of a first visit.
func SetStatusTTL(s *Server, d time.Duration) { s.statusTTL = d }
