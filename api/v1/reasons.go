package v1

// KubeVirtConditionMonitoringReady is virtop's own condition: whether
// KubeVirt's monitoring objects are applied where a Prometheus selects
// them. Its reasons are the monitoring placement's (internal/monitoring/
// placement) and ReasonMonitoringApplyFailed; the message of "not
// selected" names the label or namespace label that would fix it. It
// never affects Available.
const KubeVirtConditionMonitoringReady KubeVirtConditionType = "MonitoringReady"

// Reasons virtop sets on the KubeVirt conditions; docs/api.md records
// what each means.
const (
	ReasonAllComponentsReady   = "AllComponentsReady"
	ReasonAllResourcesCreated  = "AllResourcesCreated"
	ReasonDeploymentInProgress = "DeploymentInProgress"
	ReasonUpdateInProgress     = "UpdateInProgress"
	ReasonDeploymentFailed     = "DeploymentFailed"
	ReasonInvalidConfiguration = "InvalidConfiguration"
	ReasonStrategyPending      = "StrategyPending"
	ReasonStrategyJobFailed    = "StrategyJobFailed"
	// ReasonStrategySigningKeyUntrusted: Secret virtop-strategy-signing-key
	// exists but is not the key this operator created (its fingerprint is
	// not the one status.generations records), so no strategy Job runs
	// and no strategy ConfigMap is loaded until it is deleted.
	ReasonStrategySigningKeyUntrusted = "StrategySigningKeyUntrusted"
	ReasonExistingDeployment          = "ExistingDeployment"
	ReasonDeletionInProgress          = "DeletionInProgress"
	ReasonDeletionBlocked             = "DeletionBlocked"
	ReasonDeletionFailed              = "DeletionFailed"
	ReasonNoErrors                    = "NoErrors"
	ReasonSynchronized                = "Synchronized"
	ReasonMonitoringApplyFailed       = "ApplyFailed"

	// The version path (internal/versionpath): the requested version is
	// refused and the running release is left as it is.
	ReasonUpgradeSkipsMinorVersion = "UpgradeSkipsMinorVersion"
	ReasonDowngradeNotSupported    = "DowngradeNotSupported"
	ReasonMajorVersionChange       = "MajorVersionChange"
	// ReasonStorageMigrationBlocked: a CRD of the new release drops a
	// version objects are stored at, and an object cannot be rewritten
	// (internal/storagemigration); nothing of the new release is applied.
	ReasonStorageMigrationBlocked = "StorageMigrationBlocked"
	// ReasonPassTimedOut: a pass of the operator did not finish within its
	// bound (a read that cannot finish, an API server that does not
	// answer); the message names the step. The next pass starts afresh.
	ReasonPassTimedOut = "PassTimedOut"
)

// Reasons of a refused adoption of an installation made by upstream's
// operator (internal/adopt); Synchronized is False and nothing else is set.
const (
	ReasonUpstreamOperatorRunning = "UpstreamOperatorRunning"
	ReasonAdoptionWouldUpgrade    = "AdoptionWouldUpgrade"
	ReasonAdoptionNotInCatalog    = "AdoptionNotInCatalog"
)
