package strategystore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Defaults of a Runner.
const (
	// DefaultBaseBackoff is the wait after the first failed Job; it doubles
	// with every further failure up to DefaultMaxBackoff.
	DefaultBaseBackoff = 10 * time.Second
	DefaultMaxBackoff  = 5 * time.Minute
	// DefaultConfigMapGrace is how long a succeeded Job's ConfigMap may take
	// to show up before the Job counts as failed.
	DefaultConfigMapGrace = 30 * time.Second
	// runningRecheck re-reads a running Job's pods: their events are not
	// watched, so an unschedulable pod is noticed by this requeue.
	runningRecheck = 15 * time.Second
	// deletionRecheck waits for a deleted Job to go away.
	deletionRecheck = 2 * time.Second
	// untrustedKeyRecheck looks again at a signing key Secret the operator
	// did not create (its deletion also wakes the reconciler).
	untrustedKeyRecheck = 30 * time.Second
)

// State is how the strategy Job of a deployment is doing.
type State struct {
	// Pending says what the strategy waits for; Failed why the last
	// attempt failed (it is retried after RequeueAfter) or why no Job can
	// run, with FailedReason as the condition reason then (empty means
	// StrategyJobFailed).
	Pending      string
	Failed       string
	FailedReason string
	RequeueAfter time.Duration
}

// Runner drives the dump-install-strategy Job for the Store.
type Runner struct {
	// Client writes Jobs.
	Client client.Client
	// Reader reads Jobs, their Pods and the strategy ConfigMap without a
	// cache: Ensure runs only while a strategy is pending, and a stale read
	// there would create or delete a Job twice.
	Reader client.Reader
	// Image is the virtop image that renders the strategy (--strategy-image).
	Image string
	// Clock is injectable for tests.
	Clock clock.PassiveClock
	// BaseBackoff, MaxBackoff and ConfigMapGrace default to the constants.
	BaseBackoff, MaxBackoff, ConfigMapGrace time.Duration

	mu sync.Mutex
	// attempts by deployment ID; only the current target's is kept.
	attempts map[string]*attempts
}

// attempts remembers the failures of one deployment ID's Jobs, across the
// deletion of each failed Job.
type attempts struct {
	failures int
	lastAt   time.Time
	lastJob  types.UID
	message  string
	// trouble is the last pod problem seen while a Job ran (an
	// unschedulable pod, an image that cannot be pulled), kept because the
	// pods are gone once the Job fails on its deadline.
	trouble string
}

// NewRunner returns a Runner with the default back-off.
func NewRunner(c client.Client, reader client.Reader, image string) *Runner {
	return &Runner{Client: c, Reader: reader, Image: image, Clock: clock.RealClock{}}
}

