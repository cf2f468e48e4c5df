package chamber

import (
	"sort"
	"time"
)

// SortConversation orders messages oldest first, as a conversation reads. Replies carry their
// session's end cut to the second, while a message sent to the agent keeps its nanoseconds: so
// times are compared to the second, and within one second what was sent to the agent (inbox,
// archive) comes before what came back (the outbox), then by the full time.
func SortConversation(list []ReceivedMessage) {
	rank := func(m ReceivedMessage) int {
		if m.Box == "outbox" {
			return 1
		}
		return 0
	}
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		as, bs := a.Time.Truncate(time.Second), b.Time.Truncate(time.Second)
		if !as.Equal(bs) {
			return as.Before(bs)
		}
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		return a.Time.Before(b.Time)
	})
}
