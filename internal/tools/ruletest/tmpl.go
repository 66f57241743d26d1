package ruletest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/template/parse"
	"time"
	"unicode"

	"github.com/prometheus/common/helpers/templates"
	"github.com/prometheus/common/model"
)

// This file expands alert label and annotation templates the way
// Prometheus's template package does (text/template syntax, its function
// set, missingkey=zero), with an evaluator of its own over the parse tree
// of text/template/parse. Executing templates with text/template makes the
// linker keep every exported method of every type in the binary (it looks
// methods up by name at run time), which costs the virtop binary some 25 MB;
// this evaluator calls no method by reflection.
//
// Values are strings, float64 and int numbers, bools, nil, label maps
// (map[string]string), maps made by args, query results and their samples,
// and the time.Time and time.Duration of toTime and toDuration. Field access
// works on the template data, samples and maps; methods cannot be called.
// html, js, call, slice and tmpl are not provided, so a template using them
// fails to parse, as does one calling an unknown function.

// tmplData is the data of an alert template (Prometheus's
// template.AlertTemplateData).
type tmplData struct {
	Labels         map[string]string
	ExternalLabels map[string]string
	ExternalURL    string
	Value          any
}

// tmplSample is a query result element in a template.
type tmplSample struct {
	Labels map[string]string
	Value  any
}

// tmplFuncNames are the functions a template may call.
var tmplFuncNames = func() map[string]any {
	m := map[string]any{}
	for _, n := range strings.Fields(`and or not len index print printf println eq ne lt le gt ge urlquery
		query first label value strvalue args reReplaceAll safeHtml match title toUpper toLower graphLink tableLink
		sortByLabel stripPort stripDomain humanize humanize1024 humanizeDuration humanizePercentage humanizeTimestamp
		toTime toDuration now pathPrefix externalURL parseDuration urlQueryEscape`) {
		m[n] = true // parse only checks that the name maps to something
	}
	return m
}()

// expander expands one template.
type expander struct {
	ctx   context.Context
	ts    time.Time
	query queryFunc
	trees map[string]*parse.Tree
	out   strings.Builder
	vars  []tmplVar
}

type tmplVar struct {
	name  string
	value any
}

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// expandTemplate expands text with data, as an alert's labels and
// annotations are expanded at evaluation time ts.
func expandTemplate(ctx context.Context, name, text string, data tmplData, ts time.Time, query queryFunc) (res string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic expanding template %v: %v", name, r)
		}
	}()
	trees, err := parse.Parse(name, text, "", "", tmplFuncNames)
	if err != nil {
		return "", fmt.Errorf("error parsing template %v: %w", name, err)
	}
	e := &expander{ctx: ctx, ts: ts, query: query, trees: trees}
	t := trees[name]
	if t == nil || t.Root == nil {
		return "", nil
	}
	e.vars = []tmplVar{{"$", data}}
	if err := e.walk(data, t.Root); err != nil {
		return "", fmt.Errorf("error executing template %v: %w", name, err)
	}
	return e.out.String(), nil
}

func (e *expander) walk(dot any, n parse.Node) error {
	switch n := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil { // an absent else
			return nil
		}
		for _, c := range n.Nodes {
			if err := e.walk(dot, c); err != nil {
				return err
			}
		}
	case *parse.TextNode:
		e.out.Write(n.Text)
	case *parse.CommentNode:
	case *parse.ActionNode:
		v, err := e.pipe(dot, n.Pipe)
		if err != nil {
			return err
		}
		if len(n.Pipe.Decl) == 0 {
			e.out.WriteString(printValue(v))
		}
	case *parse.IfNode:
		return e.branch(dot, &n.BranchNode, false)
	case *parse.WithNode:
		return e.branch(dot, &n.BranchNode, true)
	case *parse.RangeNode:
		return e.rangeNode(dot, n)
	case *parse.BreakNode:
		return errBreak
	case *parse.ContinueNode:
		return errContinue
	case *parse.TemplateNode:
		t := e.trees[n.Name]
		if t == nil {
			return fmt.Errorf("no such template %q", n.Name)
		}
		var v any
		if n.Pipe != nil {
			var err error
			if v, err = e.pipe(dot, n.Pipe); err != nil {
				return err
			}
		}
		saved := e.vars
		e.vars = []tmplVar{{"$", v}}
		err := e.walk(v, t.Root)
		e.vars = saved
		return err
	default:
		return fmt.Errorf("unsupported template node %s", n)
	}
	return nil
}