func (r *Runner) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *Runner) backoff(failures int) time.Duration {
	base, max := r.BaseBackoff, r.MaxBackoff
	if base <= 0 {
		base = DefaultBaseBackoff
	}
	if max <= 0 {
		max = DefaultMaxBackoff
	}
	d := base
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

// Ensure makes progress towards the strategy ConfigMap of cfg: it creates
// the Job, waits for it, replaces a failed one after a back-off, and says
// how things stand. The caller calls it only while the ConfigMap is missing.
func (r *Runner) Ensure(ctx context.Context, kv *kvv1.KubeVirt, cfg *config.DeploymentConfig) (State, error) {
	log := ctrl.LoggerFrom(ctx)
	ns, name := cfg.Namespace, Name(cfg.ID)
	r.mu.Lock()
	a := r.attemptsForLocked(cfg.ID)
	r.mu.Unlock()

	if err := r.deleteJobs(ctx, ns, func(j *batchv1.Job) bool { return jobID(j) != cfg.ID }); err != nil {
		return State{}, err
	}

	job := &batchv1.Job{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
	if apierrors.IsNotFound(err) {
		if a.failures > 0 {
			if wait := a.lastAt.Add(r.backoff(a.failures)).Sub(r.now()); wait > 0 {
				return State{
					Pending:      fmt.Sprintf("Retrying the install strategy Job for %s in %s (%s)", cfg.Version, wait.Round(time.Second), attemptsWord(a.failures)),
					Failed:       a.message,
					RequeueAfter: wait,
				}, nil
			}
		}
		if r.Image == "" {
			return State{}, errors.New("no strategy image is set (--strategy-image)")
		}
		if err := r.ensureKey(ctx, kv); err != nil {
			var untrusted *UntrustedKeyError
			if errors.As(err, &untrusted) {
				ctrl.LoggerFrom(ctx).Info("Not running the install strategy Job: the signing key Secret is not this operator's", "secret", untrusted.Secret.String())
				return State{
					Pending:      fmt.Sprintf("Waiting for the install strategy of %s: no Job runs while the signing key is untrusted", cfg.Version),
					Failed:       untrusted.Error(),
					FailedReason: kvv1.ReasonStrategySigningKeyUntrusted,
					RequeueAfter: untrustedKeyRecheck,
				}, nil
			}
			return State{}, err
		}
		job = Job(cfg, r.Image)
		if err := r.Client.Create(ctx, job, client.FieldOwner(vocab.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return State{}, fmt.Errorf("create install strategy Job %s: %w", name, err)
		}
		log.Info("Created install strategy Job", "job", name, "version", cfg.Version, "image", r.Image, "attempt", a.failures+1)
		return State{Pending: waitingMessage(cfg, name), Failed: a.message, RequeueAfter: runningRecheck}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("get install strategy Job %s: %w", name, err)
	}

	if job.DeletionTimestamp != nil {
		return State{
			Pending:      fmt.Sprintf("Waiting for the previous install strategy Job %s to be deleted", name),
			Failed:       a.message,
			RequeueAfter: deletionRecheck,
		}, nil
	}
	if id := jobID(job); id != cfg.ID {
		// Same name prefix, another deployment: not ours to wait for.
		if err := r.deleteJob(ctx, job); err != nil {
			return State{}, err
		}
		return State{Pending: waitingMessage(cfg, name), Failed: a.message, RequeueAfter: deletionRecheck}, nil
	}

	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		msg := fmt.Sprintf("Install strategy Job %s for %s failed", name, cfg.Version)
		if c.Reason != "" {
			msg += ": " + c.Reason
		}
		if c.Message != "" {
			msg += " (" + c.Message + ")"
		}
		if detail := r.podTrouble(ctx, job); detail != "" {
			msg += "; " + detail
		} else if a.trouble != "" {
			msg += "; " + a.trouble
		}
		return r.failed(ctx, a, job, cfg, msg)
	}
	if c := jobCondition(job, batchv1.JobComplete); c != nil {
		cm := &corev1.ConfigMap{}
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: strategy.ConfigMapName(cfg.ID)}, cm)
		if err == nil {
			// The cache lags behind; the ConfigMap's event wakes the
			// reconciler again.
			return State{Pending: fmt.Sprintf("Loading the install strategy of %s written by Job %s", cfg.Version, name), RequeueAfter: time.Second}, nil
		}
		if !apierrors.IsNotFound(err) {
			return State{}, err
		}
		done := c.LastTransitionTime.Time
		if job.Status.CompletionTime != nil {
			done = job.Status.CompletionTime.Time
		}
		grace := r.ConfigMapGrace
		if grace <= 0 {
			grace = DefaultConfigMapGrace
		}
		if wait := done.Add(grace).Sub(r.now()); wait > 0 {
			return State{Pending: fmt.Sprintf("Job %s succeeded; waiting for ConfigMap %s", name, strategy.ConfigMapName(cfg.ID)), Failed: a.message, RequeueAfter: wait}, nil
		}
		return r.failed(ctx, a, job, cfg, fmt.Sprintf("Install strategy Job %s for %s succeeded but ConfigMap %s did not appear within %s", name, cfg.Version, strategy.ConfigMapName(cfg.ID), grace))
	}

	// Running (or waiting for a pod).
	msg := waitingMessage(cfg, name)
	if detail := r.podTrouble(ctx, job); detail != "" {
		r.mu.Lock()
		a.trouble = detail
		r.mu.Unlock()
		msg += ": " + detail
	}
	return State{Pending: msg, Failed: a.message, RequeueAfter: runningRecheck}, nil
}

