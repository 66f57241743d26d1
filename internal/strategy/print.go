package strategy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Print encodes objects for people and tools: "yaml" as a multi-document
// stream, "json" as one v1 List, as kubectl prints several objects.
func Print(objs []client.Object, format string) ([]byte, error) {
	switch format {
	case "yaml":
		var buf bytes.Buffer
		if err := writeStream(&buf, objs); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case "json":
		items := make([]json.RawMessage, 0, len(objs))
		for _, o := range objs {
			y, err := EncodeObject(o)
			if err != nil {
				return nil, err
			}
			j, err := yaml.YAMLToJSON(y)
			if err != nil {
				return nil, err
			}
			items = append(items, j)
		}
		list := struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Items      []json.RawMessage `json:"items"`
		}{"v1", "List", items}
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	default:
		return nil, fmt.Errorf("unknown output format %q (want yaml or json)", format)
	}
}
