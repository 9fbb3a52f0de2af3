{{/* The chart's name, or nameOverride. */}}
{{- define "lockstream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-lockstream, or the release name alone when it already says lockstream. */}}
{{- define "lockstream.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The headless Service's name (the StatefulSet's governing Service). */}}
{{- define "lockstream.headlessName" -}}
{{- printf "%s-headless" (include "lockstream.fullname" . | trunc 54 | trimSuffix "-") }}
{{- end }}

{{- define "lockstream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lockstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "lockstream.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "lockstream.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: lock-server
{{- end }}

{{- define "lockstream.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Secret holding the ZooKeeper connect string (and digest), or nothing: embedded store. */}}
{{- define "lockstream.zookeeperSecret" -}}
{{- if .Values.zookeeper.existingSecret }}
{{- .Values.zookeeper.existingSecret }}
{{- else if .Values.zookeeper.connectString }}
{{- printf "%s-zookeeper" (include "lockstream.fullname" .) }}
{{- end }}
{{- end }}

{{/* The key of the digest in that Secret, or nothing: no ZooKeeper authentication. */}}
{{- define "lockstream.digestKey" -}}
{{- if .Values.zookeeper.existingSecret }}
{{- .Values.zookeeper.digestKey }}
{{- else if and .Values.zookeeper.connectString .Values.zookeeper.digest }}
{{- "digest" }}
{{- end }}
{{- end }}

{{/*
A lockstream duration ("5s", "1m", "500ms", "1h") in whole seconds, rounded up; -1 for a form
this does not read (the grace-period check is then skipped).
*/}}
{{- define "lockstream.seconds" -}}
{{- $d := toString . | trim }}
{{- $match := regexFindAll "^([0-9]+(\\.[0-9]+)?) ?(ms|s|m|h)$" $d 1 }}
{{- if not $match }}
{{- -1 }}
{{- else }}
{{- $n := regexFind "^[0-9]+(\\.[0-9]+)?" $d | float64 }}
{{- $unit := regexFind "(ms|s|m|h)$" $d }}
{{- $scale := dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- mulf $n (get $scale $unit) | ceil | int }}
{{- end }}
{{- end }}

{{/*
The longest a SIGTERM hand-over can take, in seconds, with the preStop sleep, drain-delay (if
set: unready but serving before the hand-over) and a margin of 10 s for ZooKeeper's answers and
the exit; -1 when a duration is in a form the chart does not read.
*/}}
{{- define "lockstream.handOverSeconds" -}}
{{- $drain := include "lockstream.seconds" (index .Values.config "drain-delay" | default "0s") | int }}
{{- $shutdown := include "lockstream.seconds" (index .Values.config "shutdown-grace" | default "5s") | int }}
{{- $resume := include "lockstream.seconds" (index .Values.config "max-resume-grace" | default "60s") | int }}
{{- if or (lt $drain 0) (lt $shutdown 0) (lt $resume 0) }}
{{- -1 }}
{{- else }}
{{- add (int .Values.preStopSleepSeconds) $drain $shutdown $resume 10 }}
{{- end }}
{{- end }}

{{/* terminationGracePeriodSeconds: the value given (checked), or the hand-over's longest. */}}
{{- define "lockstream.terminationGracePeriodSeconds" -}}
{{- $needed := include "lockstream.handOverSeconds" . | int }}
{{- $given := .Values.terminationGracePeriodSeconds }}
{{- if kindIs "invalid" $given }}
{{- if lt $needed 0 }}
{{- fail "terminationGracePeriodSeconds: set it: drain-delay, shutdown-grace or max-resume-grace is in a form the chart cannot add up (use ms, s, m or h)" }}
{{- end }}
{{- $needed }}
{{- else }}
{{- if and (ge $needed 0) (lt (int $given) $needed) }}
{{- fail (printf "terminationGracePeriodSeconds %d is shorter than a hand-over can take: preStopSleepSeconds + drain-delay + shutdown-grace + max-resume-grace + 10 = %d; SIGKILL would cut it and the sessions nobody took over yet would be lost" (int $given) $needed) }}
{{- end }}
{{- int $given }}
{{- end }}
{{- end }}

{{/* Refuses what cannot work: several instances on the embedded store, chart-owned config keys. */}}
{{- define "lockstream.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not (include "lockstream.zookeeperSecret" .)) }}
{{- fail "replicaCount > 1 needs ZooKeeper (zookeeper.connectString or zookeeper.existingSecret): on the embedded store each instance would hold locks of its own" }}
{{- end }}
{{- range $key := list "host" "port" "http-host" "http-port" "zookeeper" "zookeeper-digest-file" "tls-cert" "tls-key" "tls-client-ca" "auth-file" "config" }}
{{- if hasKey $.Values.config $key }}
{{- fail (printf "config.%s is set by the chart (see values.yaml): remove it from config" $key) }}
{{- end }}
{{- end }}
{{- if and .Values.tls.clientCA (not .Values.tls.secretName) }}
{{- fail "tls.clientCA needs tls.secretName" }}
{{- end }}
{{- end }}