// attemptsForLocked returns the record of an ID, forgetting every other
// ID's. r.mu is held.
func (r *Runner) attemptsForLocked(id string) *attempts {
	a := r.attempts[id]
	if a == nil {
		a = &attempts{}
	}
	r.attempts = map[string]*attempts{id: a}
	return a
}

// failed records a failed Job once, deletes it so a later pass creates a
// new one, and reports the failure with the wait before the next attempt.
func (r *Runner) failed(ctx context.Context, a *attempts, job *batchv1.Job, cfg *config.DeploymentConfig, msg string) (State, error) {
	r.mu.Lock()
	if a.lastJob != job.UID {
		a.failures++
		a.lastAt = r.now()
		a.lastJob = job.UID
	}
	a.message = msg
	a.trouble = ""
	failures, wait := a.failures, a.lastAt.Add(r.backoff(a.failures)).Sub(r.now())
	r.mu.Unlock()
	ctrl.LoggerFrom(ctx).Info("Install strategy Job failed; it will be retried", "job", job.Name, "reason", msg, "failures", failures, "retryIn", wait.String())
	if err := r.deleteJob(ctx, job); err != nil {
		return State{}, err
	}
	if wait < deletionRecheck {
		wait = deletionRecheck
	}
	return State{
		Pending:      fmt.Sprintf("Retrying the install strategy Job for %s in %s (%s)", cfg.Version, wait.Round(time.Second), attemptsWord(failures)),
		Failed:       msg,
		RequeueAfter: wait,
	}, nil
}

// Done is called once the strategy of cfg has loaded from its ConfigMap:
// it deletes every strategy Job of the namespace and forgets the failures
// of cfg. The controller calls it once per loaded strategy, often before
// the Job that wrote the ConfigMap has been marked complete, so that Job
// goes too (its pod has done its work; upstream deletes only completed
// Jobs but looks again on every sync).
func (r *Runner) Done(ctx context.Context, kv *kvv1.KubeVirt, cfg *config.DeploymentConfig) error {
	r.mu.Lock()
	delete(r.attempts, cfg.ID)
	r.mu.Unlock()
	return r.deleteJobs(ctx, cfg.Namespace, func(*batchv1.Job) bool { return true })
}

// deleteJobs deletes the strategy Jobs of a namespace that match.
func (r *Runner) deleteJobs(ctx context.Context, ns string, match func(*batchv1.Job) bool) error {
	var list batchv1.JobList
	if err := r.Reader.List(ctx, &list, client.InNamespace(ns), client.HasLabels{vocab.InstallStrategyLabel},
		client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		return fmt.Errorf("list install strategy Jobs: %w", err)
	}
	var errs []error
	for i := range list.Items {
		j := &list.Items[i]
		if j.DeletionTimestamp != nil || !match(j) {
			continue
		}
		if err := r.deleteJob(ctx, j); err != nil {
			errs = append(errs, err)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleted install strategy Job", "job", j.Name)
	}
	return errors.Join(errs...)
}

// deleteJob deletes a Job and, before it goes, its pods (foreground), as
// upstream does; the deterministic name is free again only then.
func (r *Runner) deleteJob(ctx context.Context, job *batchv1.Job) error {
	err := r.Client.Delete(ctx, job, client.PropagationPolicy("Foreground"), client.Preconditions{UID: &job.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete install strategy Job %s: %w", job.Name, err)
	}
	return nil
}

// podTrouble describes what keeps the Job's newest pod from running or
// made it fail: unschedulable, an image that cannot be pulled, a container
// that exited with an error, or no pod at all because the Job's
// ServiceAccount is missing (the Job controller cannot create one). Empty
// when there is nothing to say or the pods cannot be read.
func (r *Runner) podTrouble(ctx context.Context, job *batchv1.Job) string {
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Cannot read the install strategy Job's pods", "job", job.Name, "error", err.Error())
		return ""
	}
	if len(pods.Items) == 0 {
		return r.accountTrouble(ctx, job)
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[j].CreationTimestamp.Before(&pods.Items[i].CreationTimestamp)
	})
	for i := range pods.Items {
		if s := PodTrouble(&pods.Items[i]); s != "" {
			return s
		}
	}
	return ""
}

