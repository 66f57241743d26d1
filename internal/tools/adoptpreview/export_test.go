package adoptpreview

// TemplateDiff compares two pod templates (spec.template of two live
// objects) as the preview compares a live template with a planned one.
func TemplateDiff(before, after interface{}) []Change {
	var out []Change
	compareValues("spec.template", nil, before, after, &out)
	return out
}