func (e *expander) branch(dot any, b *parse.BranchNode, with bool) error {
	mark := len(e.vars)
	defer func() { e.vars = e.vars[:mark] }()
	v, err := e.pipe(dot, b.Pipe)
	if err != nil {
		return err
	}
	if truth(v) {
		if with {
			dot = v
		}
		return e.walk(dot, b.List)
	}
	return e.walk(dot, b.ElseList)
}

func (e *expander) rangeNode(dot any, n *parse.RangeNode) error {
	mark := len(e.vars)
	defer func() { e.vars = e.vars[:mark] }()
	v, err := e.pipe(dot, n.Pipe)
	if err != nil {
		return err
	}
	type kv struct{ k, v any }
	var items []kv
	switch v := v.(type) {
	case nil:
	case []*tmplSample:
		for i, s := range v {
			items = append(items, kv{i, s})
		}
	case map[string]string:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			items = append(items, kv{k, v[k]})
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			items = append(items, kv{k, v[k]})
		}
	case int:
		for i := 0; i < v; i++ {
			items = append(items, kv{i, i})
		}
	default:
		return fmt.Errorf("range can't iterate over %v", v)
	}
	if len(items) == 0 {
		return e.walk(dot, n.ElseList)
	}
	// The range's own variables are the last len(Decl) ones; each
	// iteration sets them and drops the variables its body declared.
	top := len(e.vars)
	for _, it := range items {
		e.vars = e.vars[:top]
		switch len(n.Pipe.Decl) {
		case 1:
			e.vars[top-1].value = it.v
		case 2:
			e.vars[top-2].value, e.vars[top-1].value = it.k, it.v
		}
		err := e.walk(it.v, n.List)
		if errors.Is(err, errBreak) {
			break
		}
		if err != nil && !errors.Is(err, errContinue) {
			return err
		}
	}
	return nil
}

// pipe evaluates a pipeline, declaring or assigning its variables.
func (e *expander) pipe(dot any, p *parse.PipeNode) (any, error) {
	if p == nil {
		return nil, nil
	}
	var v any
	for i, c := range p.Cmds {
		var final []any
		if i > 0 {
			final = []any{v}
		}
		var err error
		if v, err = e.command(dot, c, final); err != nil {
			return nil, err
		}
	}
	for _, d := range p.Decl {
		if p.IsAssign {
			if err := e.setVar(d.Ident[0], v); err != nil {
				return nil, err
			}
		} else {
			e.vars = append(e.vars, tmplVar{d.Ident[0], v})
		}
	}
	return v, nil
}

func (e *expander) setVar(name string, v any) error {
	for i := len(e.vars) - 1; i >= 0; i-- {
		if e.vars[i].name == name {
			e.vars[i].value = v
			return nil
		}
	}
	return fmt.Errorf("undefined variable: %s", name)
}

func (e *expander) varValue(name string) (any, error) {
	for i := len(e.vars) - 1; i >= 0; i-- {
		if e.vars[i].name == name {
			return e.vars[i].value, nil
		}
	}
	return nil, fmt.Errorf("undefined variable: %s", name)
}

