package timer

// The environment file holds PATH, HOME and the agent_env variables of a chamber. systemd reads
// it through EnvironmentFile=; `cryochamber wake` reads it itself when it runs outside systemd.
// Both must see the same values, so the file is written in the one form that systemd 252's
// parser (parse_env_file_internal) and ParseEnvFile read identically: KEY="value", with `\`,
// `"`, `$` and “`” backslash-escaped inside the double quotes.

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxEnvFile bounds the size of an environment file, written or read.
const MaxEnvFile = 1 << 20

// maxEnvName bounds a variable name; systemd allows more, no real name comes close.
const maxEnvName = 256

// ParseError is a problem at one line of a file this package reads.
type ParseError struct {
	Line int // 1-based
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

const envFileHeader = "# Environment of this chamber's sessions, written by cryochamber (mode 0600).\n"

// checkEnvName reports whether name is a valid variable name for systemd (env_name_is_valid):
// ASCII letters, digits and underscores, not starting with a digit.
func checkEnvName(name string) error {
	if name == "" {
		return errors.New("empty variable name")
	}
	if len(name) > maxEnvName {
		return fmt.Errorf("variable name %.40q... is longer than %d bytes", name, maxEnvName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("invalid variable name %q", name)
		}
	}
	return nil
}

// checkEnvValue refuses what cannot be written on one line or that systemd drops: invalid UTF-8
// and control characters (a newline or a tab included).
func checkEnvValue(name, value string) error {
	if !utf8.ValidString(value) {
		return fmt.Errorf("value of %s is not valid UTF-8", name)
	}
	for _, r := range value {
		if unicode.IsControl(r) {
			return fmt.Errorf("value of %s contains the control character %U", name, r)
		}
	}
	return nil
}

// FormatEnvFile renders vars ("KEY=value" each) as an environment file for EnvironmentFile=.
// Names must be valid and distinct; values must be valid UTF-8 without control characters.
func FormatEnvFile(vars []string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(envFileHeader)
	seen := make(map[string]bool, len(vars))
	for i, kv := range vars {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("variable %d (%.40q) has no '='", i, kv)
		}
		if err := checkEnvName(name); err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("variable %s is given twice", name)
		}
		seen[name] = true
		if err := checkEnvValue(name, value); err != nil {
			return nil, err
		}
		b.WriteString(name)
		b.WriteString(`="`)
		for j := 0; j < len(value); j++ {
			switch c := value[j]; c {
			case '\\', '"', '$', '`':
				b.WriteByte('\\')
				b.WriteByte(c)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteString("\"\n")
		if b.Len() > MaxEnvFile {
			return nil, fmt.Errorf("environment file is larger than %d bytes", MaxEnvFile)
		}
	}
	return b.Bytes(), nil
}

// ParseEnvFile reads an environment file as systemd would and returns its variables as
// "KEY=value", in the order of first appearance (a later assignment replaces an earlier one,
// as in systemd). It reads what FormatEnvFile writes, plus the simple forms a person may add
// by hand: blank lines, `#` and `;` comments, KEY=unquoted and KEY='single quoted'. Forms that
// span lines (a quote left open, a trailing backslash) are refused with their line number
// rather than guessed at.
func ParseEnvFile(data []byte) ([]string, error) {
	if len(data) > MaxEnvFile {
		return nil, fmt.Errorf("environment file is larger than %d bytes", MaxEnvFile)
	}
	var vars []string
	index := map[string]int{}
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // the final newline ends the last line, it opens none
	}
	for n, raw := range lines {
		lineNo := n + 1
		if !utf8.Valid(raw) {
			return nil, &ParseError{Line: lineNo, Msg: "not valid UTF-8"}
		}
		line := strings.TrimLeft(string(raw), " \t")
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		name, value, err := parseEnvLine(line)
		if err != nil {
			return nil, &ParseError{Line: lineNo, Msg: err.Error()}
		}
		if err := checkEnvName(name); err != nil {
			return nil, &ParseError{Line: lineNo, Msg: err.Error()}
		}
		if err := checkEnvValue(name, value); err != nil {
			return nil, &ParseError{Line: lineNo, Msg: err.Error()}
		}
		if i, ok := index[name]; ok {
			vars[i] = name + "=" + value
			continue
		}
		index[name] = len(vars)
		vars = append(vars, name+"="+value)
	}
	return vars, nil
}

// parseEnvLine splits one assignment line (leading blanks removed) into name and value.
func parseEnvLine(line string) (name, value string, err error) {
	name, rest, ok := strings.Cut(line, "=")
	if !ok {
		return "", "", fmt.Errorf("no '=' in %.40q", line)
	}
	name = strings.TrimRight(name, " \t")
	rest = strings.TrimLeft(rest, " \t")
	if rest == "" {
		return name, "", nil
	}
	var b strings.Builder
	switch rest[0] {
	case '"':
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] != '\\' {
				b.WriteByte(rest[i])
				continue
			}
			if i+1 == len(rest) {
				return "", "", errors.New("value continues on the next line (not supported)")
			}
			i++
			if !strings.ContainsRune("\\\"$`", rune(rest[i])) {
				b.WriteByte('\\') // like a shell, systemd keeps a backslash before anything else
			}
			b.WriteByte(rest[i])
		}
		if i == len(rest) {
			return "", "", errors.New("unterminated double quote")
		}
		rest = rest[i+1:]
	case '\'':
		end := strings.IndexByte(rest[1:], '\'')
		if end < 0 {
			return "", "", errors.New("unterminated single quote")
		}
		b.WriteString(rest[1 : 1+end])
		rest = rest[end+2:]
	default:
		// Unquoted: a backslash takes the next byte literally; unescaped trailing blanks go.
		keep := 0
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if c == '\\' {
				if i+1 == len(rest) {
					return "", "", errors.New("value continues on the next line (not supported)")
				}
				i++
				b.WriteByte(rest[i])
				keep = b.Len()
				continue
			}
			b.WriteByte(c)
			if c != ' ' && c != '\t' {
				keep = b.Len()
			}
		}
		return name, b.String()[:keep], nil
	}
	if tail := strings.Trim(rest, " \t"); tail != "" {
		return "", "", fmt.Errorf("text %.40q after the closing quote", tail)
	}
	return name, b.String(), nil
}
