package timer

// SetAfterStops lets a test look at the manager between a group's stops and its starts.
func SetAfterStops(f func(names []string)) { afterStops = f }
