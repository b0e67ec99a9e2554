package redistest_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	old "github.com/tenure-go/tenure/internal/redistest"
	"github.com/tenure-go/tenure/tests/redistest"
)

// The old path starts the same servers as the new one.
func TestOldPathStartsAServer(t *testing.T) {
	var srv *redistest.Server = old.Start(t)
	if err := srv.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(old.ErrStopped, redistest.ErrStopped) {
		t.Fatal("ErrStopped is not the same error under both paths")
	}
}

// Every exported name of tests/redistest is forwarded, so that a test
// written against the old path builds whatever it uses.
func TestEveryNameForwarded(t *testing.T) {
	want := exported(t, filepath.Join("..", "..", "tests", "redistest"))
	got := exported(t, ".")
	for name := range want {
		if !got[name] {
			t.Errorf("tests/redistest.%s is not forwarded by internal/redistest", name)
		}
	}
	if len(want) < 30 {
		t.Fatalf("found only %d exported names in tests/redistest", len(want))
	}
}

// exported returns the exported package-level names declared in dir's
// non-test files: types, constants, variables and functions (methods come
// with their types).
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}

func TestMain(m *testing.M) { old.Main(m, func(string) {}) }
