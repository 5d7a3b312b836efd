package client_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
)

// TestRuntimeProfileMirrorsServer: client.RuntimeProfile mirrors the
// server's declaration of a profile (lifecycle.Profile, as platform.Redact
// shows it), which, built on package sandbox, cannot move into the
// platform's wire. With every field set, the server's answer reads into
// it without an unknown key and writes back the same JSON; and what the
// SDK puts reads into the server's type (which refuses unknown keys) and
// writes back the same.
func TestRuntimeProfileMirrorsServer(t *testing.T) {
	var p lifecycle.Profile
	fill(reflect.ValueOf(&p).Elem())
	shown, err := json.Marshal(platform.Redact(p))
	if err != nil {
		t.Fatal(err)
	}
	var got client.RuntimeProfile
	dec := json.NewDecoder(bytes.NewReader(shown))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("the server's profile %s does not read into client.RuntimeProfile: %v", shown, err)
	}
	sameJSON(t, "the server's profile", shown, got)

	var put client.RuntimeProfile
	fill(reflect.ValueOf(&put).Elem())
	put.APIKeySet = false // output only: PutRuntimeProfile clears it
	sent, err := json.Marshal(put)
	if err != nil {
		t.Fatal(err)
	}
	var stored lifecycle.Profile
	if err := json.Unmarshal(sent, &stored); err != nil {
		t.Fatalf("the SDK's profile %s does not read into lifecycle.Profile: %v", sent, err)
	}
	sameJSON(t, "the SDK's profile", sent, stored)
}

// sameJSON fails unless v encodes as JSON equal to want.
func sameJSON(t *testing.T, what string, want []byte, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x, y any
	if err := json.Unmarshal(want, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x, y) {
		t.Fatalf("%s:\n%s\nwrites back as\n%s", what, want, b)
	}
}

// fill sets every settable field under v to a non-zero value (a duration
// to whole seconds, as profiles keep them).
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(int64(7 * time.Second))
		} else {
			v.SetInt(7)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				fill(v.Field(i))
			}
		}
	}
}