// command evaluates one command of a pipeline; final, if any, is the
// previous command's value, passed as the last argument.
func (e *expander) command(dot any, c *parse.CommandNode, final []any) (any, error) {
	first := c.Args[0]
	if id, ok := first.(*parse.IdentifierNode); ok {
		return e.call(dot, id.Ident, c.Args[1:], final)
	}
	if len(c.Args) > 1 || len(final) > 0 {
		return nil, fmt.Errorf("can't give argument to non-function %s", first)
	}
	return e.arg(dot, first)
}

// arg evaluates an operand.
func (e *expander) arg(dot any, n parse.Node) (any, error) {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot, nil
	case *parse.NilNode:
		return nil, nil
	case *parse.BoolNode:
		return n.True, nil
	case *parse.StringNode:
		return n.Text, nil
	case *parse.NumberNode:
		switch {
		case n.IsFloat && !isHexInt(n.Text) && strings.ContainsAny(n.Text, ".eEpP"):
			return n.Float64, nil
		case n.IsInt:
			return int(n.Int64), nil
		case n.IsFloat:
			return n.Float64, nil
		}
		return nil, fmt.Errorf("unsupported number %s", n.Text)
	case *parse.FieldNode:
		return fieldChain(dot, n.Ident)
	case *parse.VariableNode:
		v, err := e.varValue(n.Ident[0])
		if err != nil {
			return nil, err
		}
		return fieldChain(v, n.Ident[1:])
	case *parse.ChainNode:
		v, err := e.arg(dot, n.Node)
		if err != nil {
			return nil, err
		}
		return fieldChain(v, n.Field)
	case *parse.PipeNode:
		mark := len(e.vars)
		defer func() { e.vars = e.vars[:mark] }()
		return e.pipe(dot, n)
	case *parse.IdentifierNode:
		return e.call(dot, n.Ident, nil, nil)
	}
	return nil, fmt.Errorf("can't evaluate %s", n)
}

func isHexInt(s string) bool {
	return len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && !strings.ContainsAny(s, "pP")
}

// fieldChain looks up .a.b.c in v.
func fieldChain(v any, fields []string) (any, error) {
	for _, f := range fields {
		switch x := v.(type) {
		case tmplData:
			switch f {
			case "Labels":
				v = x.Labels
			case "ExternalLabels":
				v = x.ExternalLabels
			case "ExternalURL":
				v = x.ExternalURL
			case "Value":
				v = x.Value
			default:
				return nil, fmt.Errorf("can't evaluate field %s in the alert data", f)
			}
		case *tmplSample:
			switch f {
			case "Labels":
				v = x.Labels
			case "Value":
				v = x.Value
			default:
				return nil, fmt.Errorf("can't evaluate field %s in a sample", f)
			}
		case map[string]string:
			v = x[f] // missingkey=zero: a missing label is ""
		case map[string]any:
			v = x[f]
		case nil:
			return nil, fmt.Errorf("nil pointer evaluating .%s", f)
		default:
			return nil, fmt.Errorf("can't evaluate field %s in type %T", f, v)
		}
	}
	return v, nil
}

// printValue prints a value as text/template does.
func printValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "<no value>"
	case string:
		return v
	case *tmplSample:
		return fmt.Sprint(*v)
	}
	return fmt.Sprint(v)
}

// truth is text/template's truth: zero values are false.
func truth(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case int:
		return v != 0
	case float64:
		return v != 0
	case map[string]string:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	case []*tmplSample:
		return len(v) > 0
	case *tmplSample:
		return v != nil
	case time.Duration:
		return v != 0
	case time.Time:
		return true
	}
	return true
}