// accountTrouble says that the Job's ServiceAccount is missing (an
// operator upgraded without the RBAC of its release): the Job controller
// then creates no pod and the Job would wait for its deadline. Empty when
// the account exists or cannot be read.
func (r *Runner) accountTrouble(ctx context.Context, job *batchv1.Job) string {
	name := job.Spec.Template.Spec.ServiceAccountName
	if name == "" {
		return ""
	}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: name}, &corev1.ServiceAccount{})
	if !apierrors.IsNotFound(err) {
		return ""
	}
	return fmt.Sprintf("no pod can be created: ServiceAccount %s/%s does not exist; apply the RBAC of this virtop release "+
		"(config/rbac, dist/virtop-operator.yaml or the Helm chart), which ships it with its Role", job.Namespace, name)
}

// PodTrouble describes what is wrong with one pod of the Job, or "".
func PodTrouble(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("pod %s cannot be scheduled (%s): %s", p.Name, c.Reason, oneLine(c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return fmt.Sprintf("pod %s: container %s is waiting (%s): %s", p.Name, cs.Name, w.Reason, oneLine(w.Message))
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			s := fmt.Sprintf("pod %s: container %s exited with code %d (%s)", p.Name, cs.Name, t.ExitCode, t.Reason)
			if m := oneLine(t.Message); m != "" {
				s += ": " + m
			}
			return s
		}
	}
	return ""
}

