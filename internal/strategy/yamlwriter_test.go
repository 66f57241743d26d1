package strategy

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/release"
)

// referenceManifestsData is the ConfigMap data as it was encoded before the
// streaming writer: yaml.v2 Marshal per object, each after "---\n", the
// whole stream gzipped at the default level, then base64.
func referenceManifestsData(t testing.TB, objs []client.Object) string {
	t.Helper()
	var raw bytes.Buffer
	for _, o := range objs {
		m, err := objectDocument(o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := yamlv2.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		raw.WriteString("---\n")
		raw.Write(b)
	}
	var gz bytes.Buffer
	w, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(gz.Bytes())
}

// writerOutput is what the streaming writer alone gives for v, and whether
// it took v at all.
func writerOutput(t testing.TB, v interface{}) ([]byte, bool) {
	t.Helper()
	y := getYAMLWriter()
	defer putYAMLWriter(y)
	var buf bytes.Buffer
	err := y.writeDocument(&buf, v)
	if errors.Is(err, errYAMLUnsupported) {
		if buf.Len() != 0 {
			t.Fatalf("the writer refused a value after writing %q", buf.Bytes())
		}
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), true
}

// checkLikeYAMLv2 fails unless v is written as yamlv2.Marshal writes it:
// by the writer when it takes v, and by writeYAMLDocument always, with
// yaml.v2 exactly when the writer refuses v. It returns whether the writer
// took v.
func checkLikeYAMLv2(t testing.TB, name string, v interface{}) bool {
	t.Helper()
	want, err := yamlv2.Marshal(v)
	if err != nil {
		t.Fatalf("%s: yaml.v2: %v", name, err)
	}
	got, ok := writerOutput(t, v)
	if ok && !bytes.Equal(got, want) {
		t.Errorf("%s: the writer differs from yaml.v2\n%s", name, firstDifference(want, got))
	}
	y := getYAMLWriter()
	defer putYAMLWriter(y)
	var buf bytes.Buffer
	usedYAMLv2, err := writeYAMLDocument(&buf, y, v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if usedYAMLv2 == ok {
		t.Errorf("%s: the writer took it: %v, yet yaml.v2 wrote it: %v", name, ok, usedYAMLv2)
	}
	if !bytes.Equal(buf.Bytes(), want) && (ok || !sameYAML(t, buf.Bytes(), want)) {
		// yaml.v2 itself is not deterministic for keys it does not order
		// totally; two of its outputs then differ in order only.
		t.Errorf("%s: writeYAMLDocument differs from yaml.v2 (writer took it: %v)\n%s", name, ok, firstDifference(want, buf.Bytes()))
	}
	return ok
}

// sameYAML reports whether two documents read back as the same value.
func sameYAML(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb interface{}
	if err := yamlv2.Unmarshal(a, &va); err != nil {
		t.Fatalf("%v\n%s", err, a)
	}
	if err := yamlv2.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}

// firstDifference shows where got departs from want, with some context.
func firstDifference(want, got []byte) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	from := max(0, i-120)
	return fmt.Sprintf("first difference at byte %d (want %d bytes, got %d)\nyaml.v2: %q\nwriter:  %q",
		i, len(want), len(got), want[from:min(len(want), i+80)], got[from:min(len(got), i+80)])
}

// TestYAMLWriterEveryRelease: every object of every release's strategy
// (VMExport on) is written as yaml.v2 writes it, by the writer itself (none
// falls back), and each ConfigMap's data is the reference encoding's.
func TestYAMLWriterEveryRelease(t *testing.T) {
	for _, v := range release.Versions() {
		t.Run(v, func(t *testing.T) {
			s := generateFor(t, atRelease(v))
			for _, o := range s.Objects {
				m, err := objectDocument(o)
				if err != nil {
					t.Fatal(err)
				}
				if !checkLikeYAMLv2(t, KeyOf(o).String(), m) {
					t.Errorf("%s: the writer refused it (falls back to yaml.v2)", KeyOf(o))
				}
			}
			cm, err := s.ConfigMap("kubevirt")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := cm.Data["manifests"], referenceManifestsData(t, s.Objects); got != want {
				t.Errorf("ConfigMap data differs from the reference encoding (%d bytes, want %d)", len(got), len(want))
			}
			raw, err := s.Manifests()
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeGzipBase64(cm.Data["manifests"])
			if err != nil || !bytes.Equal(back, raw) {
				t.Errorf("ConfigMap data does not decode to Manifests() (err %v)", err)
			}
		})
	}
}

// TestConfigMapSmallStrategies: an empty strategy and a one-object one
// encode as the reference does (the stream writes nothing, or little,
// before the gzip writer is closed), including with a reused gzip writer.
func TestConfigMapSmallStrategies(t *testing.T) {
	one := generateFor(t, nil).Objects[:1]
	for i, objs := range [][]client.Object{nil, one, nil, one} {
		s := &Strategy{ID: "id", Objects: objs}
		cm, err := s.ConfigMap("kubevirt")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cm.Data["manifests"], referenceManifestsData(t, objs); got != want {
			t.Errorf("strategy %d (%d objects): data %q, want %q", i, len(objs), got, want)
		}
	}
}

// trickyScalars are strings whose style, quoting, escaping or folding
// yaml.v2 decides by a rule of its own.
var trickyScalars = []string{
	"plain",                                                                               // plain
	"",                                                                                    // empty: reads as null, so double-quoted
	" lead",                                                                               // leading space: not plain, single-quoted
	"trail ",                                                                              // trailing space: single-quoted
	" both ",                                                                              // both
	"two  spaces inside",                                                                  // inner double space stays plain
	"true", "True", "TRUE", "false", "yes", "Yes", "no", "NO", "on", "Off", "y", "Y", "n", // YAML 1.1 booleans
	"null", "Null", "NULL", "~", // nulls
	"tRUE", "nO", "yES", "ofF", // not in the word list: plain
	"1", "-1", "+1", "007", "1_000", "0x1F", "0X1f", "0o17", "0b101", "-0b101", "0b2", // integers in Go syntax, underscores
	"9223372036854775807", "9223372036854775808", "18446744073709551616", // int64 max, uint64, beyond
	"0b1111111111111111111111111111111111111111111111111111111111111111", // 0b over int64, fits uint64
	"4de573b396bb67f8", "0xCAFE", "0Xcafe_f00d", "-0x1f", "12ab", "1d", "0b1e1", "0x", "0x_1", "1__2", "_1", // hex digits with and without 0x
	".5e3", ".5E+3", ".5_0", "._5", ".e3", ".5.5", ".spec.template", ".x", ".", ".5 ", // leading dots
	"1.5", "-1.5", "+.5", ".5", "1.", "1e3", "1E3", "1e+3", "1.5e-3", "1e999", "1e", "1_0.5", // floats (1e999 overflows: a string)
	".inf", ".Inf", "-.inf", "+.INF", ".nan", ".NaN", ".nAn", "-.nan", "inf", "NaN", // infinities, not-a-number
	"1:20", "-1:20", "1:20:30.5", "190:20:30", "1:60", "1:2:3_4", "12:30", "a:20", // base 60
	"2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "2001-12-14T21:59:43Z", // timestamps
	"2001-12-14 21:59:43,10", "2001-12-14T21:59:43,5Z", "2001-1-2", "20011-12-14", "2001-13-14", "2001-12-14x", // comma fraction, bad ones
	"100Mi", "1Gi", "500m", "10.0.0.1", "1.5.3", "v1.5.3", "5m0s", "-", "--", "---", "--- x", "...", "....", "-x", // numbers' look-alikes
	"- a", "-\ta", ": x", "x:", "x: y", "x :y", "x:y", ":x", "? x", "?x", "x?", // sequence and mapping indicators
	"#x", "a #b", "a#b", "a\t#b", "@x", "`x", "*x", "&x", "!x", "|", ">", "%x", "'x", "\"x", // comment and reserved indicators
	"[", "]", "{", "}", ",", "a,b", "[a]", "{a: b}", "?", ":", "<<", "=", // flow indicators, merge key
	"it's", "'quoted'", `"dq"`, `back\slash`, // quotes and backslashes
	"tab\there", "\tlead tab", "trail tab\t", // tabs are not printable: double-quoted \t
	"é", "café au lait", "中文", "日本語のテキスト", "emoji 😀", "😀", "\u00a0nbsp", "x\u00a0", // unicode; astral characters are escaped
	"\x00", "\x01\x02", "bell\a", "\b\f\v", "esc\x1b", "del\x7f", "\u0085nel", "x\u0085", // control characters
	"\u2028", "a\u2028b", "a\u2029b", "a \u2028b", "a\u2028 b", // line and paragraph separators (printable breaks)
	"\ufeff", "\ufeffbom first", "bom \ufeff inside", "\ufffe", "\uffff", "\ue000", "\ufffd", "\ud7ff", // byte order marks, specials
	"\r", "a\rb", "a\r\nb", "a\r\n", // carriage returns
	"a\nb", "a\nb\n", "a\nb\n\n", "a\n\n", "\n", "\n\n", "\na", " a\nb", "a\n b", "a\n\n b", "a \nb", "a\nb ", "a\n\tb", // literal blocks and their hints
	"line1\nline2\n\nline4\n", "#!/bin/sh\necho hi\n", "  indented\n  more\n", "x\n---\ny\n", "é\nü\n", "a\n\u2028b\n", "a\n\u0085\n", // literal
	"a\nb\x01", "a\n😀", // literal not allowed (special characters)
	strings.Repeat("word ", 40) + "end",                                                                  // folds at 80
	strings.Repeat("x", 100) + " " + strings.Repeat("y", 100),                                            // one space past column 80
	strings.Repeat("ab ", 30) + " double  spaces   near" + strings.Repeat(" cd", 20),                     // runs of spaces are never folded
	" " + strings.Repeat("lead space ", 12),                                                              // single-quoted folding
	strings.Repeat("tab\t ", 30),                                                                         // double-quoted folding
	strings.Repeat("q\"uote ", 20) + " " + strings.Repeat("  z", 20),                                     // double-quoted folding with escaped \
	strings.Repeat("é ", 50),                                                                             // columns count characters, not bytes
	strings.Repeat("中文 ", 40),                                                                            // wide characters count one column each
	strings.Repeat("it's ", 25) + " ",                                                                    // single-quoted, trailing space
	"Description of a field: " + strings.Repeat("it holds a value that the controller reads, ", 6),       // a realistic description
	strings.Repeat("a", 79) + " b c", strings.Repeat("a", 80) + " b c", strings.Repeat("a", 81) + " b c", // around the boundary
	strings.Repeat("long line ", 12) + "\nsecond line\n", // literal lines are never folded
	strings.Repeat("x", 129), strings.Repeat("x", 128),   // long keys become complex keys
}

// yamlPlacements puts s where scalars are written differently: as a root,
// value at several depths and columns, list item, nested list item, key,
// complex key with each kind of value.
func yamlPlacements(s string) []interface{} {
	type m = map[string]interface{}
	type l = []interface{}
	out := []interface{}{
		s,
		m{"k": s},
		m{"a": m{"b": m{"c": m{"d": s}}}},
		m{"list": l{s, s}},
		l{l{s}, l{l{s}}},
		l{m{"x": s, "y": l{s}}},
		m{s: "v"},
		m{s: m{"x": s}},
		m{s: l{"x", l{"y"}}},
		m{s: m{}},
		m{s: l{}},
		m{"a": m{s: l{s}}, s: nil},
		l{m{s: s}},
	}
	for _, n := range []int{1, 10, 40, 70, 77, 78, 79, 80, 81, 100} {
		key := strings.Repeat("k", n)
		out = append(out, m{key: s}, l{m{key: m{key[:n/2+1]: s}}})
	}
	return out
}

func TestYAMLWriterTrickyScalars(t *testing.T) {
	for i, s := range trickyScalars {
		for j, v := range yamlPlacements(s) {
			// All valid UTF-8, at most two keys a mapping: the writer
			// takes every one.
			if name := fmt.Sprintf("scalar %d %q placement %d", i, s, j); !checkLikeYAMLv2(t, name, v) {
				t.Errorf("%s: the writer refused it", name)
			}
		}
	}
}

// TestYAMLWriterShapes: collections, numbers and key orders.
func TestYAMLWriterShapes(t *testing.T) {
	type m = map[string]interface{}
	type l = []interface{}
	cases := map[string]interface{}{
		"empty root map":       m{},                                                          // {} at the root
		"empty root list":      l{},                                                          // [] at the root
		"nil root":             nil,                                                          // null
		"nil map and list":     m{"a": map[string]interface{}(nil), "b": []interface{}(nil)}, // nil collections are empty
		"nested empties":       m{"a": m{"b": m{}}, "c": l{l{}, m{}}, "d": l{m{"e": l{}}}},   // flow {} and [] in block context
		"list of lists":        l{l{1, 2}, l{l{3}}, l{}, l{m{}}},                             // - - 1
		"list of maps":         m{"items": l{m{"a": 1, "b": 2}, m{"c": m{"d": 3}}}},          // - a: 1 / b: 2
		"list in list in map":  m{"k": l{l{"a", "b"}, l{"c"}}},                               // not indented under the key
		"map in complex key":   m{strings.Repeat("k", 130): m{"a": 1, "b": l{2}}},            // ": a: 1" compact after a complex key
		"list in complex key":  m{strings.Repeat("k", 130): l{1, l{2}}},                      // ": - 1" indented after a complex key
		"multiline key":        m{"a\nb": "v", "c\nd\n": m{"e": 1}},                          // literal complex keys
		"ints":                 l{int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), 42, int32(-7), int8(3), uint64(math.MaxUint64), uint8(255)},
		"floats":               l{1.0, 0.5, -0.0, 1e21, 1e20, 1.5e-7, 123456789.123, math.NaN(), math.Inf(1), math.Inf(-1), float32(0.1), float32(1e10), 100.0},
		"bools":                l{true, false},
		"numeric-looking keys": m{"1": 1, "2": 2, "10": 10, "01": 1, "a1": 1, "a10": 1, "a2": 1, "a01": 1, "a-1": 1, "a_1": 1, "a.1": 1, "A1": 1, "true": 1, "null": 1, "": 1}, // digits compare by value
		"key order":            m{"b": 1, "B": 1, "a": 1, "_a": 1, "-a": 1, ".a": 1, "/a": 1, "é": 1, "z": 1, "Z": 1, "ab": 1, "a b": 1, "a-b": 1, "a/b": 1, "中": 1, "~": 1},   // letters after non-letters
		"kubernetes keys":      m{"app.kubernetes.io/name": 1, "app.kubernetes.io/component": 1, "kubevirt.io": 1, "kubevirt.io/install-strategy-version": 1, "x-kubernetes-preserve-unknown-fields": true, "apiVersion": "v1", "kind": "K", "metadata": m{"name": "n"}},
		"digit runs":           m{"x9": 1, "x10": 1, "x009": 1, "x09": 1, "x0": 1, "x00": 1, "x1": 1, "v1beta1": 1, "v1alpha2": 1, "v1": 1, "v2": 1, "ipv4": 1, "ipv6": 1, "e1000": 1, "e1000e": 1}, // numeric comparison of digit runs
		"deep":                 m{"a": m{"b": m{"c": m{"d": m{"e": m{"f": m{"g": l{m{"h": l{"i"}}}}}}}}}},
	}
	for name, v := range cases {
		checkLikeYAMLv2(t, name, v)
	}
}

