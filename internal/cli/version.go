package cli

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/version"
)

func init() { register(newVersionCommand) }

// versionInfo is what `virtop version -o json` prints.
type versionInfo struct {
	Version   string          `json:"version"`
	Commit    string          `json:"commit"`
	GoVersion string          `json:"goVersion"`
	Platform  string          `json:"platform"`
	KubeVirt  kubevirtCatalog `json:"kubevirt"`
}

// kubevirtCatalog names the KubeVirt releases this binary renders in
// process (their upstream data is compiled in).
type kubevirtCatalog struct {
	Default string   `json:"default"`
	Catalog []string `json:"catalog"`
}

func currentVersion() versionInfo {
	commit := version.Commit
	if commit == "" {
		commit = "unknown"
	}
	return versionInfo{
		Version:   version.Version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
		KubeVirt:  kubevirtCatalog{Default: release.Default, Catalog: release.Builtin().Versions()},
	}
}

// versionLine is the one-line version (`virtop version`, `virtop --version`).
func versionLine() string {
	v := currentVersion()
	return fmt.Sprintf("virtop %s (commit %s, %s, %s)", v.Version, v.Commit, v.GoVersion, v.Platform)
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print virtop's version",
		Long: `Print virtop's version, commit, Go version and platform; with -o json also
the KubeVirt releases it renders in process (its catalog) and the default.`,
		Example: `  virtop version
  virtop --version

  # for a script
  virtop version -o json | jq -r .version

  # the binary of the image
  skopeo copy oci-archive:dist/virtop-image.tar docker-daemon:virtop:dev && docker run --rm virtop:dev version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, reportFormats); err != nil {
				return err
			}
			if output == "json" {
				b, err := json.MarshalIndent(currentVersion(), "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
	addOutputFlag(cmd, &output, reportFormats)
	return cmd
}