// oneLine keeps the last meaningful line of a message (a termination
// message falls back to the log's tail), bounded in length.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	s = strings.TrimSpace(lines[len(lines)-1])
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func jobID(j *batchv1.Job) string {
	return j.Annotations[vocab.InstallStrategyIdentifierAnnotation]
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func waitingMessage(cfg *config.DeploymentConfig, name string) string {
	return fmt.Sprintf("Waiting for the install strategy of %s from Job %s", cfg.Version, name)
}

func attemptsWord(n int) string {
	if n == 1 {
		return "1 attempt failed"
	}
	return fmt.Sprintf("%d attempts failed", n)
}

// ensureKey makes sure the strategy signing key Secret is the one this
// operator created: when it is missing, a new key (32 random bytes,
// hex-encoded, owned by the KubeVirt resource so it goes with it) is
// created, its fingerprint recorded first in the KubeVirt resource's
// status (RecordKey), which only the operator writes; when it exists, its
// fingerprint must be the recorded one, else it is an
// *UntrustedKeyError: a key someone else created before the operator
// (whoever may create Secrets in the install namespace, KubeVirt's own
// virt-controller among them) would let them sign strategies. The Secret
// carries the strategy label, which keeps prune and uninstall from taking
// it for a control plane object.
func (r *Runner) ensureKey(ctx context.Context, kv *kvv1.KubeVirt) error {
	key := client.ObjectKey{Namespace: kv.Namespace, Name: vocab.StrategySigningKeySecret}
	live := &corev1.Secret{}
	err := r.Reader.Get(ctx, key, live)
	if err == nil {
		return checkKey(kv, live)
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	value := []byte(hex.EncodeToString(raw))
	// The record comes first: a crash between the two writes leaves a
	// record of a key that never existed, replaced on the next pass, and
	// never a key without its record.
	if err := r.recordKey(ctx, kv, value); err != nil {
		return fmt.Errorf("record the strategy signing key's fingerprint in the KubeVirt status: %w", err)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      key.Name,
			Namespace: key.Namespace,
			Labels:    map[string]string{vocab.InstallStrategyLabel: "", vocab.ManagedByLabel: vocab.ManagedByValue},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{vocab.StrategySigningKeyKey: value},
	}
	if kv.UID != "" {
		sec.OwnerReferences = []metav1.OwnerReference{{APIVersion: kvv1.GroupVersion.String(), Kind: "KubeVirt", Name: kv.Name, UID: kv.UID}}
	}
	if err := r.Client.Create(ctx, sec, client.FieldOwner(vocab.FieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Someone created it between the read and the create: it is
			// not the recorded key.
			return &UntrustedKeyError{Secret: key}
		}
		return fmt.Errorf("create the strategy signing key Secret %s: %w", key, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created the strategy signing key", "secret", key.String())
	return nil
}

// UntrustedKeyError says the signing key Secret is not the one this
// operator created for the KubeVirt resource.
type UntrustedKeyError struct {
	Secret client.ObjectKey
}

func (e *UntrustedKeyError) Error() string {
	return fmt.Sprintf("Secret %s was not created by this operator (the fingerprint of its key is not the one recorded in the KubeVirt status), "+
		"so strategies signed with it are not trusted; delete it and the operator creates its own", e.Secret)
}

// keyRecordHashPrefix starts the fingerprint recorded in status.generations.
const keyRecordHashPrefix = "sha256:"

// KeyFingerprint is what the KubeVirt status records of a signing key: the
// SHA-256 of the Secret's value (a one-way digest of 32 random bytes, so
// publishing it in the status reveals nothing of the key).
func KeyFingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return keyRecordHashPrefix + hex.EncodeToString(sum[:])
}

// isKeyRecord says whether g is the signing key's record of namespace ns.
func isKeyRecord(g kvv1.GenerationStatus, ns string) bool {
	return g.Group == "" && g.Resource == "secrets" && g.Namespace == ns && g.Name == vocab.StrategySigningKeySecret
}

// RecordKey records key's fingerprint in kv's status.generations (upstream's
// list of the objects its operator created, with their hash), in memory.
// The status subresource is written only by its writers (cluster admins,
// the operator, KubeVirt's virt-controller, whose upstream ClusterRole
// holds kubevirt.io/*): editing the resource's spec does not give access
// to its status.
func RecordKey(kv *kvv1.KubeVirt, key []byte) {
	rec := kvv1.GenerationStatus{Resource: "secrets", Namespace: kv.Namespace, Name: vocab.StrategySigningKeySecret, Hash: KeyFingerprint(key)}
	gens := slices.DeleteFunc(slices.Clone(kv.Status.Generations), func(g kvv1.GenerationStatus) bool { return isKeyRecord(g, kv.Namespace) })
	kv.Status.Generations = append(gens, rec)
}

// recordedKey is the fingerprint kv's status records, or "".
func recordedKey(kv *kvv1.KubeVirt) string {
	for _, g := range kv.Status.Generations {
		if isKeyRecord(g, kv.Namespace) {
			return g.Hash
		}
	}
	return ""
}

// checkKey says whether sec holds the key whose fingerprint kv records.
func checkKey(kv *kvv1.KubeVirt, sec *corev1.Secret) error {
	rec := recordedKey(kv)
	if rec == "" || subtle.ConstantTimeCompare([]byte(rec), []byte(KeyFingerprint(sec.Data[vocab.StrategySigningKeyKey]))) != 1 {
		return &UntrustedKeyError{Secret: client.ObjectKeyFromObject(sec)}
	}
	return nil
}

// recordKey writes key's record into the KubeVirt status before the key
// exists, and updates kv (its resourceVersion and status.generations) so
// the pass's own status write follows on from it. The patch holds the
// resourceVersion kv was read at: a concurrent change fails it, and the
// pass is retried.
func (r *Runner) recordKey(ctx context.Context, kv *kvv1.KubeVirt, key []byte) error {
	base := kv.DeepCopy()
	cur := kv.DeepCopy()
	RecordKey(cur, key)
	if err := r.Client.Status().Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(vocab.StatusFieldManager)); err != nil {
		return err
	}
	kv.ResourceVersion = cur.ResourceVersion
	kv.Status.Generations = cur.Status.Generations
	return nil
}

// Verify says whether cm was written by this operator's strategy Job: its
// signature checks with the key of the install namespace's Secret, and
// that key is the one the operator created for kv (its fingerprint is the
// one kv's status records). A ConfigMap that fails is never decoded.
func (r *Runner) Verify(ctx context.Context, kv *kvv1.KubeVirt, cm *corev1.ConfigMap) error {
	sec := &corev1.Secret{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: vocab.StrategySigningKeySecret}, sec)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("there is no signing key (Secret %s/%s), so virtop's strategy Job did not write it", cm.Namespace, vocab.StrategySigningKeySecret)
	}
	if err != nil {
		return err
	}
	if err := checkKey(kv, sec); err != nil {
		return err
	}
	return strategy.CheckSignature(cm, sec.Data[vocab.StrategySigningKeyKey])
}