// call calls a template function.
func (e *expander) call(dot any, name string, argNodes []parse.Node, final []any) (any, error) {
	// and and or evaluate their arguments only as far as needed.
	if name == "and" || name == "or" {
		nodes := len(argNodes)
		if nodes+len(final) == 0 {
			return nil, fmt.Errorf("wrong number of args for %s: want at least 1 got 0", name)
		}
		var v any
		for i := 0; i < nodes+len(final); i++ {
			if i < nodes {
				var err error
				if v, err = e.arg(dot, argNodes[i]); err != nil {
					return nil, err
				}
			} else {
				v = final[0]
			}
			if truth(v) != (name == "and") {
				return v, nil
			}
		}
		return v, nil
	}
	args := make([]any, 0, len(argNodes)+len(final))
	for _, n := range argNodes {
		v, err := e.arg(dot, n)
		if err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	args = append(args, final...)
	v, err := e.callFunc(name, args)
	if err != nil {
		return nil, fmt.Errorf("error calling %s: %w", name, err)
	}
	return v, nil
}

func wantArgs(args []any, n int) error {
	if len(args) != n {
		return fmt.Errorf("wrong number of args: want %d got %d", n, len(args))
	}
	return nil
}

func stringArg(args []any, i int) (string, error) {
	s, ok := args[i].(string)
	if !ok {
		return "", fmt.Errorf("wrong type for value; expected string; got %T", args[i])
	}
	return s, nil
}

func sampleArg(args []any, i int) (*tmplSample, error) {
	s, ok := args[i].(*tmplSample)
	if !ok || s == nil {
		return nil, fmt.Errorf("wrong type for value; expected a sample; got %T", args[i])
	}
	return s, nil
}

// stringArgs checks for n string arguments.
func stringArgs(args []any, n int) ([]string, error) {
	if err := wantArgs(args, n); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		s, err := stringArg(args, i)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func (e *expander) callFunc(name string, args []any) (any, error) {
	switch name {
	case "not":
		if err := wantArgs(args, 1); err != nil {
			return nil, err
		}
		return !truth(args[0]), nil
	case "len":
		if err := wantArgs(args, 1); err != nil {
			return nil, err
		}
		switch v := args[0].(type) {
		case string:
			return len(v), nil
		case map[string]string:
			return len(v), nil
		case map[string]any:
			return len(v), nil
		case []*tmplSample:
			return len(v), nil
		}
		return nil, fmt.Errorf("len of type %T", args[0])
	case "index":
		if len(args) == 0 {
			return nil, errors.New("wrong number of args: want at least 1 got 0")
		}
		v := args[0]
		for _, k := range args[1:] {
			switch x := v.(type) {
			case map[string]string:
				s, ok := k.(string)
				if !ok {
					return nil, fmt.Errorf("index of map with %T", k)
				}
				v = x[s]
			case map[string]any:
				s, ok := k.(string)
				if !ok {
					return nil, fmt.Errorf("index of map with %T", k)
				}
				v = x[s]
			case []*tmplSample:
				i, ok := k.(int)
				if !ok || i < 0 || i >= len(x) {
					return nil, fmt.Errorf("index out of range: %v", k)
				}
				v = x[i]
			default:
				return nil, fmt.Errorf("can't index item of type %T", v)
			}
		}
		return v, nil
	case "print":
		return fmt.Sprint(args...), nil
	case "println":
		return fmt.Sprintln(args...), nil
	case "printf":
		if len(args) == 0 {
			return nil, errors.New("wrong number of args: want at least 1 got 0")
		}
		f, err := stringArg(args, 0)
		if err != nil {
			return nil, err
		}
		return fmt.Sprintf(f, args[1:]...), nil
	case "eq", "ne", "lt", "le", "gt", "ge":
		return compare(name, args)
	case "urlquery":
		return url.QueryEscape(fmt.Sprint(args...)), nil
	case "query":
		a, err := stringArgs(args, 1)
		if err != nil {
			return nil, err
		}
		vec, err := e.query(e.ctx, a[0], e.ts)
		if err != nil {
			return nil, err
		}
		res := make([]*tmplSample, len(vec))
		for i, s := range vec {
			res[i] = &tmplSample{Labels: s.Metric.Map(), Value: s.F}
			if s.H != nil {
				res[i].Value = s.H
			}
		}
		return res, nil
	case "first":
		if err := wantArgs(args, 1); err != nil {
			return nil, err
		}
		v, ok := args[0].([]*tmplSample)
		if !ok && args[0] != nil {
			return nil, fmt.Errorf("wrong type for value; expected a query result; got %T", args[0])
		}
		if len(v) == 0 {
			return nil, errors.New("first() called on vector with no elements")
		}
		return v[0], nil
	case "label":
		if err := wantArgs(args, 2); err != nil {
			return nil, err
		}
		l, err := stringArg(args, 0)
		if err != nil {
			return nil, err
		}
		s, err := sampleArg(args, 1)
		if err != nil {
			return nil, err
		}
		return s.Labels[l], nil
	case "value", "strvalue":
		if err := wantArgs(args, 1); err != nil {
			return nil, err
		}
		s, err := sampleArg(args, 0)
		if err != nil {
			return nil, err
		}
		if name == "strvalue" {
			return s.Labels["__value__"], nil
		}
		return s.Value, nil
	case "args":
		m := map[string]any{}
		for i, a := range args {
			m[fmt.Sprintf("arg%d", i)] = a
		}
		return m, nil
	case "reReplaceAll":
		a, err := stringArgs(args, 3)
		if err != nil {
			return nil, err
		}
		return regexp.MustCompile(a[0]).ReplaceAllString(a[2], a[1]), nil
	case "match":
		a, err := stringArgs(args, 2)
		if err != nil {
			return nil, err
		}
		return regexp.MatchString(a[0], a[1])
	case "safeHtml", "title", "toUpper", "toLower", "graphLink", "tableLink", "stripPort", "stripDomain", "urlQueryEscape":
		a, err := stringArgs(args, 1)
		if err != nil {
			return nil, err
		}
		return stringFunc(name, a[0]), nil
	case "sortByLabel":
		if err := wantArgs(args, 2); err != nil {
			return nil, err
		}
		l, err := stringArg(args, 0)
		if err != nil {
			return nil, err
		}
		v, ok := args[1].([]*tmplSample)
		if !ok && args[1] != nil {
			return nil, fmt.Errorf("wrong type for value; expected a query result; got %T", args[1])
		}
		sort.SliceStable(v, func(i, j int) bool { return v[i].Labels[l] < v[j].Labels[l] })
		return v, nil
	case "humanize", "humanize1024", "humanizePercentage", "toTime", "toDuration":
		if err := wantArgs(args, 1); err != nil {
			return nil, err
		}
		f, err := templates.ConvertToFloat(args[0])
		if err != nil {
			return nil, err
		}
		return numberFunc(name, f)
	case "humanizeDuration", "humanizeTimestamp":
		if err := wantArgs(args, 1); err != nil {
			return nil, err
		}
		if name == "humanizeDuration" {
			return templates.HumanizeDuration(args[0])
		}
		return templates.HumanizeTimestamp(args[0])
	case "now":
		return float64(e.ts.UnixMilli()) / 1000.0, nil
	case "pathPrefix", "externalURL":
		// Prometheus's rule unit tests give templates no external URL
		// object: these fail there too.
		return nil, errors.New("no external URL")
	case "parseDuration":
		a, err := stringArgs(args, 1)
		if err != nil {
			return nil, err
		}
		d, err := model.ParseDurationAllowNegative(a[0])
		if err != nil {
			return nil, err
		}
		return float64(time.Duration(d)) / float64(time.Second), nil
	}
	return nil, fmt.Errorf("function %q not defined", name)
}

func stringFunc(name, s string) string {
	switch name {
	case "title":
		return title(s)
	case "toUpper":
		return strings.ToUpper(s)
	case "toLower":
		return strings.ToLower(s)
	case "graphLink":
		return "/graph?g0.expr=" + url.QueryEscape(s) + "&g0.tab=0"
	case "tableLink":
		return "/graph?g0.expr=" + url.QueryEscape(s) + "&g0.tab=1"
	case "stripPort":
		host, _, err := net.SplitHostPort(s)
		if err != nil {
			return s
		}
		return host
	case "stripDomain":
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			host = s
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return s
		}
		host = strings.Split(host, ".")[0]
		if port != "" {
			return net.JoinHostPort(host, port)
		}
		return host
	case "urlQueryEscape":
		return url.QueryEscape(s)
	}
	return s // safeHtml
}

// title upper-cases the first letter of each word and leaves the others
// (Prometheus uses x/text's title casing without lowering, which also
// knows language-specific word breaks).
func title(s string) string {
	var b strings.Builder
	inWord := false
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' {
			if !inWord {
				r = unicode.ToTitle(r)
			}
			inWord = true
		} else {
			inWord = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

func numberFunc(name string, v float64) (any, error) {
	switch name {
	case "humanize":
		if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprintf("%.4g", v), nil
		}
		prefix := ""
		if math.Abs(v) >= 1 {
			for _, p := range []string{"k", "M", "G", "T", "P", "E", "Z", "Y"} {
				if math.Abs(v) < 1000 {
					break
				}
				prefix = p
				v /= 1000
			}
			return fmt.Sprintf("%.4g%s", v, prefix), nil
		}
		for _, p := range []string{"m", "u", "n", "p", "f", "a", "z", "y"} {
			if math.Abs(v) >= 1 {
				break
			}
			prefix = p
			v *= 1000
		}
		return fmt.Sprintf("%.4g%s", v, prefix), nil
	case "humanize1024":
		if math.Abs(v) <= 1 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprintf("%.4g", v), nil
		}
		prefix := ""
		for _, p := range []string{"ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"} {
			if math.Abs(v) < 1024 {
				break
			}
			prefix = p
			v /= 1024
		}
		return fmt.Sprintf("%.4g%s", v, prefix), nil
	case "humanizePercentage":
		return fmt.Sprintf("%.4g%%", v*100), nil
	case "toTime":
		t, err := templates.FloatToTime(v)
		if err != nil {
			return nil, err
		}
		return *t, nil
	}
	return time.Duration(v * float64(time.Second)), nil // toDuration
}