// yamlPieces are the fragments randomYAMLString builds strings from: the
// characters and words yaml.v2's rules turn on.
var yamlPieces = []string{
	"a", "b", "Z", "word", "x-y", "1", "0", "09", "1.5", "e3", "0x", "true", "no", "null", "~",
	" ", " ", " ", "  ", "\n", "\n", "\r", "\t", "'", "\"", "\\", "#", ":", ": ", "-", "- ", "?", ",", "[", "{", "&", "*", "!", "|", ">", "%", "@", "`",
	"é", "中", "😀", "\u00a0", "\u0085", "\u2028", "\u2029", "\ufeff", "\x00", "\x7f", "\x1b", "---", "...",
	strings.Repeat("long ", 9), strings.Repeat("x", 30),
}

func randomYAMLString(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(12); n > 0; n-- {
		b.WriteString(yamlPieces[r.IntN(len(yamlPieces))])
	}
	return b.String()
}

func randomYAMLValue(r *rand.Rand, depth int) interface{} {
	switch k := r.IntN(10); {
	case depth > 0 && k < 4:
		m := map[string]interface{}{}
		for n := r.IntN(6); n > 0; n-- {
			m[randomYAMLString(r)] = randomYAMLValue(r, depth-1)
		}
		return m
	case depth > 0 && k < 6:
		l := []interface{}{}
		for n := r.IntN(4); n > 0; n-- {
			l = append(l, randomYAMLValue(r, depth-1))
		}
		return l
	case k == 6:
		return []interface{}{nil, true, r.Int64() >> r.IntN(64), r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))}[r.IntN(4)]
	}
	return randomYAMLString(r)
}

