# The OpenAPI schemas of the KubeVirt CRDs (internal/components/schemas),
# generated from the kubevirt.io/api Go types by controller-gen.

.PHONY: crd-schemas
crd-schemas: controller-gen ## Regenerate internal/components/schemas from kubevirt.io/api with controller-gen
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/crdschemas/gen.sh
