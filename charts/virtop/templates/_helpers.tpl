{{/* The chart's name and version, as the helm.sh/chart label wants them. */}}
{{- define "virtop.chart" -}}
{{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/*
The standard labels of every object the chart renders, plus
commonLabels. Selectors stay upstream's (kubevirt.io: virt-operator):
they are immutable, and upstream's alerts and runbooks select on them.
*/}}
{{- define "virtop.labels" -}}
helm.sh/chart: {{ include "virtop.chart" . }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The operator image: repository@digest when image.digest is set (tag@digest
when a tag is set too), else repository:tag, the tag defaulting to the
chart's appVersion, the virtop release the chart was cut from.
*/}}
{{- define "virtop.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{- if .Values.image.tag -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- end -}}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}
