package main

import (
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func ptr[T any](v T) *T { return &v }

func TestOverlay(t *testing.T) {
	upstream := func() *apiextv1.JSONSchemaProps {
		return &apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
				"imageTag":    {Type: "string", Description: "upstream's"},
				"tolerations": {Type: "array", Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{"effect": {Type: "string"}}}}},
				"other":       {Type: "string"},
			}},
		}}
	}
	checks := &apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
		"spec": {Type: "object", XPreserveUnknownFields: ptr(true), Properties: map[string]apiextv1.JSONSchemaProps{
			"imageTag":    {Type: "string", MaxLength: ptr[int64](128), Pattern: "^v"},
			"tolerations": {Type: "array", MaxItems: ptr[int64](64), Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{"effect": {Type: "string", Enum: []apiextv1.JSON{{Raw: []byte(`"NoSchedule"`)}}}}}}},
			"unvalidated": {Type: "string"},
		}},
	}}
	got := upstream()
	var copied []string
	if err := overlay(got, checks, "", &copied); err != nil {
		t.Fatal(err)
	}
	spec := got.Properties["spec"]
	tag := spec.Properties["imageTag"]
	if tag.Pattern != "^v" || *tag.MaxLength != 128 || tag.Description != "upstream's" {
		t.Errorf("imageTag: %+v, want virtop's checks on upstream's field", tag)
	}
	if spec.XPreserveUnknownFields != nil {
		t.Error("virtop's preserve-unknown-fields reached upstream's schema")
	}
	tol := spec.Properties["tolerations"]
	if *tol.MaxItems != 64 || len(tol.Items.Schema.Properties["effect"].Enum) != 1 {
		t.Errorf("tolerations: %+v", tol)
	}
	if strings.Join(copied, " ") != ".spec.imageTag .spec.tolerations .spec.tolerations[].effect" {
		t.Errorf("copied %v", copied)
	}
	// A field virtop checks that upstream's schema lacks is an error.
	checks.Properties["spec"].Properties["virtopOnly"] = apiextv1.JSONSchemaProps{Type: "string", MaxLength: ptr[int64](3)}
	err := overlay(upstream(), checks, "", &copied)
	if err == nil || !strings.Contains(err.Error(), ".spec.virtopOnly") {
		t.Errorf("overlay onto a schema without .spec.virtopOnly: %v", err)
	}
}
