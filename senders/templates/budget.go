package templates

import (
	"errors"
	"fmt"
	"strings"
	"text/template/parse"
)

// Errors a render stops with when it exceeds its budget; they come wrapped in ErrRender.
var (
	errOutputLimit = fmt.Errorf("output exceeds %d bytes", MaxOutputBytes)
	errStepLimit   = fmt.Errorf("render exceeds %d steps", MaxSteps)
)

// budget is what one render of one channel may still spend, shared by all its parts (an
// e-mail's subject, text and HTML; every string of a webhook's JSON).
type budget struct {
	bytes, steps int
}

func newBudget() *budget { return &budget{bytes: MaxOutputBytes, steps: MaxSteps} }

// writer collects one part's output and charges every write to the budget. A write over
// the budget fails, and text/template stops executing at the first failed write.
type writer struct {
	b   *budget
	out strings.Builder
}

func (w *writer) Write(p []byte) (int, error) {
	w.b.steps--
	w.b.bytes -= len(p)
	switch {
	case w.b.steps < 0:
		return 0, errStepLimit
	case w.b.bytes < 0:
		return 0, errOutputLimit
	}
	return w.out.Write(p)
}

// overBudget reports whether err is a render stopped by its budget.
func overBudget(err error) bool {
	return errors.Is(err, errOutputLimit) || errors.Is(err, errStepLimit)
}

// meter makes every node of tree write when it runs, so that the budget's step count bounds
// the nodes a render runs, including those that print nothing: it puts an empty text at the
// head of every branch (adding an empty else to if, with and range) and after every
// variable declaration. Text and actions that print write anyway. An empty text writes
// nothing but still calls Write.
func meter(tree *parse.Tree) {
	meterList(tree.Root)
}

func meterList(l *parse.ListNode) {
	nodes := make([]parse.Node, 0, len(l.Nodes)+1)
	for _, n := range l.Nodes {
		nodes = append(nodes, n)
		switch n := n.(type) {
		case *parse.ActionNode:
			if len(n.Pipe.Decl) > 0 {
				nodes = append(nodes, mark(n.Pos))
			}
		case *parse.IfNode:
			meterBranches(&n.BranchNode)
		case *parse.WithNode:
			meterBranches(&n.BranchNode)
		case *parse.RangeNode:
			meterBranches(&n.BranchNode)
		}
	}
	l.Nodes = nodes
}

func meterBranches(b *parse.BranchNode) {
	if b.List == nil {
		b.List = &parse.ListNode{NodeType: parse.NodeList, Pos: b.Pos}
	}
	if b.ElseList == nil {
		b.ElseList = &parse.ListNode{NodeType: parse.NodeList, Pos: b.Pos}
	}
	for _, l := range []*parse.ListNode{b.List, b.ElseList} {
		meterList(l)
		l.Nodes = append([]parse.Node{mark(l.Pos)}, l.Nodes...)
	}
}

func mark(pos parse.Pos) *parse.TextNode {
	return &parse.TextNode{NodeType: parse.NodeText, Pos: pos, Text: []byte{}}
}
