package strategy

// This file holds a YAML writer for the JSON-compatible values that
// runtime.DefaultUnstructuredConverter produces. It exists for allocations:
// encoding a release's strategy through yamlv2.Marshal allocated about
// 130 MB per ConfigMap, most of it in yaml.v2's emitter (its event queue
// only grows during one Marshal, and its output buffer is regrown as the
// document gets longer). This writer keeps a few scratch slices and a small
// output buffer, reused from document to document, and streams the text to
// an io.Writer.
//
// Guarantee: for every value that (*yamlWriter).supported accepts,
// writeDocument writes exactly the bytes yamlv2.Marshal (go.yaml.in/yaml/v2
// v2.4.4) returns for it. The code is ours; yaml.v2 was read only to learn
// which output it gives, and every rule the code follows is checked against
// yaml.v2 by the differential tests and the fuzz target in
// yamlwriter_test.go. What cannot
// be shown identical is refused up front (errYAMLUnsupported, before
// anything is written) and the caller encodes that document with yaml.v2:
//
//   - types other than nil, bool, string, the Go integer and float kinds,
//     map[string]interface{} and []interface{};
//   - strings (values or keys) that are not valid UTF-8, which yaml.v2
//     writes as base64 under a !!binary tag;
//   - mappings whose keys yaml.v2's key comparison does not order totally.
//     It compares runs of digits by value but a letter and a digit by
//     class, so that for example v10 < v1alpha1 < v2 < v10, and then
//     yaml.v2's own output depends on Go's random map iteration order;
//   - a process in which yamlv2.FutureLineWrap was called (before the
//     first document), which turns yaml.v2's line folding off globally.
//
// The writer models the few pieces of state yaml.v2's emitter keeps while
// it writes (the column in characters, the current indentation, whether the
// last thing written was white space, whether the line holds only
// indentation so far) because the output rules are phrased in terms of
// them: a sequence directly under a mapping key is not indented only when
// the key's line has content, "- " and "? " put the first entry of a nested
// block on the same line, folding happens at a space once the column passed
// 80, and so on.

import (
	"errors"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
)

// errYAMLUnsupported says a value is outside what the writer reproduces
// byte for byte; nothing was written, and the caller falls back to yaml.v2.
var errYAMLUnsupported = errors.New("yaml writer: value outside what it reproduces exactly; use yaml.v2")

const (
	yamlIndentStep    = 2   // yaml.v2's default indentation
	yamlFoldColumn    = 80  // yaml.v2's default preferred line width
	yamlMaxSimpleKey  = 128 // longer keys (in bytes) are written as "? key"
	yamlFlushAt       = 16 << 10
	yamlInitialBuffer = 20 << 10
)

// yamlStyle is how a scalar is written.
type yamlStyle uint8

const (
	yamlPlain yamlStyle = iota
	yamlSingleQuoted
	yamlDoubleQuoted
	yamlLiteral
)

// yamlWriter writes YAML documents. Its zero value is not usable; get one
// from getYAMLWriter and return it with putYAMLWriter.
type yamlWriter struct {
	out io.Writer
	err error
	buf []byte

	// The emitter state the output rules depend on.
	column     int  // characters (not bytes) written on the current line
	indent     int  // indentation of the current block; -1 outside any
	whitespace bool // the last character written counts as white space
	indention  bool // the current line holds only indentation so far

	// Scratch reused between documents: sorted entries per nesting depth,
	// and key ranks for the key order check.
	entries [][]yamlEntry
	ranks   []int
	depth   int
}

type yamlEntry struct {
	key   string
	value interface{}
}

var yamlWriterPool = sync.Pool{New: func() any {
	return &yamlWriter{buf: make([]byte, 0, yamlInitialBuffer)}
}}

func getYAMLWriter() *yamlWriter { return yamlWriterPool.Get().(*yamlWriter) }

func putYAMLWriter(y *yamlWriter) {
	y.out, y.err = nil, nil
	for _, es := range y.entries {
		clear(es[:cap(es)]) // drop references to the documents' values
	}
	if cap(y.buf) > 1<<20 { // a huge scalar grew it; do not keep that
		y.buf = make([]byte, 0, yamlInitialBuffer)
	}
	yamlWriterPool.Put(y)
}

