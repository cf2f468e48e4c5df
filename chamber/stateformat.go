package chamber

import "strconv"

// stateFormat is empty in every release. A test sets it at link time
// (-ldflags "-X github.com/cryochamber/cryochamber/chamber.stateFormat=2") to build a stand-in
// for a later cryochamber: one that writes state.json in that newer format and reads it as well
// as stateVersion, the way a real upgrade reads the format before it. The build without it then
// refuses what that build wrote, as an older build refuses a newer one's state
// (TestSilent4_16PinnedOlderBuild).
var stateFormat string

// writtenVersion is the state format this build writes.
func writtenVersion() int {
	if v, err := strconv.Atoi(stateFormat); err == nil && v > stateVersion {
		return v
	}
	return stateVersion
}

// readableVersion says whether this build reads state of format v: its own, and the one
// before a later format it writes.
func readableVersion(v int) bool {
	return v == stateVersion || v == writtenVersion()
}
