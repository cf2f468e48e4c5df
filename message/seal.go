package message

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// Seals tell what cryochamber itself filed in the outbox from what anyone else put there. The
// agent can write in its chamber, so a file that says `from: cryochamber` or `kind: alert`
// proves nothing; a sync must not publish it in cryochamber's voice. A seal is an HMAC-SHA256,
// under a key kept in the chamber's private state directory, of the message's name and its file
// without the seal. It vouches only for who filed the message and as what: a sealed reply
// still holds the agent's words.

// SealKeyFile is the key's file in the chamber's private state directory.
const SealKeyFile = "seal.key"

// LoadSealKey reads the key at path (os.ErrNotExist when there is none yet).
func LoadSealKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%s is not a seal key (64 hex digits)", path)
	}
	return key, nil
}

// SealKey reads the key at path, creating it (mode 0600, atomically) when there is none.
func SealKey(path string) ([]byte, error) {
	key, err := LoadSealKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write the seal key: %w", err)
	}
	// Two writers at once: one rename wins, and both go on with the key that is there.
	return LoadSealKey(path)
}

// SealWith sets m.Seal for key. m.ID must be set (the name is part of what is sealed).
func (m *Message) SealWith(key []byte) error {
	if m.ID == "" {
		return errors.New("seal: the message has no name")
	}
	sum, err := m.mac(key)
	if err != nil {
		return err
	}
	m.Seal = hex.EncodeToString(sum)
	return nil
}

// SealedBy reports whether m carries a valid seal for key.
func (m *Message) SealedBy(key []byte) bool {
	if len(key) == 0 || m.Seal == "" {
		return false
	}
	got, err := hex.DecodeString(m.Seal)
	if err != nil {
		return false
	}
	want, err := m.mac(key)
	return err == nil && hmac.Equal(got, want)
}

func (m *Message) mac(key []byte) ([]byte, error) {
	c := *m
	c.Seal = ""
	data, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(m.ID))
	h.Write([]byte{0})
	h.Write(data)
	return h.Sum(nil), nil
}

// UnsealedFrom is who an outbox file without cryochamber's seal is shown and published as.
const UnsealedFrom = "the agent (a file in its outbox)"

// Vouch makes m, read from the outbox, say only what its seal vouches for: a file cryochamber
// did not seal under key (nil: no key yet) is the agent's words, a reply from UnsealedFrom,
// whatever its header claims (an alert, a notice, from cryochamber). Its text is untouched.
func Vouch(m *Message, key []byte) {
	if !m.SealedBy(key) {
		m.Kind, m.From = KindReply, UnsealedFrom
	}
}
