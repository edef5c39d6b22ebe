package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// keyNode is the shape of a part of the listeners: section: an object
// with known fields, or a list of elements; nil is a leaf (any value).
type keyNode struct {
	fields map[string]*keyNode
	elem   *keyNode
}

func object(fields map[string]*keyNode) *keyNode { return &keyNode{fields: fields} }
func list(elem *keyNode) *keyNode                { return &keyNode{elem: elem} }

// leaves is an object of scalar fields.
func leaves(names ...string) *keyNode {
	m := make(map[string]*keyNode, len(names))
	for _, n := range names {
		m[n] = nil
	}
	return object(m)
}

var headerKeys = leaves("name", "exact", "prefix", "regex", "present", "invert")

// listenerKeys are the keys allowed in one listeners: entry.
var listenerKeys = object(map[string]*keyNode{
	"name": nil, "address": nil, "nodes": nil,
	"routes": list(object(map[string]*keyNode{
		"prefix": nil, "path": nil, "safe_regex": nil, "headers": list(headerKeys), "service": nil,
		"split":   list(leaves("service", "subset", "weight")),
		"timeout": nil, "retries": nil, "retry_on": nil, "per_try_timeout": nil,
	})),
	"ratelimit": object(map[string]*keyNode{
		"domain": nil, "timeout": nil, "failure_mode_deny": nil, "cluster": nil,
		"actions": list(list(object(map[string]*keyNode{
			"remote_address":  object(map[string]*keyNode{}),
			"generic_key":     leaves("value", "descriptor_key"),
			"request_headers": leaves("header_name", "descriptor_key", "skip_if_absent"),
			"header_value_match": object(map[string]*keyNode{
				"descriptor_key": nil, "descriptor_value": nil, "expect_match": nil, "headers": list(headerKeys),
			}),
		}))),
	}),
	"admission_control": leaves("k", "success_rate_threshold", "aggression", "sampling_window", "rps_threshold",
		"max_rejection_probability"),
})

// checkListenerKeys rejects unknown keys (and misplaced lists or
// objects) under the file's listeners: section, naming each by its path,
// e.g. listeners[0].routes[1].prefx.
func checkListenerKeys(v any) []FieldError {
	return checkShape("listeners", v, list(listenerKeys))
}

func checkShape(at string, v any, n *keyNode) []FieldError {
	if n == nil || v == nil {
		return nil
	}
	var errs []FieldError
	switch {
	case n.elem != nil:
		items, ok := v.([]any)
		if !ok {
			return []FieldError{{Key: at, Value: render(v), Reason: "must be a list"}}
		}
		for i, item := range items {
			errs = append(errs, checkShape(fmt.Sprintf("%s[%d]", at, i), item, n.elem)...)
		}
	default:
		m, ok := v.(map[string]any)
		if !ok {
			return []FieldError{{Key: at, Value: render(v), Reason: "must be a mapping of " + strings.Join(slices.Sorted(maps.Keys(n.fields)), ", ")}}
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			child, known := n.fields[strings.ToLower(k)]
			if !known {
				allowed := strings.Join(slices.Sorted(maps.Keys(n.fields)), ", ")
				if allowed == "" {
					allowed = "none"
				}
				errs = append(errs, FieldError{Key: at + "." + k, Reason: "unknown key" + suggest(k, slices.Sorted(maps.Keys(n.fields))) + " (allowed here: " + allowed + ")"})
				continue
			}
			errs = append(errs, checkShape(at+"."+k, m[k], child)...)
		}
	}
	return errs
}
