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
	ReasonAllComponentsReady    = "AllComponentsReady"
	ReasonAllResourcesCreated   = "AllResourcesCreated"
	ReasonDeploymentInProgress  = "DeploymentInProgress"
	ReasonUpdateInProgress      = "UpdateInProgress"
	ReasonDeploymentFailed      = "DeploymentFailed"
	ReasonInvalidConfiguration  = "InvalidConfiguration"
	ReasonStrategyPending       = "StrategyPending"
	ReasonStrategyJobFailed     = "StrategyJobFailed"
	ReasonExistingDeployment    = "ExistingDeployment"
	ReasonDeletionInProgress    = "DeletionInProgress"
	ReasonDeletionBlocked       = "DeletionBlocked"
	ReasonDeletionFailed        = "DeletionFailed"
	ReasonNoErrors              = "NoErrors"
	ReasonSynchronized          = "Synchronized"
	ReasonMonitoringApplyFailed = "ApplyFailed"
)

// Reasons of a refused adoption of an installation made by upstream's
// operator (internal/adopt); Synchronized is False and nothing else is set.
const (
	ReasonUpstreamOperatorRunning = "UpstreamOperatorRunning"
	ReasonAdoptionWouldUpgrade    = "AdoptionWouldUpgrade"
	ReasonAdoptionNotInCatalog    = "AdoptionNotInCatalog"
)
