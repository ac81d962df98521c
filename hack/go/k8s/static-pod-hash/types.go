package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	api "k8s.io/kubernetes/pkg/apis/core"
)

type tdesc struct {
	Str    string     `json:"s"`
	Kind   string     `json:"k"`
	Elem   string     `json:"e,omitempty"`
	Key    string     `json:"key,omitempty"`
	Fields [][]string `json:"f,omitempty"`
}

var tdescs = map[string]*tdesc{}

func jsonName(t reflect.Type, name string) string {
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	f, ok := t.FieldByName(name)
	if !ok {
		return ""
	}
	tag := f.Tag.Get("json")
	n := strings.Split(tag, ",")[0]
	if f.Anonymous && n == "" || strings.Contains(tag, "inline") {
		// An embedded struct: its fields are the parent's in JSON.
		return "^"
	}
	if n == "-" {
		return ""
	}
	return n
}

func other(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Ptr || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t
}

func walk(t, v reflect.Type) string {
	key := t.String()
	if _, ok := tdescs[key]; ok {
		return key
	}
	d := &tdesc{Str: key, Kind: t.Kind().String()}
	tdescs[key] = d
	switch t.Kind() {
	case reflect.Ptr, reflect.Slice:
		var ve reflect.Type
		if v != nil && (v.Kind() == reflect.Ptr || v.Kind() == reflect.Slice) {
			ve = v.Elem()
		}
		d.Elem = walk(t.Elem(), ve)
	case reflect.Map:
		var ve reflect.Type
		if v != nil && v.Kind() == reflect.Map {
			ve = v.Elem()
		}
		d.Key = walk(t.Key(), nil)
		d.Elem = walk(t.Elem(), ve)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			var vf reflect.Type
			jn := ""
			if v != nil && v.Kind() == reflect.Struct {
				if g, ok := v.FieldByName(f.Name); ok {
					vf = g.Type
					jn = jsonName(v, f.Name)
				}
			}
			d.Fields = append(d.Fields, []string{f.Name, jn, walk(f.Type, vf)})
		}
	}
	return key
}

func reflectPodTypes() (reflect.Type, reflect.Type) {
	return reflect.TypeOf(&api.Pod{}), reflect.TypeOf(&v1.Pod{})
}

func dumpTypes() {
	walk(reflect.TypeOf(&api.Pod{}), reflect.TypeOf(&v1.Pod{}))
	out, _ := json.Marshal(tdescs)
	fmt.Println(string(out))
}
