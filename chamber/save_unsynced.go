package chamber

import "github.com/cryochamber/cryochamber/internal/atomicfile"

// saveUnsynced is save without its two fsyncs (issue 28: each save is a wait for the disk), for
// the one save whose loss to a power cut loses nothing: the agent's process group, the
// session's dead-man time and the log offset, saved once the agent has started. A killed wake
// leaves it on disk (the page cache outlives the process), which is what recovery needs to end
// the agent's group; a power cut ends the agent itself, and the state then holds the claim
// save before it (fsynced: phase=running, the claimed messages), from which recovery proceeds
// the same way. The next save (armed, retry, ...) is fsynced, and makes this one durable too.
func (r *runner) saveUnsynced() error {
	data, err := r.st.marshal(r.now())
	if err != nil {
		return &Error{Msg: "cannot save the state", Err: err}
	}
	if err := atomicfile.Replace(r.store.path(stateName), data, 0o600, func() { r.env.checkpoint("state-temp") }); err != nil {
		return &Error{Msg: "cannot save the state", Err: err, Hint: "check that " + string(r.store) + " is writable and its disk not full"}
	}
	r.saved = data
	if r.fs != nil {
		if err := r.fs.WriteView(StateFile, data, 0o600); err != nil {
			r.warnf("cannot update the view %s in the chamber: %v", StateFile, err)
		}
	}
	return nil
}
