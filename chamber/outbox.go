package chamber

import (
	"github.com/cryochamber/cryochamber/message"
)

// writeOutbox files msg (its ID set) in the outbox, sealed (message/seal.go): a sync publishes
// a message as cryochamber's, or as an alert or notice, only when it carries the seal, since the
// agent can write in its outbox too. Without the key (an unwritable state directory) it is
// filed unsealed, with a warning: it is then published as the agent's.
func (r *runner) writeOutbox(msg *message.Message) (string, error) {
	why := "no private state directory"
	if r.seal == nil && r.store != "" {
		key, err := message.SealKey(r.store.path(message.SealKeyFile))
		if err != nil {
			why = err.Error()
		}
		r.seal = key
	}
	if r.seal == nil {
		r.warnf("the outbox message %s is not sealed (a sync publishes it as the agent's): %s", msg.ID, why)
	} else if err := msg.SealWith(r.seal); err != nil {
		r.warnf("the outbox message %s is not sealed: %v", msg.ID, err)
	}
	return message.Write(r.fs, outboxDir, msg)
}

// sealKey is the chamber's seal key for reading the outbox, nil when there is none yet (then
// nothing there was sealed) or it cannot be read.
func (r *runner) sealKey() []byte {
	if r.seal == nil && r.store != "" {
		r.seal, _ = message.LoadSealKey(r.store.path(message.SealKeyFile))
	}
	return r.seal
}
