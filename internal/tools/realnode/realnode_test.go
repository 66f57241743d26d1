package realnode

import "testing"

func TestSplitRef(t *testing.T) {
	for _, tc := range []struct{ ref, repo, tag, digest string }{
		{"ghcr.io/virtop-dev/virtop:v1.0.0@sha256:ab", "ghcr.io/virtop-dev/virtop", "v1.0.0", "sha256:ab"},
		{"ghcr.io/virtop-dev/virtop:v1.0.0", "ghcr.io/virtop-dev/virtop", "v1.0.0", ""},
		{"localhost:5000/virtop@sha256:ab", "localhost:5000/virtop", "", "sha256:ab"},
		{"localhost:5000/virtop", "localhost:5000/virtop", "", ""},
	} {
		repo, tag, digest := splitRef(tc.ref)
		if repo != tc.repo || tag != tc.tag || digest != tc.digest {
			t.Errorf("splitRef(%q) = %q %q %q, want %q %q %q", tc.ref, repo, tag, digest, tc.repo, tc.tag, tc.digest)
		}
	}
}

func TestGateway(t *testing.T) {
	for cidr, want := range map[string]string{"10.130.7.0/24": "10.130.7.1", "10.130.7.9/24": "10.130.7.1"} {
		if got, err := Gateway(cidr); err != nil || got != want {
			t.Errorf("Gateway(%s) = %q, %v; want %s", cidr, got, err, want)
		}
	}
	if _, err := Gateway("fd00::/64"); err == nil {
		t.Error("an IPv6 range gave a gateway; the bridge is IPv4 only")
	}
}
