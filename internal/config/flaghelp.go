package config

import (
	"fmt"
	"reflect"
)

// Help is the help of the flag that sets field (a pointer to a field of
// the settings *root): what (the flag's own words, or the setting's desc
// tag when empty) and the variable that sets it too, from the field's
// envconfig tag: flags never spell a variable's name by hand. It panics
// when field is not a field of root: a programming error.
func Help(root, field any, what string) string {
	fp := reflect.ValueOf(field)
	f, ok := findField(reflect.ValueOf(root).Elem(), fp.Pointer(), fp.Type().Elem())
	if !ok {
		panic(fmt.Sprintf("config.Help: %T is not a field of %T", field, root))
	}
	if what == "" {
		what = f.Tag.Get("desc")
	}
	return fmt.Sprintf("%s (env %s_%s)", what, Prefix, f.Tag.Get("envconfig"))
}

// findField finds the struct field of type typ at address addr within v
// (a struct), embedded and nested structs included (a struct and its
// first field share an address: the type tells them apart).
func findField(v reflect.Value, addr uintptr, typ reflect.Type) (reflect.StructField, bool) {
	t := v.Type()
	for i := range t.NumField() {
		fv := v.Field(i)
		if !t.Field(i).IsExported() {
			continue
		}
		if fv.Addr().Pointer() == addr && fv.Type() == typ && t.Field(i).Tag.Get("envconfig") != "" {
			return t.Field(i), true
		}
		if fv.Kind() == reflect.Struct {
			if f, ok := findField(fv, addr, typ); ok {
				return f, true
			}
		}
	}
	return reflect.StructField{}, false
}