// writeDocument writes v as one YAML document to w, as yamlv2.Marshal(v)
// would give it. When v is outside what the writer reproduces exactly it
// returns errYAMLUnsupported and writes nothing.
func (y *yamlWriter) writeDocument(w io.Writer, v interface{}) error {
	y.depth = 0
	if !yamlv2Folds() || !y.supported(v) {
		return errYAMLUnsupported
	}
	y.out, y.err = w, nil
	y.buf = y.buf[:0]
	y.column, y.indent = 0, -1
	y.whitespace, y.indention = true, true
	y.node(v, false)
	// The document ends on a line of its own.
	y.writeIndent()
	y.flush()
	return y.err
}

// yamlv2Folds reports whether yaml.v2 folds long lines: nothing called
// yamlv2.FutureLineWrap, which stops that for the whole process, before
// the first document (it is checked once).
var yamlv2Folds = sync.OnceValue(func() bool {
	b, err := yamlv2.Marshal(strings.Repeat("word ", 40) + "end")
	return err == nil && strings.Count(string(b), "\n") > 1
})

// supported reports whether every value under v is one writeDocument
// reproduces exactly.
func (y *yamlWriter) supported(v interface{}) bool {
	switch v := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return true
	case string:
		return utf8.ValidString(v)
	case []interface{}:
		for _, e := range v {
			if !y.supported(e) {
				return false
			}
		}
		return true
	case map[string]interface{}:
		digits := false
		for k, e := range v {
			if !utf8.ValidString(k) || !y.supported(e) {
				return false
			}
			digits = digits || hasDigit(k)
		}
		// Without digits yaml.v2's key comparison is a plain lexicographic
		// order (see yamlKeyLess), a total order; with digits it must be
		// checked.
		return !digits || y.keysTotallyOrdered(v)
	}
	return false
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if '0' <= c && c <= '9' {
			return true
		}
		if c >= utf8.RuneSelf {
			r, w := utf8.DecodeRuneInString(s[i:])
			if unicode.IsDigit(r) {
				return true
			}
			i += w - 1
		}
	}
	return false
}

// keysTotallyOrdered reports whether yamlKeyLess is a strict total order on
// m's keys, so that any sort, whatever order it starts from, gives the same
// sequence. A complete, asymmetric relation on n elements is transitive
// exactly when the elements' counts of elements they precede are all
// different (then they are 0, 1, ..., n-1).
func (y *yamlWriter) keysTotallyOrdered(m map[string]interface{}) bool {
	es := y.scratch(len(m))
	for k := range m {
		es = append(es, yamlEntry{key: k})
	}
	n := len(es)
	ranks := slices.Grow(y.ranks[:0], n)[:n]
	clear(ranks)
	y.ranks = ranks
	ok := true
	for i := 0; i < n && ok; i++ {
		for j := i + 1; j < n; j++ {
			ij, ji := yamlKeyLess(es[i].key, es[j].key), yamlKeyLess(es[j].key, es[i].key)
			if ij == ji {
				ok = false
				break
			}
			if ij {
				ranks[i]++
			} else {
				ranks[j]++
			}
		}
	}
	if ok {
		slices.Sort(ranks)
		for i, r := range ranks {
			if r != i {
				ok = false
				break
			}
		}
	}
	clear(es)
	return ok
}

// scratch returns the entry slice of the current depth, empty, with room
// for n entries.
func (y *yamlWriter) scratch(n int) []yamlEntry {
	for len(y.entries) <= y.depth {
		y.entries = append(y.entries, nil)
	}
	es := y.entries[y.depth]
	if cap(es) < n {
		es = make([]yamlEntry, 0, max(n, 16))
		y.entries[y.depth] = es
	}
	return es[:0]
}

