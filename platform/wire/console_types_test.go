package wire

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// consoleTypes are the console's interfaces (console/src/api/types.ts)
// that declare a wire type of this package, by name.
var consoleTypes = map[string]reflect.Type{
	"Agent":         reflect.TypeFor[Agent](),
	"Session":       reflect.TypeFor[Session](),
	"Interaction":   reflect.TypeFor[Interaction](),
	"Receipt":       reflect.TypeFor[Receipt](),
	"Vault":         reflect.TypeFor[Vault](),
	"VaultSecret":   reflect.TypeFor[VaultSecret](),
	"VaultRequest":  reflect.TypeFor[VaultRequest](),
	"SecretRequest": reflect.TypeFor[SecretRequest](),
}

// TestConsoleWireTypes: every field the console's TypeScript declares for
// a wire type (it declares only those it uses) is a JSON key of the Go
// type, of a matching kind (string, number, boolean, list, object), and
// may be null in TypeScript only when the Go field can be (a pointer,
// slice or map) and must be when it is a pointer (or else optional, for a
// pointer left out when nil). Inline object types
// (a Session's pending_inputs) are checked against their Go element type.
func TestConsoleWireTypes(t *testing.T) {
	src := consoleSource(t)[filepath.Join("..", "..", "console", "src", "api", "types.ts")]
	for name, typ := range consoleTypes {
		body, ok := tsInterface(src, name)
		if !ok {
			t.Errorf("console/src/api/types.ts declares no interface %s (the wire's %s)", name, typ)
			continue
		}
		checkTSFields(t, name, body, typ)
	}
}

// checkTSFields checks the fields of a TypeScript object type's body
// against the Go struct typ.
func checkTSFields(t *testing.T, where, body string, typ reflect.Type) {
	t.Helper()
	fields := tsFields(body)
	if len(fields) == 0 {
		t.Errorf("console's %s: no fields parsed from %q", where, body)
	}
	keys := jsonFields(typ)
	for _, f := range fields {
		at := where + "." + f.name
		gf, ok := keys[f.name]
		if !ok {
			t.Errorf("console's %s is not a JSON key of the wire's %s", at, typ)
			continue
		}
		base, nullable := tsNullable(f.typ)
		if gf.Type.Kind() == reflect.Pointer && !nullable && !(f.optional && omitsEmpty(gf)) {
			t.Errorf("console's %s is %q, but the wire's %s may be null", at, f.typ, gf.Name)
		}
		if nullable && !goNullable(gf.Type) {
			t.Errorf("console's %s is %q, but the wire's %s (%s) is never null", at, f.typ, gf.Name, gf.Type)
		}
		checkTSType(t, at, base, gf.Type)
	}
}

// checkTSType checks a TypeScript type (without "| null") against a Go
// type.
func checkTSType(t *testing.T, at, ts string, gt reflect.Type) {
	t.Helper()
	for gt.Kind() == reflect.Pointer {
		gt = gt.Elem()
	}
	switch {
	case gt == reflect.TypeFor[json.RawMessage]() || ts == "unknown":
		if ts != "unknown" {
			t.Errorf("console's %s is %q, for raw JSON (%s): want unknown", at, ts, gt)
		}
	case strings.HasSuffix(ts, "[]"):
		if gt.Kind() != reflect.Slice {
			t.Errorf("console's %s is a list, the wire's %s is not", at, gt)
			return
		}
		checkTSType(t, at+"[]", strings.TrimSpace(strings.TrimSuffix(ts, "[]")), gt.Elem())
	case strings.HasPrefix(ts, "{"):
		if gt.Kind() != reflect.Struct {
			t.Errorf("console's %s is an object, the wire's %s is not", at, gt)
			return
		}
		checkTSFields(t, at, ts[1:len(ts)-1], gt)
	case consoleTypes[ts] != nil:
		if consoleTypes[ts] != gt {
			t.Errorf("console's %s is %s, the wire's %s", at, ts, gt)
		}
	case ts == "number":
		if k := gt.Kind(); k < reflect.Int || k > reflect.Float64 {
			t.Errorf("console's %s is a number, the wire's %s is not", at, gt)
		}
	case ts == "boolean":
		if gt.Kind() != reflect.Bool {
			t.Errorf("console's %s is a boolean, the wire's %s is not", at, gt)
		}
	case strings.HasPrefix(ts, "Record<string,"):
		if gt.Kind() != reflect.Map {
			t.Errorf("console's %s is a record, the wire's %s is not", at, gt)
		}
	default: // string, a union of string literals, or a string type's name
		if gt.Kind() != reflect.String && gt != reflect.TypeFor[time.Time]() {
			t.Errorf("console's %s is %q, the wire's %s is not a string", at, ts, gt)
		}
	}
}

// omitsEmpty reports whether f is left out when empty (a nil pointer is
// then absent, not null).
func omitsEmpty(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	return strings.Contains(","+opts+",", ",omitempty,")
}

// goNullable reports whether a Go field of type gt can encode as null.
func goNullable(gt reflect.Type) bool {
	switch gt.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

// jsonFields returns the struct fields of typ by JSON key, those of
// embedded structs included.
func jsonFields(typ reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-" || !f.IsExported():
		case f.Anonymous && tag == "":
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
		case tag == "":
			out[f.Name] = f
		default:
			out[tag] = f
		}
	}
	return out
}

// tsField is a field of a TypeScript object type; optional is its "?".
type tsField struct {
	name, typ string
	optional  bool
}

// tsInterface returns the body (between the braces) of `export interface
// name {...}` in src.
func tsInterface(src, name string) (string, bool) {
	loc := regexp.MustCompile(`export interface ` + name + `\s*\{`).FindStringIndex(src)
	if loc == nil {
		return "", false
	}
	depth := 0
	for i := loc[1] - 1; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return src[loc[1]:i], true
			}
		}
	}
	return "", false
}

// comments match TypeScript comments.
var comments = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)

// tsFields splits an object type's body into its fields at the
// semicolons outside nested braces.
func tsFields(body string) []tsField {
	body = comments.ReplaceAllString(body, "")
	var out []tsField
	depth, start := 0, 0
	for i := 0; i <= len(body); i++ {
		if i < len(body) {
			switch body[i] {
			case '{', '(', '<':
				depth++
				continue
			case '}', ')', '>':
				depth--
				continue
			case ';':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if name, typ, ok := strings.Cut(strings.TrimSpace(body[start:i]), ":"); ok {
			name = strings.TrimSpace(name)
			out = append(out, tsField{name: strings.TrimSuffix(name, "?"), typ: strings.TrimSpace(typ), optional: strings.HasSuffix(name, "?")})
		}
		start = i + 1
	}
	return out
}

// tsNullable splits "T | null" into T and true.
func tsNullable(ts string) (string, bool) {
	if base, ok := strings.CutSuffix(ts, "| null"); ok {
		return strings.TrimSpace(base), true
	}
	return ts, false
}
