package doctor

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s with every character that could act on a terminal
// escaped, so that a string from the cluster or from Prometheus (a rule
// group name, a condition message, an object's name in an error) is shown
// and never obeyed: C0 controls (ESC, which starts ANSI CSI and OSC
// sequences, BEL, which ends OSC, CR, LF, TAB and the rest), DEL, the C1
// controls (U+0080 to U+009F: 8-bit CSI and OSC among them), the Unicode
// line and paragraph separators, the bidirectional overrides and isolates
// that reorder what is shown, and bytes that are not UTF-8. They are
// written as Go escapes (\x1b, \r, \u009b, \u202e, \xff). Backslashes are
// left as they are, so a kubectl command in a hint stays copyable.
//
// Every text printer of doctor passes every field through it (Report.Header
// and Report.WriteText); JSON output is escaped by its encoder.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if needsEscape(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == utf8.RuneError, !needsEscape(r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

func needsEscape(r rune) bool {
	switch {
	case r == utf8.RuneError:
		// Either invalid UTF-8 or a literal U+FFFD; Printable tells them
		// apart by size.
		return true
	case unicode.Is(unicode.Cc, r):
		return true
	case r == '\u2028', r == '\u2029':
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f',
		r >= '\u202a' && r <= '\u202e',
		r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}