// yamlKeyLess orders mapping keys as yaml.v2 does for string keys. It walks
// the two keys character by character; at the first difference, a letter
// sorts after a non-letter and two letters compare by code point; two
// non-letters compare the numbers formed by the digit runs starting there
// (0 for no run; when either character is '0' and the run they share so
// far has a non-zero digit, both numbers get a leading 1), then the runs'
// lengths, then the characters. A key that is a prefix of the other sorts
// first.
func yamlKeyLess(a, b string) bool {
	i := 0 // byte offset; the keys agree before it, so it is the same in both
	for i < len(a) && i < len(b) {
		ra, wa := utf8.DecodeRuneInString(a[i:])
		rb, _ := utf8.DecodeRuneInString(b[i:])
		if ra == rb {
			i += wa
			continue
		}
		la, lb := unicode.IsLetter(ra), unicode.IsLetter(rb)
		if la && lb {
			return ra < rb
		}
		if la || lb {
			return lb
		}
		var an, bn int64
		if ra == '0' || rb == '0' {
			for j := i; j > 0; {
				r, w := utf8.DecodeLastRuneInString(a[:j])
				if !unicode.IsDigit(r) {
					break
				}
				if r != '0' {
					an, bn = 1, 1
					break
				}
				j -= w
			}
		}
		an, alen := digitRun(a[i:], an)
		bn, blen := digitRun(b[i:], bn)
		if an != bn {
			return an < bn
		}
		if alen != blen {
			return alen < blen
		}
		return ra < rb
	}
	return len(a) < len(b)
}

// digitRun continues n with the digits s starts with (wrapping on overflow,
// as int64 arithmetic does) and returns it with the run's length in
// characters.
func digitRun(s string, n int64) (int64, int) {
	count := 0
	for j := 0; j < len(s); {
		r, w := utf8.DecodeRuneInString(s[j:])
		if !unicode.IsDigit(r) {
			break
		}
		n = n*10 + int64(r-'0')
		j += w
		count++
	}
	return n, count
}

// Output primitives. Each character moves the column by one, whatever its
// length in bytes.

func (y *yamlWriter) putByte(c byte) {
	y.buf = append(y.buf, c)
	y.column++
}

func (y *yamlWriter) putBreak() {
	y.buf = append(y.buf, '\n')
	y.column = 0
}

// putChar copies the character at s[i] and returns its length in bytes.
func (y *yamlWriter) putChar(s string, i int) int {
	w := charLen(s[i])
	y.buf = append(y.buf, s[i:i+w]...)
	y.column++
	return w
}

// putLineBreak copies the line break at s[i]; a break other than "\n" is
// copied as it is and ends the line all the same.
func (y *yamlWriter) putLineBreak(s string, i int) int {
	if s[i] == '\n' {
		y.putBreak()
		return 1
	}
	w := y.putChar(s, i)
	y.column = 0
	return w
}

func charLen(c byte) int {
	switch {
	case c < 0x80:
		return 1
	case c < 0xE0:
		return 2
	case c < 0xF0:
		return 3
	}
	return 4
}

func (y *yamlWriter) flush() {
	if len(y.buf) == 0 || y.err != nil {
		y.buf = y.buf[:0]
		return
	}
	_, y.err = y.out.Write(y.buf)
	y.buf = y.buf[:0]
}

// writeIndent starts a new line at the current indentation unless the line
// holds nothing but that indentation already.
func (y *yamlWriter) writeIndent() {
	indent := max(y.indent, 0)
	if !y.indention || y.column > indent || (y.column == indent && !y.whitespace) {
		y.putBreak()
	}
	if len(y.buf) >= yamlFlushAt {
		y.flush()
	}
	for y.column < indent {
		y.putByte(' ')
	}
	y.whitespace, y.indention = true, true
}

// writeIndicator writes an ASCII indicator ("-", "?", ":", "{", a quote,
// "|"...), after a space when needSpace and the last character was not
// white space.
func (y *yamlWriter) writeIndicator(ind string, needSpace, isSpace, keepsIndention bool) {
	if needSpace && !y.whitespace {
		y.putByte(' ')
	}
	y.buf = append(y.buf, ind...)
	y.column += len(ind)
	y.whitespace = isSpace
	y.indention = y.indention && keepsIndention
}