// compare implements eq, ne, lt, le, gt and ge for the basic kinds, as
// text/template does: eq is true if the first argument equals any other.
func compare(name string, args []any) (any, error) {
	if len(args) < 2 || (name != "eq" && len(args) != 2) {
		return nil, fmt.Errorf("wrong number of args for %s", name)
	}
	if name == "eq" {
		for _, b := range args[1:] {
			c, err := cmp(args[0], b, true)
			if err != nil {
				return nil, err
			}
			if c == 0 {
				return true, nil
			}
		}
		return false, nil
	}
	c, err := cmp(args[0], args[1], name == "ne")
	if err != nil {
		return nil, err
	}
	switch name {
	case "ne":
		return c != 0, nil
	case "lt":
		return c < 0, nil
	case "le":
		return c <= 0, nil
	case "gt":
		return c > 0, nil
	}
	return c >= 0, nil
}

// cmp orders two values of the same basic kind; equality only may also
// compare bools and nil. NaN compares unequal to everything.
func cmp(a, b any, equality bool) (int, error) {
	switch x := a.(type) {
	case int:
		if y, ok := b.(int); ok {
			return cmpOrdered(x, y), nil
		}
	case float64:
		if y, ok := b.(float64); ok {
			if math.IsNaN(x) || math.IsNaN(y) {
				return 2, nil
			}
			return cmpOrdered(x, y), nil
		}
	case string:
		if y, ok := b.(string); ok {
			return cmpOrdered(x, y), nil
		}
	case bool:
		if y, ok := b.(bool); ok && equality {
			if x == y {
				return 0, nil
			}
			return 1, nil
		}
	case nil:
		if equality && b == nil {
			return 0, nil
		}
	}
	if !equality {
		return 0, errors.New("invalid type for comparison")
	}
	return 0, errors.New("incompatible types for comparison")
}

func cmpOrdered[T int | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
