package message

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSeal: a sealed message read back from its file is sealed; any change to who filed it,
// as what, under which name or with which words, or another key, is not.
func TestSeal(t *testing.T) {
	dir := t.TempDir()
	key, err := SealKey(filepath.Join(dir, SealKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, SealKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	again, err := SealKey(filepath.Join(dir, SealKeyFile))
	if err != nil || string(again) != string(key) {
		t.Fatalf("SealKey the second time: %x %v, want the same key", again, err)
	}
	m := &Message{ID: "20261123T220000.000000000Z-session3-notice", From: "cryochamber", Subject: "garden: session 3 failed",
		Time: time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC), Kind: KindNotice, Session: 3, Body: "retrying"}
	if err := m.SealWith(key); err != nil {
		t.Fatal(err)
	}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	read := func() *Message {
		r, err := Parse(m.ID+".md", data)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := read(); !r.SealedBy(key) {
		t.Fatalf("the sealed message read back is not sealed:\n%s", data)
	}
	other, _ := SealKey(filepath.Join(t.TempDir(), SealKeyFile))
	for name, change := range map[string]func(*Message){
		"from":     func(r *Message) { r.From = "agent" },
		"kind":     func(r *Message) { r.Kind = KindAlert },
		"session":  func(r *Message) { r.Session = 4 },
		"body":     func(r *Message) { r.Body = "all is well\n" },
		"subject":  func(r *Message) { r.Subject = "garden: recovered" },
		"name":     func(r *Message) { r.ID = "20261123T220001.000000000Z-session3-notice" },
		"no seal":  func(r *Message) { r.Seal = "" },
		"not hex":  func(r *Message) { r.Seal = "zz" },
		"any time": func(r *Message) { r.Time = r.Time.Add(time.Second) },
	} {
		r := read()
		change(r)
		if r.SealedBy(key) {
			t.Errorf("%s changed: still sealed", name)
		}
	}
	if read().SealedBy(other) || read().SealedBy(nil) {
		t.Error("sealed under another key, or none")
	}
	if err := (&Message{}).SealWith(key); err == nil {
		t.Error("a message without a name was sealed")
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.key"), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSealKey(filepath.Join(dir, "bad.key")); err == nil {
		t.Error("a malformed key was loaded")
	}
}