// node writes one value; inMapping says it is a mapping's value.
func (y *yamlWriter) node(v interface{}, inMapping bool) {
	var num [32]byte
	switch v := v.(type) {
	case nil:
		y.writeWord("null")
	case bool:
		if v {
			y.writeWord("true")
		} else {
			y.writeWord("false")
		}
	case string:
		y.writeString(v, analyzeYAMLScalar(v), false)
	case int:
		y.writeWordBytes(strconv.AppendInt(num[:0], int64(v), 10))
	case int8:
		y.writeWordBytes(strconv.AppendInt(num[:0], int64(v), 10))
	case int16:
		y.writeWordBytes(strconv.AppendInt(num[:0], int64(v), 10))
	case int32:
		y.writeWordBytes(strconv.AppendInt(num[:0], int64(v), 10))
	case int64:
		y.writeWordBytes(strconv.AppendInt(num[:0], v, 10))
	case uint:
		y.writeWordBytes(strconv.AppendUint(num[:0], uint64(v), 10))
	case uint8:
		y.writeWordBytes(strconv.AppendUint(num[:0], uint64(v), 10))
	case uint16:
		y.writeWordBytes(strconv.AppendUint(num[:0], uint64(v), 10))
	case uint32:
		y.writeWordBytes(strconv.AppendUint(num[:0], uint64(v), 10))
	case uint64:
		y.writeWordBytes(strconv.AppendUint(num[:0], v, 10))
	case float32:
		y.writeFloat(num[:0], float64(v), 32)
	case float64:
		y.writeFloat(num[:0], v, 64)
	case map[string]interface{}:
		y.writeMapping(v)
	case []interface{}:
		y.writeSequence(v, inMapping)
	default:
		// supported refused these before anything was written.
		panic("yaml writer: unsupported type reached the writer")
	}
}

// writeFloat writes a float the way yaml.v2 does: the shortest 'g' form
// (so 1.0 is "1" and 1e21 is "1e+21"), and .inf, -.inf, .nan.
func (y *yamlWriter) writeFloat(b []byte, f float64, bits int) {
	b = strconv.AppendFloat(b, f, 'g', -1, bits)
	switch string(b) {
	case "+Inf":
		y.writeWord(".inf")
	case "-Inf":
		y.writeWord("-.inf")
	case "NaN":
		y.writeWord(".nan")
	default:
		y.writeWordBytes(b)
	}
}

// writeWord writes a plain scalar of ASCII characters, none of them a space
// or line break, that needs no analysis: null, booleans and numbers.
func (y *yamlWriter) writeWord(s string) {
	if !y.whitespace {
		y.putByte(' ')
	}
	y.buf = append(y.buf, s...)
	y.column += len(s)
	y.whitespace, y.indention = false, false
}

func (y *yamlWriter) writeWordBytes(b []byte) {
	if !y.whitespace {
		y.putByte(' ')
	}
	y.buf = append(y.buf, b...)
	y.column += len(b)
	y.whitespace, y.indention = false, false
}

func (y *yamlWriter) writeMapping(m map[string]interface{}) {
	if len(m) == 0 {
		y.writeIndicator("{", true, true, false)
		y.writeIndicator("}", false, false, false)
		return
	}
	saved := y.indent
	if y.indent < 0 {
		y.indent = 0
	} else {
		y.indent += yamlIndentStep
	}
	es := y.scratch(len(m))
	for k, v := range m {
		es = append(es, yamlEntry{k, v})
	}
	slices.SortFunc(es, func(a, b yamlEntry) int {
		if yamlKeyLess(a.key, b.key) {
			return -1
		}
		if yamlKeyLess(b.key, a.key) {
			return 1
		}
		return 0
	})
	y.entries[y.depth] = es
	y.depth++
	for i := range es {
		k, v := es[i].key, es[i].value
		y.writeIndent()
		facts := analyzeYAMLScalar(k)
		if !facts.multiline && len(k) <= yamlMaxSimpleKey {
			y.writeString(k, facts, true)
			y.writeIndicator(":", false, false, false)
		} else {
			// A complex key: "? key", then ": value" on the next line.
			y.writeIndicator("?", true, false, true)
			y.writeString(k, facts, false)
			y.writeIndent()
			y.writeIndicator(":", true, false, true)
		}
		y.node(v, true)
	}
	y.depth--
	clear(es)
	y.indent = saved
}

