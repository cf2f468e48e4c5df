package sandbox

import "context"

// Mechanism is this OS's sandbox, as status names it.
const Mechanism = Bubblewrap

// Setup is the cage for p on Linux: bubblewrap, found on pathList (never inside exclude, the
// chamber, nor in any path p lets a session write) and tried once (Probe), so that a kernel
// without user namespaces is said now.
func Setup(ctx context.Context, pathList, exclude string, p Policy) (*Cage, error) {
	tool, err := Find(pathList, append([]string{exclude}, p.writableDirs()...)...)
	if err != nil {
		return nil, err
	}
	if err := Probe(ctx, tool); err != nil {
		return nil, err
	}
	return &Cage{Mechanism: Bubblewrap, Tool: tool, Policy: p}, nil
}

// writableDirs are the directories a session of p may write, for Find to pass over.
func (p Policy) writableDirs() []string {
	out := append([]string{p.Chamber}, p.Writable...)
	for _, b := range p.Binds {
		out = append(out, b.Dst, b.Src)
	}
	return out
}

// SetupKnown is Setup without the trial run when known is what Known says of the tool found:
// a cage started with this tool on this boot (known.go). The cage is then Unprobed, and a
// failed session of it is tried again (Cage.Recheck).
func SetupKnown(ctx context.Context, pathList, exclude string, p Policy, known string) (*Cage, error) {
	tool, err := Find(pathList, append([]string{exclude}, p.writableDirs()...)...)
	if err != nil {
		return nil, err
	}
	if k := Known(tool); known != "" && k == known {
		return &Cage{Mechanism: Bubblewrap, Tool: tool, Policy: p, Unprobed: true}, nil
	}
	if err := Probe(ctx, tool); err != nil {
		return nil, err
	}
	return &Cage{Mechanism: Bubblewrap, Tool: tool, Policy: p}, nil
}
