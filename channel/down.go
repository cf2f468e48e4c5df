package channel

// A channel down for good (an expired IMAP password or GitHub token, a revoked Zulip bot, a
// server gone; issue 23, item 15): the plan runs on, the agent's replies pile up unpublished and
// the operator's answers are never pulled. Each poll records its error (sync --status), but
// nobody runs that. So the polls are counted: the DownAfter-th failure in a row sets Down on the
// result, once, for the caller (cmd_sync.go) to tell the operator's alert targets, and the first
// poll that succeeds after that sets Back, once.

// DownAfter is how many failed polls in a row make a channel "down".
const DownAfter = 3

// track counts this poll (failed, or waiting for a rate limit the service set, which counts as
// neither) and says whether the operator is to be told that the channel is down, or back.
func (st *State) track(failed, waiting bool) (down, back bool) {
	switch {
	case waiting:
		return false, false
	case !failed:
		back = st.DownTold
		st.Failures, st.DownTold = 0, false
		return false, back
	}
	st.Failures++
	if st.Failures >= DownAfter && !st.DownTold {
		st.DownTold = true
		return true, false
	}
	return false, false
}