func (y *yamlWriter) writeSequence(s []interface{}, inMapping bool) {
	if len(s) == 0 {
		y.writeIndicator("[", true, true, false)
		y.writeIndicator("]", false, false, false)
		return
	}
	saved := y.indent
	// Under a mapping key whose line has content ("key:") the items are
	// not indented; after "? " or a complex key's ": " they are.
	indentless := inMapping && !y.indention
	if y.indent < 0 {
		y.indent = 0
	} else if !indentless {
		y.indent += yamlIndentStep
	}
	for _, v := range s {
		y.writeIndent()
		y.writeIndicator("-", true, false, true)
		y.node(v, false)
	}
	y.indent = saved
}

// yamlScalarFacts is what a string's characters allow (the emitter's
// analysis, for block context: scalars never appear inside the flow
// collections the writer emits, which are always empty).
type yamlScalarFacts struct {
	multiline    bool // holds a line break (\n, \r, U+0085, U+2028, U+2029)
	plainOK      bool
	singleOK     bool
	literalOK    bool
	startsWithBB bool // starts with a byte order mark
}

func isYAMLPrintable(r rune) bool {
	return r == '\n' || 0x20 <= r && r <= 0x7E || 0xA0 <= r && r <= 0xD7FF ||
		0xE000 <= r && r <= 0xFFFD && r != 0xFEFF
}

func isYAMLBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029
}

// breakAt reports whether a line break starts at s[i] (s is valid UTF-8).
func breakAt(s string, i int) bool {
	switch s[i] {
	case '\n', '\r':
		return true
	case 0xC2:
		return s[i+1] == 0x85
	case 0xE2:
		return s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9)
	}
	return false
}

func analyzeYAMLScalar(s string) yamlScalarFacts {
	if s == "" {
		return yamlScalarFacts{plainOK: true, singleOK: true}
	}
	var (
		indicators                       = strings.HasPrefix(s, "---") || strings.HasPrefix(s, "...")
		lineBreaks, special              bool
		leadingSpace, leadingBreak       bool
		trailingSpace, trailingBreak     bool
		breakThenSpace, spaceThenBreak   bool
		previousSpace, previousBreak     bool
		precededByBlank, followedByBlank bool
	)
	precededByBlank = true
	for i := 0; i < len(s); {
		r, w := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, w = utf8.DecodeRuneInString(s[i:])
		}
		followedByBlank = i+w >= len(s) || s[i+w] == ' ' || s[i+w] == '\t'
		if i == 0 {
			switch r {
			case '#', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
				indicators = true
			case '?', ':', '-':
				indicators = indicators || followedByBlank
			}
		} else {
			switch r {
			case ':':
				indicators = indicators || followedByBlank
			case '#':
				indicators = indicators || precededByBlank
			}
		}
		if !isYAMLPrintable(r) {
			special = true
		}
		isBreak := isYAMLBreak(r)
		switch {
		case r == ' ':
			leadingSpace = leadingSpace || i == 0
			trailingSpace = trailingSpace || i+w == len(s)
			breakThenSpace = breakThenSpace || previousBreak
			previousSpace, previousBreak = true, false
		case isBreak:
			lineBreaks = true
			leadingBreak = leadingBreak || i == 0
			trailingBreak = trailingBreak || i+w == len(s)
			spaceThenBreak = spaceThenBreak || previousSpace
			previousSpace, previousBreak = false, true
		default:
			previousSpace, previousBreak = false, false
		}
		precededByBlank = r == ' ' || r == '\t' || r == 0 || isBreak
		i += w
	}
	return yamlScalarFacts{
		multiline: lineBreaks,
		plainOK: !(leadingSpace || leadingBreak || trailingSpace || trailingBreak ||
			breakThenSpace || spaceThenBreak || special || lineBreaks || indicators),
		singleOK:     !(breakThenSpace || spaceThenBreak || special),
		literalOK:    !(trailingSpace || spaceThenBreak || special),
		startsWithBB: strings.HasPrefix(s, "\uFEFF"),
	}
}

