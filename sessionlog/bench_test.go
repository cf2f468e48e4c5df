package sessionlog

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// genLog writes a log of about size bytes of closed blocks (20 to 80 lines of 80 bytes each)
// and returns its path and the number of blocks.
func genLog(b *testing.B, size int64) (string, int) {
	b.Helper()
	p := filepath.Join(b.TempDir(), "cryo.log")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	body := "| " + strings.Repeat("lorem ipsum ", 6) + "\n"
	var written int64
	n := 0
	for written < size {
		n++
		start := t0.Add(time.Duration(n) * time.Hour)
		k, _ := fmt.Fprintf(w, "--- CRYO SESSION %d %s ---\n# task: step %d\n", n, start.Format(timeLayout), n)
		written += int64(k)
		for j := 0; j < 20+n%61; j++ {
			k, _ := w.WriteString(body)
			written += int64(k)
		}
		k, _ = fmt.Fprintf(w, "--- CRYO END %d %s exit=0 ---\n", n, start.Add(time.Minute).Format(timeLayout))
		written += int64(k)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return p, n
}

var sizes = []struct {
	name string
	size int64
}{{"1MiB", 1 << 20}, {"100MiB", 100 << 20}}

func BenchmarkLatest(b *testing.B) {
	for _, s := range sizes {
		b.Run(s.name, func(b *testing.B) {
			if s.size > 1<<20 && testing.Short() {
				b.Skip("100 MiB log skipped with -short")
			}
			p, n := genLog(b, s.size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				info, err := Latest(p, -1)
				if err != nil || info.Session != n {
					b.Fatalf("Latest = %+v, %v", info, err)
				}
			}
		})
	}
}

func BenchmarkFind(b *testing.B) {
	for _, s := range sizes {
		b.Run(s.name, func(b *testing.B) {
			if s.size > 1<<20 && testing.Short() {
				b.Skip("100 MiB log skipped with -short")
			}
			p, n := genLog(b, s.size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				want := 1 + (i*7919)%n
				info, err := Find(p, want)
				if err != nil || info.Session != want {
					b.Fatalf("Find(%d) = %+v, %v", want, info, err)
				}
			}
		})
	}
}

// BenchmarkWrite measures agent output through a Block into a file (MB/s), in 4 KiB chunks of
// 80-byte lines as a pipe delivers them.
func BenchmarkWrite(b *testing.B) {
	p := filepath.Join(b.TempDir(), "cryo.log")
	blk, err := Begin(p, 1, t0, nil)
	if err != nil {
		b.Fatal(err)
	}
	blk.OnStdoutLine(func(int, string) {})
	chunk := []byte(strings.Repeat(strings.Repeat("x", 79)+"\n", 4096/80))
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := blk.Stdout().Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := blk.End(t0, 0, ""); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWriteLarge is BenchmarkWrite with the 1 MiB reads agent.Exec makes from a grown
// pipe, of agent-like lines (10 to 200 bytes, some UTF-8, a tab now and then).
func BenchmarkWriteLarge(b *testing.B) {
	p := filepath.Join(b.TempDir(), "cryo.log")
	blk, err := Begin(p, 1, t0, nil)
	if err != nil {
		b.Fatal(err)
	}
	blk.OnStdoutLine(func(int, string) {})
	var chunk []byte
	words := []string{"build", "the", "tests", "passed", "übersicht", "naïve", "✓", "→", "v1.2.3", "merged"}
	for i := 0; len(chunk) < 1<<20; i++ {
		for w := 0; w < 2+i%30; w++ {
			chunk = append(chunk, words[(i*7+w)%len(words)]...)
			chunk = append(chunk, ' ')
		}
		if i%10 == 0 {
			chunk = append(chunk, '\t', 'x')
		}
		chunk = append(chunk, '\n')
	}
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := blk.Stdout().Write(chunk); err != nil {
			b.Fatal(err)
		}
		if i%200 == 199 {
			// Keep the file small: what is measured is the work per byte, not the disk.
			blk.mu.Lock()
			_ = blk.f.Truncate(0)
			blk.mu.Unlock()
		}
	}
	b.StopTimer()
	if err := blk.End(t0, 0, ""); err != nil {
		b.Fatal(err)
	}
}
