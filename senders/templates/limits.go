package templates

import (
	"errors"
	"fmt"
	"strings"
	"text/template/parse"
)

// Template content is untrusted input: whoever may write templates must not be able to make
// a render run for ever, use unbounded memory, or hold a worker. Every text of a template
// is therefore checked against a whitelist when it is compiled (this file), and every render
// runs against a budget of output bytes and steps (budget.go). docs/senders.md "Template
// limits" explains why the two together bound the work of every render.
const (
	// MaxContentBytes is the largest template content accepted, in bytes of JSON.
	MaxContentBytes = 64 << 10
	// MaxOutputBytes is the most one render of one channel may write (all its parts together).
	MaxOutputBytes = 64 << 10
	// MaxSteps is the most writes one render of one channel may make. Every node a template
	// runs writes at least once (see budget.go), so this bounds the nodes run.
	MaxSteps = 16 << 10
	// MaxNesting is how deep if, with and range may nest.
	MaxNesting = 10
	// MaxPipelineNodes is the most nodes (commands, arguments, parenthesised pipelines) one
	// action may have: it bounds the work of one step.
	MaxPipelineNodes = 64
	// MaxFormatWidth is the largest width or precision a printf verb may ask for.
	MaxFormatWidth = 64
)

// ErrNotAllowed: the template content parses but uses a construct herald does not run, or
// exceeds a limit (a range over a number, printf with a large width, define, too deep).
var ErrNotAllowed = errors.New("template not allowed")

// builtins are text/template's functions. They are known to the parser so that a
// forbidden one is refused by name rather than as a syntax error.
var builtins = map[string]any{
	"and": true, "or": true, "not": true, "eq": true, "ne": true, "lt": true, "le": true,
	"gt": true, "ge": true, "len": true, "index": true, "slice": true, "print": true,
	"println": true, "printf": true, "html": true, "js": true, "urlquery": true, "call": true,
}

// formatting functions cost as much as the text they produce. They may only produce the
// output of an action (so their work is paid for with output bytes), never feed a
// condition, a variable or another function's argument.
var formatting = map[string]bool{
	"print": true, "println": true, "printf": true, "html": true, "js": true, "urlquery": true,
}

// cheap functions cost O(1), or a comparison of two payload values.
var cheap = map[string]bool{
	"and": true, "or": true, "not": true, "eq": true, "ne": true, "lt": true, "le": true,
	"gt": true, "ge": true, "len": true, "index": true, "slice": true,
}

// parseText parses text as one template named field and checks it against the whitelist.
// Syntax errors wrap ErrInvalid, refused constructs ErrNotAllowed. nodes counts the parse
// tree's nodes, a measure of the memory the compiled template holds.
func parseText(field, text string) (tree *parse.Tree, nodes int, err error) {
	trees, err := parse.Parse(field, text, "", "", builtins)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
	}
	tree = trees[field]
	if len(trees) > 1 || (tree == nil && len(trees) > 0) {
		return nil, 0, fmt.Errorf("%w: %s: define and block are not allowed", ErrNotAllowed, field)
	}
	if tree == nil { // empty text
		tree = &parse.Tree{Name: field, Root: &parse.ListNode{NodeType: parse.NodeList}}
	}
	c := checker{bindings: map[string]bool{}}
	c.list(tree.Root, 0, true)
	for _, v := range c.rangedVars {
		if !c.bindings[v] {
			c.fail("range over %s: it may hold a number (range only over payload fields)", v)
		}
	}
	if c.err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrNotAllowed, field, c.err)
	}
	return tree, c.nodes, nil
}