// writeString writes a string scalar in the style yaml.v2 ends up with:
// the one its encoder asks for (literal for text with "\n", plain when the
// text would read back as a string, double-quoted otherwise), given up for
// single quotes, then double quotes, when the characters do not allow it.
func (y *yamlWriter) writeString(s string, facts yamlScalarFacts, simpleKey bool) {
	var style yamlStyle
	switch {
	case strings.Contains(s, "\n"):
		style = yamlLiteral
	case plainReadsAsString(s):
		style = yamlPlain
	default:
		style = yamlDoubleQuoted
	}
	if simpleKey && facts.multiline {
		style = yamlDoubleQuoted
	}
	if style == yamlPlain && (!facts.plainOK || s == "" && simpleKey) {
		style = yamlSingleQuoted
	}
	if style == yamlSingleQuoted && !facts.singleOK {
		style = yamlDoubleQuoted
	}
	if style == yamlLiteral && (!facts.literalOK || simpleKey) {
		style = yamlDoubleQuoted
	}
	// A scalar's continuation lines are indented one step more than the
	// block it is in.
	saved := y.indent
	if y.indent < 0 {
		y.indent = yamlIndentStep
	} else {
		y.indent += yamlIndentStep
	}
	fold := !simpleKey
	switch style {
	case yamlPlain:
		y.writePlain(s, fold)
	case yamlSingleQuoted:
		y.writeSingleQuoted(s, fold)
	case yamlDoubleQuoted:
		y.writeDoubleQuoted(s, fold, facts.startsWithBB)
	case yamlLiteral:
		y.writeLiteral(s)
	}
	y.indent = saved
}

// writePlain: a space may become a line break (and the indentation) when
// the column passed 80 and neither the previous nor the next character is
// a space.
func (y *yamlWriter) writePlain(s string, fold bool) {
	if !y.whitespace {
		y.putByte(' ')
	}
	spaces, breaks := false, false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ':
			if fold && !spaces && y.column > yamlFoldColumn && !(i+1 < len(s) && s[i+1] == ' ') {
				y.writeIndent()
				i++
			} else {
				y.putByte(' ')
				i++
			}
			spaces = true
		case breakAt(s, i):
			if !breaks && c == '\n' {
				y.putBreak()
			}
			i += y.putLineBreak(s, i)
			y.indention = true
			breaks = true
		default:
			if breaks {
				y.writeIndent()
			}
			if c < utf8.RuneSelf {
				y.putByte(c)
				i++
			} else {
				i += y.putChar(s, i)
			}
			y.indention = false
			spaces, breaks = false, false
		}
	}
	y.whitespace, y.indention = false, false
}

// writeSingleQuoted: quotes are doubled; a space not first or last may fold
// as in writePlain.
func (y *yamlWriter) writeSingleQuoted(s string, fold bool) {
	y.writeIndicator("'", true, false, false)
	spaces, breaks := false, false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ':
			if fold && !spaces && y.column > yamlFoldColumn && i > 0 && i < len(s)-1 && s[i+1] != ' ' {
				y.writeIndent()
			} else {
				y.putByte(' ')
			}
			i++
			spaces = true
		case breakAt(s, i):
			if !breaks && c == '\n' {
				y.putBreak()
			}
			i += y.putLineBreak(s, i)
			y.indention = true
			breaks = true
		default:
			if breaks {
				y.writeIndent()
			}
			if c == '\'' {
				y.putByte('\'')
			}
			i += y.putChar(s, i)
			y.indention = false
			spaces, breaks = false, false
		}
	}
	y.writeIndicator("'", false, false, false)
	y.whitespace, y.indention = false, false
}

const upperHex = "0123456789ABCDEF"

