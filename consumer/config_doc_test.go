package consumer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestConfigTuningDocs holds the rule of Config's doc: the Tuning group
// is headed as such, comes after what a service sets, and each of its
// numeric fields names the Default* constant its zero value means, a
// constant of config.go's block; every constant of that block is named by
// a field.
func TestConfigTuningDocs(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var fields *ast.FieldList
	consts := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range g.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if st, ok := s.Type.(*ast.StructType); ok && s.Name.Name == "Config" {
					fields = st.Fields
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if g.Tok == token.CONST {
						consts[n.Name] = true
					}
				}
			}
		}
	}
	if fields == nil {
		t.Fatal("config.go declares no Config struct")
	}
	named := regexp.MustCompile(`\[(Default\w+)\]`)
	tuning := -1
	used := map[string]bool{}
	for i, fd := range fields.List {
		doc := fd.Doc.Text()
		name := fd.Names[0].Name
		if strings.HasPrefix(doc, "Tuning: ") {
			tuning = i
		}
		for _, m := range named.FindAllStringSubmatch(doc, -1) {
			if !consts[m[1]] {
				t.Errorf("Config.%s names %s, which config.go does not declare", name, m[1])
			}
			used[m[1]] = true
		}
		if tuning < 0 || i < tuning {
			continue
		}
		if typ := typeName(fd.Type); (typ == "int" || typ == "time.Duration") && !named.MatchString(doc) {
			t.Errorf("Config.%s (Tuning) does not name its Default* constant", name)
		}
	}
	switch {
	case tuning < 0:
		t.Fatal(`no Config field's doc starts with "Tuning: "`)
	case tuning < slices.IndexFunc(fields.List, func(fd *ast.Field) bool { return fd.Names[0].Name == "ClientOptions" }):
		t.Error("the Tuning group starts before ClientOptions, among what a service sets")
	}
	for c := range consts {
		if strings.HasPrefix(c, "Default") && !used[c] {
			t.Errorf("%s is named by no Config field", c)
		}
	}
}

// typeName is the source form of a field's type for the few the rule looks
// at: a name or a package-qualified name.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return x.Name + "." + e.Sel.Name
		}
	}
	return ""
}