// checker walks a parse tree and keeps the first reason to refuse it.
type checker struct {
	err   error
	nodes int
	// bindings: for each variable, whether every value it is ever given is a payload value
	// (a field, a range element); only such variables may be ranged over.
	bindings   map[string]bool
	rangedVars []string
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

// list checks a list of nodes at nesting depth; dotIsField says whether dot holds a payload
// value there (it does not inside {{with 5}}).
func (c *checker) list(l *parse.ListNode, depth int, dotIsField bool) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		c.nodes++
		switch n := n.(type) {
		case *parse.TextNode, *parse.CommentNode, *parse.BreakNode, *parse.ContinueNode:
		case *parse.ActionNode:
			c.pipe(n.Pipe, len(n.Pipe.Decl) == 0)
			c.bind(n.Pipe, dotIsField)
		case *parse.IfNode:
			c.pipe(n.Pipe, false)
			c.bind(n.Pipe, dotIsField) // {{if $x := ...}}
			c.branches(&n.BranchNode, depth, dotIsField, dotIsField)
		case *parse.WithNode:
			c.pipe(n.Pipe, false)
			c.bind(n.Pipe, dotIsField)
			c.branches(&n.BranchNode, depth, isFieldPipe(n.Pipe, dotIsField), dotIsField)
		case *parse.RangeNode:
			c.rangeOver(n.Pipe, dotIsField)
			c.branches(&n.BranchNode, depth, true, dotIsField)
		case *parse.TemplateNode:
			c.fail("{{template %q}} is not allowed", n.Name)
		default:
			c.fail("%s is not allowed", n)
		}
	}
}

func (c *checker) branches(b *parse.BranchNode, depth int, bodyDot, elseDot bool) {
	if depth+1 > MaxNesting {
		c.fail("if, with and range nest deeper than %d", MaxNesting)
		return
	}
	c.list(b.List, depth+1, bodyDot)
	c.list(b.ElseList, depth+1, elseDot)
}

// rangeOver allows a range only over a field of the payload: .items, $.items, $e.items,
// dot, or a variable only ever bound to such fields. Never a number, a function's result
// or a pipeline.
func (c *checker) rangeOver(p *parse.PipeNode, dotIsField bool) {
	c.pipe(p, false)
	if len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		c.fail("range over %s: range only over a payload field, not a pipeline", p)
		return
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		if !payloadField(a.Ident) {
			c.fail("range over %s: it may be a number (range only over payload fields)", a)
		}
	case *parse.DotNode:
		if !dotIsField {
			c.fail("range over dot where dot may be a number (range only over payload fields)")
		}
	case *parse.VariableNode:
		if !payloadField(a.Ident) {
			c.fail("range over %s: it may be a number (range only over payload fields)", a)
		} else if len(a.Ident) == 1 && a.Ident[0] != "$" {
			c.rangedVars = append(c.rangedVars, a.Ident[0])
		}
	case *parse.NumberNode:
		c.fail("range over the number %s is not allowed", a)
	default:
		c.fail("range over %s: range only over a payload field, not a function or a literal", a)
	}
	// {{range $i, $e := .x}}: $e is an element (a payload value), $i an index (a number).
	for i, v := range p.Decl {
		c.record(v.Ident[0], i == len(p.Decl)-1)
	}
}

// bind records the variables an action or with declares or assigns.
func (c *checker) bind(p *parse.PipeNode, dotIsField bool) {
	for _, v := range p.Decl {
		c.record(v.Ident[0], isFieldPipe(p, dotIsField))
	}
}

func (c *checker) record(name string, field bool) {
	prev, seen := c.bindings[name]
	c.bindings[name] = field && (prev || !seen)
}

// isFieldPipe reports whether p's value is a payload value: a lone field or dot.
func isFieldPipe(p *parse.PipeNode, dotIsField bool) bool {
	if len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return payloadField(a.Ident)
	case *parse.DotNode:
		return dotIsField
	case *parse.VariableNode:
		return payloadField(a.Ident) && (a.Ident[0] == "$" || len(a.Ident) > 1)
	}
	return false
}

// payloadField reports whether a field chain (.a.b, $x.a) yields a payload value: a field of
// a JSON object is one, unless its last name calls a method of json.Number, the type of
// payload numbers ({{.n.Int64}} is a number).
func payloadField(idents []string) bool {
	switch idents[len(idents)-1] {
	case "Int64", "Float64", "String":
		return false
	}
	return true
}