// writeDoubleQuoted: non-printable characters, line breaks, '"' and '\\'
// are escaped (every character is when the text starts with a byte order
// mark, as yaml.v2 tests for the mark at the start of the text, not at each
// character); a space not first or last may fold, and a fold before a
// second space is marked with a backslash so the space is kept.
func (y *yamlWriter) writeDoubleQuoted(s string, fold, escapeAll bool) {
	y.writeIndicator(`"`, true, false, false)
	spaces := false
	for i := 0; i < len(s); {
		c := s[i]
		r, w := rune(c), 1
		if c >= utf8.RuneSelf {
			r, w = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case escapeAll || !isYAMLPrintable(r) || isYAMLBreak(r) || r == '"' || r == '\\':
			i += w
			y.putByte('\\')
			switch r {
			case 0x00:
				y.putByte('0')
			case 0x07:
				y.putByte('a')
			case 0x08:
				y.putByte('b')
			case 0x09:
				y.putByte('t')
			case 0x0A:
				y.putByte('n')
			case 0x0B:
				y.putByte('v')
			case 0x0C:
				y.putByte('f')
			case 0x0D:
				y.putByte('r')
			case 0x1B:
				y.putByte('e')
			case '"':
				y.putByte('"')
			case '\\':
				y.putByte('\\')
			case 0x85:
				y.putByte('N')
			case 0xA0:
				y.putByte('_')
			case 0x2028:
				y.putByte('L')
			case 0x2029:
				y.putByte('P')
			default:
				digits := 8
				switch {
				case r <= 0xFF:
					y.putByte('x')
					digits = 2
				case r <= 0xFFFF:
					y.putByte('u')
					digits = 4
				default:
					y.putByte('U')
				}
				for shift := (digits - 1) * 4; shift >= 0; shift -= 4 {
					y.putByte(upperHex[(r>>uint(shift))&0xF])
				}
			}
			spaces = false
		case c == ' ':
			if fold && !spaces && y.column > yamlFoldColumn && i > 0 && i < len(s)-1 {
				y.writeIndent()
				if s[i+1] == ' ' {
					y.putByte('\\')
				}
			} else {
				y.putByte(' ')
			}
			i++
			spaces = true
		default:
			y.buf = append(y.buf, s[i:i+w]...)
			y.column++
			i += w
			spaces = false
		}
	}
	y.writeIndicator(`"`, false, false, false)
	y.whitespace, y.indention = false, false
}

// writeLiteral writes a "|" block: an indentation indicator when the text
// starts with a space or line break, "-" when it does not end with a line
// break, "+" when it ends with two (or is one), then the lines indented.
func (y *yamlWriter) writeLiteral(s string) {
	y.writeIndicator("|", true, false, false)
	if s != "" && (s[0] == ' ' || breakAt(s, 0)) {
		y.writeIndicator(string(rune('0'+yamlIndentStep)), false, false, false)
	}
	chomp := ""
	if s == "" {
		chomp = "-"
	} else {
		last := len(s) - 1
		for s[last]&0xC0 == 0x80 {
			last--
		}
		switch {
		case !breakAt(s, last):
			chomp = "-"
		case last == 0:
			chomp = "+"
		default:
			prev := last - 1
			for s[prev]&0xC0 == 0x80 {
				prev--
			}
			if breakAt(s, prev) {
				chomp = "+"
			}
		}
	}
	if chomp != "" {
		y.writeIndicator(chomp, false, false, false)
	}
	y.putBreak()
	y.indention, y.whitespace = true, true
	breaks := true
	for i := 0; i < len(s); {
		if breakAt(s, i) {
			i += y.putLineBreak(s, i)
			y.indention = true
			breaks = true
			continue
		}
		if breaks {
			y.writeIndent()
		}
		i += y.putChar(s, i)
		y.indention = false
		breaks = false
	}
}

