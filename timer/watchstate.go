package timer

import (
	"context"
	"fmt"
)

// WatchState says why a chamber's inbox watcher is not running, as the OS tells it: on systemd
// the path unit's ActiveState and Result ("failed, unit-start-limit-hit": the wake service it
// starts hit its start limit, after which systemd leaves the watcher failed for good). It is ""
// when the backend cannot tell (launchd's WatchPaths is never turned off by a burst: launchd
// throttles the job and starts it later).
func WatchState(ctx context.Context, be Backend, id string) string {
	sb, ok := be.(*systemdBackend)
	if !ok || checkID(id) != nil {
		return ""
	}
	props, err := sb.conn.GetUnitPropertiesContext(ctx, SystemdPathName(id))
	if err != nil {
		return ""
	}
	state, _ := props["ActiveState"].(string)
	result, _ := props["Result"].(string)
	if state == "" {
		return ""
	}
	if result == "" || result == "success" {
		return state
	}
	return fmt.Sprintf("%s, %s", state, result)
}