// pipe checks the functions of a pipeline and its size. output says whether the pipeline's
// value is written (an action that declares nothing).
func (c *checker) pipe(p *parse.PipeNode, output bool) {
	size := 0
	c.commands(p, output, &size)
	if size > MaxPipelineNodes {
		c.fail("an action has more than %d operands", MaxPipelineNodes)
	}
	c.nodes += size
}

func (c *checker) commands(p *parse.PipeNode, output bool, size *int) {
	*size++
	for i, cmd := range p.Cmds {
		*size++
		for j, arg := range cmd.Args {
			*size++
			switch a := arg.(type) {
			case *parse.IdentifierNode:
				// A function: the command's first word, or called without arguments.
				c.function(a.Ident, cmd, j == 0, output && j == 0 && tailFormats(p.Cmds[i:]))
			case *parse.PipeNode:
				c.commands(a, false, size)
			case *parse.ChainNode:
				if sub, ok := a.Node.(*parse.PipeNode); ok {
					c.commands(sub, false, size)
				}
			}
		}
	}
}

// tailFormats reports whether every command of cmds starts with a formatting function.
func tailFormats(cmds []*parse.CommandNode) bool {
	for _, cmd := range cmds {
		id, ok := cmd.Args[0].(*parse.IdentifierNode)
		if !ok || !formatting[id.Ident] {
			return false
		}
	}
	return true
}

// function checks a call of name; word says it is cmd's first word (so cmd holds its
// arguments), tail that its value goes to the output through formatting functions only.
func (c *checker) function(name string, cmd *parse.CommandNode, word, tail bool) {
	switch {
	case cheap[name]:
	case formatting[name]:
		if !tail {
			c.fail("%s may only produce an action's output (not a condition, a variable or an argument)", name)
			return
		}
		if name == "printf" && word {
			c.printf(cmd)
		}
	default:
		c.fail("function %s is not allowed", name)
	}
}

// printf allows only a literal format whose verbs ask for a small width and precision.
func (c *checker) printf(cmd *parse.CommandNode) {
	if len(cmd.Args) < 2 {
		c.fail("printf needs a literal format")
		return
	}
	f, ok := cmd.Args[1].(*parse.StringNode)
	if !ok {
		c.fail("printf's format must be a literal string")
		return
	}
	if err := checkFormat(f.Text); err != nil {
		c.fail("printf %q: %v", f.Text, err)
	}
}

// checkFormat refuses verbs with a width or precision above MaxFormatWidth, with * or an
// explicit argument index, and precision on anything but a float (it would truncate, and a
// formatting function must write at least what it reads).
func checkFormat(f string) error {
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		for i < len(f) && strings.IndexByte("+-# 0", f[i]) >= 0 {
			i++
		}
		var ok bool
		if i, ok = number(f, i); !ok {
			return fmt.Errorf("width above %d", MaxFormatWidth)
		}
		precision := i < len(f) && f[i] == '.'
		if precision {
			if i, ok = number(f, i+1); !ok {
				return fmt.Errorf("precision above %d", MaxFormatWidth)
			}
		}
		if i >= len(f) {
			return nil
		}
		switch {
		case f[i] == '*' || f[i] == '[':
			return fmt.Errorf("%c in a verb is not allowed", f[i])
		case precision && strings.IndexByte("eEfFgG", f[i]) < 0:
			return fmt.Errorf("precision only on floats (%%.2f)")
		}
	}
	return nil
}

// number skips the decimal number at f[i:] and reports whether it is at most MaxFormatWidth.
func number(f string, i int) (int, bool) {
	n := 0
	for ; i < len(f) && f[i] >= '0' && f[i] <= '9'; i++ {
		n = n*10 + int(f[i]-'0')
		if n > MaxFormatWidth {
			return i, false
		}
	}
	return i, true
}
