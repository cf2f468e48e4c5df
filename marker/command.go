package marker

import (
	"errors"
	"fmt"
	"strings"
)

// SplitCommand splits a CMD command line into words with the quoting rules of a POSIX shell,
// without any shell ever running it:
//   - blanks (space, tab, newline) separate words;
//   - '...' keeps everything literally up to the next ';
//   - "..." keeps everything literally except the escapes \" \\ \$ and \`;
//   - outside quotes, a backslash makes the next character literal.
//
// Since no shell runs the words, nothing is expanded, and shell syntax outside quotes is
// refused rather than passed on as text the agent meant for a shell: ; | & < > ` ( ) and $
// (variables, $( and ${). Inside quotes these are plain text. An unterminated quote, a trailing
// backslash and a NUL byte (which no argument can hold) are errors.
//
// An empty or blank s gives no words and no error.
func SplitCommand(s string) ([]string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errors.New("NUL byte in command line")
	}
	var (
		words  []string
		word   strings.Builder
		inWord bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t', '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			word.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\"\\$`", s[j+1]) >= 0 {
					j++
				}
				word.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
			i = j
		case '\\':
			if i+1 == len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			word.WriteByte(s[i])
			inWord = true
		case ';', '|', '&', '<', '>', '`', '(', ')':
			return nil, shellSyntax(string(c))
		case '$':
			if i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{') {
				return nil, shellSyntax(s[i : i+2])
			}
			return nil, shellSyntax("$")
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

func shellSyntax(tok string) error {
	return fmt.Errorf("unquoted %q is shell syntax, but no shell runs this command (quote it to pass it as text)", tok)
}

// JoinCommand quotes words so that SplitCommand (and a POSIX shell) splits the result back into
// exactly these words. Words made only of safe characters are left bare; others are put in
// single quotes. It is meant for showing and storing a command line.
func JoinCommand(words []string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w != "" && strings.Trim(w, safeChars) == "" {
			b.WriteString(w)
			continue
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(w, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}

const safeChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-"
