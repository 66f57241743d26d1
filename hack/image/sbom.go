package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// binaryInfo is what the SBOM says of one platform's binary.
type binaryInfo struct {
	platform string
	sha256   string
	goVer    string
	mainPath string
	deps     map[string]string // module path -> version
	sums     map[string]string // module path -> go.sum hash
}

func readBinaryInfo(path string, bin []byte, platform string) (binaryInfo, error) {
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return binaryInfo{}, fmt.Errorf("%s: no Go build information: %w", path, err)
	}
	sum := sha256.Sum256(bin)
	info := binaryInfo{platform: platform, sha256: hex.EncodeToString(sum[:]), goVer: bi.GoVersion,
		mainPath: bi.Main.Path, deps: map[string]string{}, sums: map[string]string{}}
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		info.deps[d.Path] = m.Version
		info.sums[d.Path] = m.Sum
	}
	return info, nil
}

// SPDX 2.3 (JSON), the parts used here.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID                string            `json:"SPDXID"`
	Name                  string            `json:"name"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	Supplier              string            `json:"supplier,omitempty"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	Checksums             []spdxChecksum    `json:"checksums,omitempty"`
	LicenseConcluded      string            `json:"licenseConcluded"`
	LicenseDeclared       string            `json:"licenseDeclared"`
	CopyrightText         string            `json:"copyrightText"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	Comment               string            `json:"comment,omitempty"`
	ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, name string) string {
	return "SPDXRef-" + kind + "-" + strings.Trim(spdxIDUnsafe.ReplaceAllString(name, "-"), "-")
}

func purl(typ, name, version string) spdxExternalRef {
	loc := "pkg:" + typ + "/" + name
	if version != "" {
		loc += "@" + url.PathEscape(version)
	}
	return spdxExternalRef{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: loc}
}

// embeddedData describes the upstream data sets virtop compiles in.
var embeddedData = map[string]struct{ supplier, location, license string }{
	"kubevirt":             {"Organization: The KubeVirt Authors", "https://github.com/kubevirt/kubevirt", "Apache-2.0"},
	"common-instancetypes": {"Organization: The KubeVirt Authors", "https://github.com/kubevirt/common-instancetypes", "Apache-2.0"},
}

// SBOM is the SPDX 2.3 document of the image index with digest d: the
// image, each platform's binary (checksum), the Go toolchain's standard
// library and every Go module linked into any binary, the upstream data
// compiled in, and the CA bundle. It depends only on its inputs: the same
// image gives the same document.
func SBOM(o BuildOptions, d v1.Hash, bins []binaryInfo) ([]byte, error) {
	ca, err := CABundle()
	if err != nil {
		return nil, err
	}
	const imageID = "SPDXRef-Image"
	repo := o.Repository
	if repo == "" {
		repo = "ghcr.io/virtop-dev/virtop"
	}
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        "virtop-" + o.Version + "-image",
		// Unique per image content, as SPDX asks, and reproducible.
		DocumentNamespace: strings.TrimRight(o.Source, "/") + "/spdx/image/" + o.Version + "/" + d.Hex,
		CreationInfo:      spdxCreationInfo{Created: o.Created.Format(time.RFC3339), Creators: []string{"Organization: virtop", "Tool: virtop-hack-image"}},
		DocumentDescribes: []string{imageID},
	}
	add := func(p spdxPackage, relFrom, rel string) {
		if p.DownloadLocation == "" {
			p.DownloadLocation = "NOASSERTION"
		}
		if p.LicenseConcluded == "" {
			p.LicenseConcluded = "NOASSERTION"
		}
		if p.LicenseDeclared == "" {
			p.LicenseDeclared = "NOASSERTION"
		}
		if p.CopyrightText == "" {
			p.CopyrightText = "NOASSERTION"
		}
		doc.Packages = append(doc.Packages, p)
		if relFrom != "" {
			doc.Relationships = append(doc.Relationships, spdxRelationship{Element: relFrom, Type: rel, Related: p.SPDXID})
		}
	}
	add(spdxPackage{SPDXID: imageID, Name: repo, VersionInfo: o.Version, Supplier: "Organization: virtop",
		DownloadLocation: o.Source, LicenseDeclared: "Apache-2.0", PrimaryPackagePurpose: "CONTAINER",
		Checksums: []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: d.Hex}},
		ExternalRefs: []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: "pkg:oci/virtop@" + url.PathEscape(d.String()) + "?repository_url=" + url.QueryEscape(repo)}}}, "", "")
	doc.Relationships = append(doc.Relationships, spdxRelationship{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: imageID})

	modules := map[string]string{}
	sums := map[string]string{}
	goVersions := map[string]bool{}
	var binIDs []string
	for _, b := range bins {
		id := spdxID("Binary", b.platform)
		binIDs = append(binIDs, id)
		add(spdxPackage{SPDXID: id, Name: "virtop", VersionInfo: o.Version, Supplier: "Organization: virtop",
			DownloadLocation: o.Source, LicenseDeclared: "Apache-2.0", PrimaryPackagePurpose: "APPLICATION",
			Checksums:    []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: b.sha256}},
			Comment:      "/virtop of the " + b.platform + " image, Go module " + b.mainPath,
			ExternalRefs: []spdxExternalRef{purl("golang", b.mainPath, o.Version)}}, imageID, "CONTAINS")
		goVersions[b.goVer] = true
		for p, v := range b.deps {
			if have, ok := modules[p]; ok && have != v {
				return nil, fmt.Errorf("module %s is %s in one binary and %s in another", p, have, v)
			}
			modules[p] = v
			sums[p] = b.sums[p]
		}
	}
	var goVers []string
	for v := range goVersions {
		goVers = append(goVers, v)
	}
	sort.Strings(goVers)
	for _, v := range goVers {
		id := spdxID("Go-stdlib", v)
		add(spdxPackage{SPDXID: id, Name: "stdlib", VersionInfo: v, Supplier: "Organization: The Go Authors",
			LicenseDeclared: "BSD-3-Clause", PrimaryPackagePurpose: "LIBRARY",
			ExternalRefs: []spdxExternalRef{purl("golang", "stdlib", v)}}, "", "")
		for _, b := range binIDs {
			doc.Relationships = append(doc.Relationships, spdxRelationship{Element: b, Type: "DEPENDS_ON", Related: id})
		}
	}
	var paths []string
	for p := range modules {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		id := spdxID("Go", p)
		pkg := spdxPackage{SPDXID: id, Name: p, VersionInfo: modules[p], PrimaryPackagePurpose: "LIBRARY",
			ExternalRefs: []spdxExternalRef{purl("golang", p, modules[p])}}
		if s := sums[p]; s != "" {
			pkg.Comment = "go.sum " + s
		}
		add(pkg, "", "")
		for _, b := range binIDs {
			doc.Relationships = append(doc.Relationships, spdxRelationship{Element: b, Type: "DEPENDS_ON", Related: id})
		}
	}
	embedded := append([]string(nil), o.Embedded...)
	sort.Strings(embedded)
	for _, e := range embedded {
		name, version, ok := strings.Cut(e, "@")
		meta, known := embeddedData[name]
		if !ok || !known {
			return nil, fmt.Errorf("-embedded %q: want NAME@VERSION with NAME one of kubevirt, common-instancetypes", e)
		}
		id := spdxID("Data-"+name, version)
		add(spdxPackage{SPDXID: id, Name: name, VersionInfo: version, Supplier: meta.supplier,
			DownloadLocation: meta.location, LicenseDeclared: meta.license, PrimaryPackagePurpose: "OTHER",
			Comment: "facts of this release compiled into virtop (see NOTICE)"}, "", "")
		for _, b := range binIDs {
			doc.Relationships = append(doc.Relationships, spdxRelationship{Element: b, Type: "CONTAINS", Related: id})
		}
	}
	add(spdxPackage{SPDXID: "SPDXRef-CABundle", Name: CABundleModule, VersionInfo: ca.Version,
		Supplier: "Organization: The Go Authors", PrimaryPackagePurpose: "FILE",
		LicenseDeclared: "MPL-2.0 AND BSD-3-Clause",
		Checksums:       []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: sha256Hex(ca.PEM)}},
		Comment: fmt.Sprintf("/%s: %d roots of Mozilla's NSS store (%d with distrust-after dates left out)",
			CABundlePath, ca.Roots, ca.Skipped),
		ExternalRefs: []spdxExternalRef{purl("golang", CABundleModule, ca.Version)}}, imageID, "CONTAINS")
	return json.MarshalIndent(doc, "", "  ")
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