// plainReadsAsString reports whether s, written without quotes, would read
// back as a string in YAML 1.1 as yaml.v2 resolves it, and is not a
// base-60 number (which yaml.v2 quotes for other parsers' sake). yaml.v2
// quotes everything else: "", null, ~, booleans (y, yes, on, off...),
// numbers in any base, floats, .inf/.nan and timestamps.
func plainReadsAsString(s string) bool {
	if s == "" {
		return false // null
	}
	switch c := s[0]; {
	case c == '+' || c == '-' || '0' <= c && c <= '9':
		if yamlv2Words[s] {
			return false
		}
		return !numberLike(s) && !isBase60(s)
	case c == '.':
		if yamlv2Words[s] {
			return false
		}
		// After a leading '.' a float has digits and an exponent only;
		// anything else (as in the field path ".spec.template") is a
		// string, without the parse attempt, which allocates its error.
		for i := 1; i < len(s); i++ {
			if !strings.ContainsRune("0123456789eE+-_", rune(s[i])) {
				return true
			}
		}
		_, err := strconv.ParseFloat(s, 64)
		return err != nil
	case strings.IndexByte("yYnNtTfFoO~", c) >= 0:
		return !yamlv2Words[s]
	}
	return true
}

// yamlv2Words are the plain words yaml.v2 reads as something other than a
// string (booleans, null, infinities, not-a-number), for the first
// characters it looks them up for.
var yamlv2Words = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`y Y yes Yes YES true True TRUE on On ON
		n N no No NO false False FALSE off Off OFF ~ null Null NULL
		.nan .NaN .NAN .inf .Inf .INF +.inf +.Inf +.INF -.inf -.Inf -.INF`) {
		m[w] = true
	}
	return m
}()

// numberLike reports whether s (starting with a sign or digit) reads as a
// timestamp, integer or float in yaml.v2's resolution.
func numberLike(s string) bool {
	// Each of those forms is made of these characters only; anything else
	// (as in the quantities "100Mi" or "500m") is a string, without the
	// parse attempts below, which allocate errors.
	hexLetter, hexPrefix := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !numberChar[c] {
			return false
		}
		switch c {
		case 'a', 'c', 'd', 'f', 'A', 'C', 'D', 'F':
			hexLetter = true
		case 'x', 'X':
			hexPrefix = true
		}
	}
	// Hex digits other than b and e (also a base prefix and an exponent)
	// occur only in hexadecimal integers, after 0x: not in a hash such as
	// "4de573b3...".
	if hexLetter && !hexPrefix {
		return false
	}
	if isYAMLTimestamp(s) {
		return true
	}
	plain := strings.ReplaceAll(s, "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return true
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return true
	}
	if yamlFloatSyntax.MatchString(plain) {
		if _, err := strconv.ParseFloat(plain, 64); err == nil {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(plain, "0b"); ok {
		if _, err := strconv.ParseInt(rest, 2, 64); err == nil {
			return true
		}
		if _, err := strconv.ParseUint(rest, 2, 64); err == nil {
			return true
		}
	} else if rest, ok := strings.CutPrefix(plain, "-0b"); ok {
		if _, err := strconv.ParseInt("-"+rest, 2, 64); err == nil {
			return true
		}
	}
	return false
}

// numberChar: the characters of timestamps (digits - : T t Z + space, and
// . or , before fractional seconds),
// Go integer literals with base prefixes and underscores (hex digits, x X o
// O b B _), and floats (e E).
var numberChar = func() (t [256]bool) {
	for _, c := range "0123456789abcdefABCDEFxXoObBtTZ_+-.,: " {
		t[c] = true
	}
	return t
}()

var yamlFloatSyntax = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// yamlTimestampLayouts are the timestamp forms yaml.v2 reads.
var yamlTimestampLayouts = []string{
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
	"2006-1-2",
}

func isYAMLTimestamp(s string) bool {
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i != 4 || i == len(s) || s[i] != '-' {
		return false
	}
	for _, layout := range yamlTimestampLayouts {
		if _, err := time.Parse(layout, s); err == nil {
			return true
		}
	}
	return false
}

var yamlBase60 = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)

// isBase60 reports whether s is a YAML 1.1 base-60 number such as 1:20.
func isBase60(s string) bool {
	return strings.IndexByte(s, ':') >= 0 && yamlBase60.MatchString(s)
}
