package consumer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// reasonDecls finds, in the Go source of one file, every constant of type
// Reason (typed, converted or repeated in a const group) by name with its
// value, and the places a Reason is made from a literal other than as a
// constant (a conversion or a var), which a list of constants cannot see.
func reasonDecls(fset *token.FileSet, f *ast.File) (consts map[string]Reason, stray []string) {
	consts = map[string]Reason{}
	isReason := func(e ast.Expr) bool { id, ok := e.(*ast.Ident); return ok && id.Name == "Reason" }
	literal := func(e ast.Expr) (Reason, bool) {
		if c, ok := e.(*ast.CallExpr); ok && isReason(c.Fun) && len(c.Args) == 1 {
			e = c.Args[0]
		}
		if l, ok := e.(*ast.BasicLit); ok && l.Kind == token.STRING {
			s, err := strconv.Unquote(l.Value)
			return Reason(s), err == nil
		}
		return "", false
	}
	inConst := map[ast.Node]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			if n.Tok != token.CONST && n.Tok != token.VAR {
				return true
			}
			var typ ast.Expr
			var vals []ast.Expr
			for _, s := range n.Specs {
				vs := s.(*ast.ValueSpec)
				if n.Tok == token.CONST && vs.Type == nil && len(vs.Values) == 0 {
					vs = &ast.ValueSpec{Names: vs.Names, Type: typ, Values: vals} // repeats the previous spec
				} else {
					typ, vals = vs.Type, vs.Values
				}
				for i, name := range vs.Names {
					var v ast.Expr
					if i < len(vs.Values) {
						v = vs.Values[i]
					}
					c, conv := v.(*ast.CallExpr)
					if !(vs.Type != nil && isReason(vs.Type)) && !(conv && isReason(c.Fun)) {
						continue
					}
					inConst[v] = true
					r, ok := literal(v)
					switch {
					case n.Tok != token.CONST:
						stray = append(stray, fset.Position(name.Pos()).String()+": var "+name.Name)
					case !ok:
						stray = append(stray, fset.Position(name.Pos()).String()+": constant "+name.Name+" is not a string literal")
					default:
						consts[name.Name] = r
					}
				}
			}
		case *ast.CallExpr:
			if _, ok := literal(n); ok && isReason(n.Fun) && !inConst[n] {
				stray = append(stray, fset.Position(n.Pos()).String()+": Reason(literal)")
			}
		}
		return true
	})
	return consts, stray
}

// TestReasonsListsEveryConstant: Reasons() holds exactly the package's
// Reason constants, read from its Go source, so a reason added without
// being listed (which lanes dlq replay --reason would then refuse) fails
// here; a Reason made from a literal elsewhere than in a constant fails
// too.
func TestReasonsListsEveryConstant(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := map[string]Reason{}
	var stray []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		c, s := reasonDecls(fset, f)
		for k, v := range c {
			found[k] = v
		}
		stray = append(stray, s...)
	}
	for _, s := range stray {
		t.Errorf("%s: make every Reason a constant listed in allReasons (reasons.go)", s)
	}
	listed := Reasons()
	for name, v := range found {
		if !slices.Contains(listed, v) {
			t.Errorf("constant %s (%q) is not in allReasons (reasons.go): add it, or lanes dlq replay --reason refuses it", name, v)
		}
	}
	values := map[Reason]string{}
	for name, v := range found {
		if other, dup := values[v]; dup {
			t.Errorf("constants %s and %s are both %q", name, other, v)
		}
		values[v] = name
	}
	for _, v := range listed {
		if _, ok := values[v]; !ok {
			t.Errorf("allReasons lists %q, which no Reason constant of the package is", v)
		}
		if !v.Valid() {
			t.Errorf("%q.Valid() = false", v)
		}
	}
	if len(listed) != len(found) {
		t.Errorf("allReasons has %d entries, the package %d Reason constants: %v", len(listed), len(found), found)
	}
	if Reason("no-such-reason").Valid() {
		t.Error(`Reason("no-such-reason").Valid() = true`)
	}
}

// TestReasonDeclsFindsEveryForm: the source scan behind
// TestReasonsListsEveryConstant sees each way a Reason constant can be
// written, and flags a Reason made from a literal outside a constant.
func TestReasonDeclsFindsEveryForm(t *testing.T) {
	const src = `package consumer
const ReasonA Reason = "a"
const (
	ReasonB Reason = "b"
	ReasonC
	other = "x"
	ReasonD = Reason("d")
)
const ReasonE, ReasonF Reason = "e", "f"
var r Reason = "g"
func f() { deadLetter(Reason("h")); const ReasonI Reason = "i" }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	consts, stray := reasonDecls(fset, f)
	want := map[string]Reason{"ReasonA": "a", "ReasonB": "b", "ReasonC": "b", "ReasonD": "d", "ReasonE": "e", "ReasonF": "f", "ReasonI": "i"}
	if len(consts) != len(want) {
		t.Errorf("found %v, want %v", consts, want)
	}
	for k, v := range want {
		if consts[k] != v {
			t.Errorf("%s = %q, want %q (found %v)", k, consts[k], v, consts)
		}
	}
	if len(stray) != 2 || !strings.Contains(stray[0], "var r") || !strings.Contains(stray[1], "Reason(literal)") {
		t.Errorf("stray = %q, want the var r and the Reason(\"h\") conversion", stray)
	}
}
