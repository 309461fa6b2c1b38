package archtest

import (
	"fmt"
	"go/ast"
	"sort"
	"testing"

	"github.com/fzipp/gocyclo"
)

// Limits of a function outside tests: a reader holds it in mind.
const (
	maxLines      = 80
	maxComplexity = 20
)

// TestFunctionsAreSmall fails on a function of non-test code over
// maxLines lines or over maxComplexity cyclomatic complexity.
func TestFunctionsAreSmall(t *testing.T) {
	var over []string
	for _, f := range sourceFiles(t) {
		for _, d := range f.file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := f.path + ": " + funcName(fn)
			lines := f.fset.Position(fn.End()).Line - f.fset.Position(fn.Pos()).Line + 1
			complexity := gocyclo.Complexity(fn)
			if lines <= maxLines && complexity <= maxComplexity {
				continue
			}
			over = append(over, fmt.Sprintf("%s: %d lines, complexity %d", name, lines, complexity))
		}
	}
	sort.Strings(over)
	for _, o := range over {
		t.Errorf("%s: split it (at most %d lines and complexity %d)", o, maxLines, maxComplexity)
	}
}

// funcName is a function's name as gocyclo gives it: (*T).Name for a
// method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	return "(" + recvType(fn.Recv.List[0].Type) + ")." + fn.Name.Name
}

func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + recvType(t.X)
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
