package main

import (
	"path/filepath"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// stateDirOf is the cryochamber state directory of a test's user manager (its HOME).
func stateDirOf(m *systemdtest.Manager) string {
	return filepath.Join(m.Home, ".local", "state", "cryochamber")
}

// stateOf reads the authoritative state of the chamber at dir.
func stateOf(m *systemdtest.Manager, dir string) (*chamber.State, error) {
	return chamber.LoadState(stateDirOf(m), dir)
}

// mailNames lists the messages of a mailbox directory (message.InboxDir, ...) of the chamber.
func mailNames(chamberDir, sub string) ([]string, error) {
	fs, err := confined.Open(chamberDir)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	return message.Names(fs, sub)
}

// mailRead reads one message of a mailbox directory of the chamber.
func mailRead(chamberDir, sub, name string) (*message.Message, error) {
	fs, err := confined.Open(chamberDir)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	return message.Read(fs, sub, name)
}

// mailWrite writes a message into a mailbox directory of the chamber.
func mailWrite(chamberDir, sub string, m *message.Message) (string, error) {
	fs, err := confined.Open(chamberDir)
	if err != nil {
		return "", err
	}
	defer fs.Close()
	return message.Write(fs, sub, m)
}