// TestYAMLWriterRandomDocuments: random documents of the characters and
// shapes that matter, at random depths, as yaml.v2 writes them.
func TestYAMLWriterRandomDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	took := 0
	const n = 20000
	for i := 0; i < n; i++ {
		v := map[string]interface{}{randomYAMLString(r): randomYAMLValue(r, r.IntN(6)), "k": randomYAMLValue(r, r.IntN(6))}
		if checkLikeYAMLv2(t, fmt.Sprintf("document %d", i), v) {
			took++
		}
		if t.Failed() {
			t.Fatalf("document %d: %#v", i, v)
		}
	}
	t.Logf("the writer took %d of %d documents (the others have keys yaml.v2 does not order totally)", took, n)
}

// TestYAMLWriterNumberLikeStrings: strings near integers, floats, base-60
// numbers and timestamps are quoted exactly when yaml.v2 quotes them.
func TestYAMLWriterNumberLikeStrings(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "0123456789012345678901234567890123456789-:.+_ TtZxXbBoOeEacf,"
	templates := []string{"2001-12-14", "2001-12-14T21:59:43.10Z", "2001-12-14 21:59:43,5", "2001-12-14t21:59:43-05:00", "1:20:30.5", "0x1F_ab", "-0b101", "+1_000.5e-3", ".5", "9223372036854775808"}
	for i := 0; i < 50000; i++ {
		var b []byte
		if i%2 == 0 {
			for n := 1 + r.IntN(10); n > 0; n-- {
				b = append(b, alphabet[r.IntN(len(alphabet))])
			}
		} else {
			b = []byte(templates[r.IntN(len(templates))])
			for n := r.IntN(3); n > 0; n-- { // change, drop or add a character
				j := r.IntN(len(b) + 1)
				c := alphabet[r.IntN(len(alphabet))]
				switch op := r.IntN(3); {
				case op == 0 && j < len(b):
					b[j] = c
				case op == 1 && j < len(b):
					b = append(b[:j], b[j+1:]...)
				default:
					b = append(b[:j], append([]byte{c}, b[j:]...)...)
				}
			}
		}
		if !checkLikeYAMLv2(t, fmt.Sprintf("%q", b), map[string]interface{}{"k": string(b)}) {
			t.Errorf("%q: the writer refused it", b)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// TestYAMLWriterFallsBack: values the writer does not reproduce exactly
// are refused before anything is written, and yaml.v2 writes them instead.
func TestYAMLWriterFallsBack(t *testing.T) {
	type named string
	cases := map[string]interface{}{
		"invalid UTF-8 value": map[string]interface{}{"a": "\xff\xfe"},          // yaml.v2 writes !!binary
		"invalid UTF-8 key":   map[string]interface{}{"\xffk": "v"},             // likewise for a key
		"other type":          map[string]interface{}{"a": named("x")},          // a named string type
		"typed map":           map[string]interface{}{"a": map[string]string{}}, // only map[string]interface{} is written
		"byte slice":          map[string]interface{}{"a": []byte("x")},         // not a type the writer takes (yaml.v2 writes a list of numbers)
		"nested deep":         map[string]interface{}{"a": []interface{}{map[string]interface{}{"b": "\xc0"}}},
		"key cycle":           map[string]interface{}{"v10": 1, "v1alpha1": 2, "v2": 3}, // v10 < v1alpha1 < v2 < v10 in yaml.v2's comparison
		"key cycle nested":    map[string]interface{}{"a": map[string]interface{}{"x10": 1, "x1a": 2, "x9": 3}},
	}
	for name, v := range cases {
		if checkLikeYAMLv2(t, name, v) {
			t.Errorf("%s: the writer took it; it should fall back to yaml.v2", name)
		}
	}
}

// TestYAMLKeyOrderRefusesCycles: keys yaml.v2's comparison does not order
// totally (the digit runs with leading zeros) are refused.
func TestYAMLKeyOrderRefusesCycles(t *testing.T) {
	// Find keys over a small alphabet on which the comparison is not a
	// strict total order.
	alphabet := []string{"0", "1", "a", "-"}
	var keys []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			keys = append(keys, prefix+c)
			grow(prefix+c, n-1)
		}
	}
	grow("", 3)
	y := getYAMLWriter()
	defer putYAMLWriter(y)
	found := 0
	for i := 0; i < len(keys) && found < 20; i++ {
		for j := i + 1; j < len(keys) && found < 20; j++ {
			for k := j + 1; k < len(keys) && found < 20; k++ {
				m := map[string]interface{}{keys[i]: 1, keys[j]: 2, keys[k]: 3}
				if y.keysTotallyOrdered(m) {
					continue
				}
				found++
				if checkLikeYAMLv2(t, fmt.Sprintf("keys %q", []string{keys[i], keys[j], keys[k]}), m) {
					t.Errorf("keys %q: not totally ordered, yet written", []string{keys[i], keys[j], keys[k]})
				}
			}
		}
	}
	t.Logf("%d key triples yaml.v2 does not order totally, refused", found)
}

// FuzzYAMLWriterMatchesYAMLv2: documents built from fuzzed strings, as
// keys, values, list items and nested, at a fuzzed depth, are written as
// yaml.v2 writes them; what the writer refuses is written by yaml.v2.
func FuzzYAMLWriterMatchesYAMLv2(f *testing.F) {
	for _, s := range trickyScalars {
		f.Add(s, "v", "x1", int64(1), 0.5, uint8(0))
	}
	f.Add("a", "b\nc", " d", int64(-5), 1e21, uint8(7))
	f.Add(strings.Repeat("word ", 30), "a1", "a01", int64(0), math.Inf(1), uint8(200))
	f.Fuzz(func(t *testing.T, a, b, c string, n int64, x float64, shape uint8) {
		type m = map[string]interface{}
		type l = []interface{}
		doc := m{
			a:           b,
			"k":         c,
			b:           l{a, c, n, x, nil, true, l{b}, m{c: a}},
			c + "1":     m{a: l{}, b: m{}, "n": n, a + c: b + a},
			"0" + a:     l{m{b: c, c: l{a}}},
			c:           m{b: m{a: c}},
			a + " " + b: c + "\n" + a,
		}
		var v interface{} = doc
		for i := 0; i < int(shape%8); i++ {
			if shape&0x80 != 0 {
				v = l{v, a}
			} else {
				v = m{strings.Repeat("k", int(shape>>3)%16*6): v, b: x}
			}
		}
		checkLikeYAMLv2(t, "fuzzed document", v)
	})
}

// BenchmarkYAMLWriterObjects writes each object of the v1.5.3 strategy
// (as BenchmarkEncodeConfigMap), without gzip: the writer's own cost.
func BenchmarkYAMLWriterObjects(b *testing.B) {
	s := generateFor(b, withFeatureGates("VMExport"))
	docs := make([]map[string]interface{}, len(s.Objects))
	for i, o := range s.Objects {
		m, err := objectDocument(o)
		if err != nil {
			b.Fatal(err)
		}
		docs[i] = m
	}
	b.Run("writer", func(b *testing.B) {
		y := getYAMLWriter()
		defer putYAMLWriter(y)
		var buf bytes.Buffer
		for i := 0; i < b.N; i++ {
			for _, d := range docs {
				buf.Reset()
				if err := y.writeDocument(&buf, d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("yaml.v2", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for _, d := range docs {
				if _, err := yamlv2.Marshal(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
