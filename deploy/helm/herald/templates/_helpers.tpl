{{/*
Names and labels.
*/}}
{{- define "herald.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "herald.fullname" -}}
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

{{/* The labels that select one component (role, migrate, sim): (dict "root" $ "component" "relay"). */}}
{{- define "herald.selectorLabels" -}}
app.kubernetes.io/name: {{ include "herald.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "herald.labels" -}}
{{ include "herald.selectorLabels" . }}
app.kubernetes.io/part-of: herald
app.kubernetes.io/version: {{ include "herald.tag" .root | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "herald.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{- define "herald.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "herald.tag" .) }}
{{- end }}

{{/*
The secret of a role: its own existingSecret or the global one. One is required.
(dict "root" $ "role" .Values.relay)
*/}}
{{- define "herald.secret" -}}
{{- $name := default .root.Values.existingSecret .role.existingSecret }}
{{- required "existingSecret: the name of a Secret whose keys are HERALD_* variables (HERALD_DATABASE_URL at least)" $name }}
{{- end }}

{{/* The most dispatch processes at once: the autoscaler's maximum, or the replicas. */}}
{{- define "herald.dispatchMax" -}}
{{- $a := .Values.dispatch.autoscaling }}
{{- if $a.keda.enabled }}{{ $a.keda.maxReplicas }}
{{- else if $a.cpu.enabled }}{{ $a.cpu.maxReplicas }}
{{- else }}{{ .Values.dispatch.replicas }}
{{- end }}
{{- end }}

{{/* The most dispatch processes at once, HIGH's own Deployment included: while Redis is down
each takes limit/N of a provider's rate limit (--degraded-processes). */}}
{{- define "herald.dispatchProcesses" -}}
{{- $n := include "herald.dispatchMax" . | int }}
{{- if .Values.dispatchHigh.enabled }}{{ add $n .Values.dispatchHigh.replicas }}{{ else }}{{ $n }}{{ end }}
{{- end }}

{{/* Checks of the values that no schema states. */}}
{{- define "herald.validate" -}}
{{- if lt (int .Values.relay.replicas) 2 }}
{{- fail "relay.replicas: at least 2 (one leads, the others take over within a second when it goes)" }}
{{- end }}
{{- if and .Values.dispatch.autoscaling.keda.enabled .Values.dispatch.autoscaling.cpu.enabled }}
{{- fail "dispatch.autoscaling: keda and cpu cannot both be enabled (KEDA owns the HorizontalPodAutoscaler)" }}
{{- end }}
{{- if not .Values.kafka.brokers }}
{{- fail "kafka.brokers: the Kafka seed brokers (host:port)" }}
{{- end }}
{{- if not .Values.redis.addr }}
{{- fail "redis.addr: the Redis address (host:port)" }}
{{- end }}
{{- $reserved := list "HERALD_ROLES" "HERALD_HTTP_ADDR" "HERALD_ADMIN_ADDR" "HERALD_KAFKA_BROKERS" "HERALD_REDIS_ADDR" "HERALD_SHUTDOWN_TIMEOUT" "HERALD_DEGRADED_PROCESSES" "HERALD_LANES" "HERALD_INGEST_PRIORITIES" "HERALD_EVENTS_TOPIC" "HERALD_EVENTS_PARTITIONS" "HERALD_EVENTS_GROUP" }}
{{- range $p := list "HIGH" "NORMAL" "LOW" }}
{{- $reserved = concat $reserved (list (printf "HERALD_TOPIC_%s" $p) (printf "HERALD_PARTITIONS_%s" $p) (printf "HERALD_DISPATCH_GROUP_%s" $p)) }}
{{- end }}
{{- $configs := dict "config" .Values.config "ingest.config" .Values.ingest.config "relay.config" .Values.relay.config "dispatch.config" .Values.dispatch.config "dispatchHigh.config" .Values.dispatchHigh.config "events.config" .Values.events.config }}
{{- range $where, $config := $configs }}
{{- range $k, $v := $config }}
{{- if and (not (hasPrefix "HERALD_" $k)) (not (hasPrefix "OTEL_" $k)) }}
{{- fail (printf "%s.%s: only HERALD_* and OTEL_* variables" $where $k) }}
{{- end }}
{{- if has $k $reserved }}
{{- fail (printf "%s.%s is set by the chart (ports, kafka, redis, shutdownTimeoutSeconds, dispatch.autoscaling, dispatchHigh)" $where $k) }}
{{- end }}
{{- if and (eq $k "HERALD_WEBHOOK_ALLOW_LOOPBACK") (regexMatch "(?i)^(1|t|true)$" (toString $v)) }}
{{- fail (printf "%s.%s: in a pod, loopback is herald's own listeners (the admin port among them); webhook URLs must not reach it" $where $k) }}
{{- end }}
{{- include "herald.notInline" (dict "where" $where "key" $k "value" $v) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Credentials never go in config: config is rendered as plain env values of the Deployments,
readable by anyone who may read them. Refused: the settings herald marks secret (every
*_PASSWORD, *_SECRET and *_TOKEN variable, and HERALD_SENDGRID_API_KEY), and a
HERALD_DATABASE_URL that carries a password (user:password@ or password=).
(dict "where" "config" "key" $k "value" $v)
*/}}
{{- define "herald.notInline" -}}
{{- $secret := or (regexMatch "_(PASSWORD|SECRET|TOKEN)$" .key) (eq .key "HERALD_SENDGRID_API_KEY") }}
{{- if $secret }}
{{- fail (printf "%s.%s is a credential: put it in the Secret named by existingSecret, not in config (config is rendered in plain text)" .where .key) }}
{{- end }}
{{- if and (eq .key "HERALD_DATABASE_URL") (regexMatch "(?i)^[a-z][a-z0-9+.-]*://[^/?#@]*:[^/?#@]*@|(^|[\\s?&])password=" (toString .value)) }}
{{- fail (printf "%s.%s carries a password: put the URL in the Secret named by existingSecret (or the password in PGPASSWORD there), not in config (config is rendered in plain text)" .where .key) }}
{{- end }}
{{- end }}

{{/*
The environment of every herald container of a role: what the chart derives (the listeners,
the role, Kafka (the lanes' and the events' topics and groups) and Redis, the simulator's senders), then the role's config, then the global
config (the role's wins), then the role's secret (envFrom; a variable of env wins over it).
(dict "root" $ "role" .Values.relay "roles" "relay")
*/}}
{{- define "herald.env" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $env := dict
  "HERALD_HTTP_ADDR" (printf ":%d" (int $v.ports.http))
  "HERALD_ADMIN_ADDR" (printf ":%d" (int $v.ports.admin))
  "HERALD_KAFKA_BROKERS" (join "," $v.kafka.brokers)
  "HERALD_REDIS_ADDR" $v.redis.addr
  "HERALD_SHUTDOWN_TIMEOUT" (printf "%ds" (int $v.shutdownTimeoutSeconds))
  "HERALD_DEGRADED_PROCESSES" (include "herald.dispatchProcesses" $root)
}}
{{- if .lanes }}
{{- $_ := set $env "HERALD_LANES" .lanes }}
{{- end }}
{{- if .ingestPriorities }}
{{- $_ := set $env "HERALD_INGEST_PRIORITIES" .ingestPriorities }}
{{- end }}
{{- range $p := list "high" "normal" "low" }}
{{- $_ := set $env (printf "HERALD_TOPIC_%s" (upper $p)) (index $v.kafka.topics $p) }}
{{- $_ := set $env (printf "HERALD_PARTITIONS_%s" (upper $p)) (toString (index $v.kafka.partitions $p)) }}
{{- $_ := set $env (printf "HERALD_DISPATCH_GROUP_%s" (upper $p)) (index $v.kafka.groups $p) }}
{{- end }}
{{- $_ := set $env "HERALD_EVENTS_TOPIC" $v.kafka.topics.events }}
{{- $_ := set $env "HERALD_EVENTS_PARTITIONS" (toString $v.kafka.partitions.events) }}
{{- $_ := set $env "HERALD_EVENTS_GROUP" $v.kafka.groups.events }}
{{- if .roles }}
{{- $_ := set $env "HERALD_ROLES" .roles }}
{{- end }}
{{- if and $v.sim.enabled $v.sim.wireSenders (has "dispatch" (splitList "," .roles)) }}
{{- $sim := printf "%s-sim" (include "herald.fullname" $root) }}
{{- $_ := set $env "HERALD_SENDERS" "providers" }}
{{- $_ := set $env "HERALD_TWILIO_BASE_URL" (printf "http://%s:%d" $sim (int $v.sim.ports.http)) }}
{{- $_ := set $env "HERALD_TWILIO_ACCOUNT_SID" "ACsimulator" }}
{{- $_ := set $env "HERALD_TWILIO_AUTH_TOKEN" "sim-auth-token" }}
{{- $_ := set $env "HERALD_TWILIO_FROM" "+15005550006" }}
{{- $_ := set $env "HERALD_SMTP_ADDR" (printf "%s:%d" $sim (int $v.sim.ports.smtp)) }}
{{- $_ := set $env "HERALD_SMTP_FROM" "Herald <herald@herald.localhost>" }}
{{- $_ := set $env "HERALD_SMTP_TLS_POLICY" "none" }}
{{- end }}
{{- $env = merge $env (deepCopy (.role.config | default dict)) (deepCopy $v.config) }}
env:
{{- range $k := keys $env | sortAlpha }}
  - name: {{ $k }}
    value: {{ index $env $k | toString | quote }}
{{- end }}
envFrom:
  - secretRef:
      name: {{ include "herald.secret" . }}
{{- end }}

{{/* Volumes of every herald pod: /tmp and the secretFiles. */}}
{{- define "herald.volumes" -}}
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
{{- range $i, $s := .Values.secretFiles }}
  - name: {{ printf "secret-files-%d" $i }}
    secret:
      secretName: {{ $s.secretName }}
      defaultMode: 0440
{{- end }}
{{- end }}

{{- define "herald.volumeMounts" -}}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- range $i, $s := .Values.secretFiles }}
  - name: {{ printf "secret-files-%d" $i }}
    mountPath: {{ $s.mountPath }}
    readOnly: true
{{- end }}
{{- end }}

{{/* The pod-level settings every herald pod shares. */}}
{{- define "herald.podCommon" -}}
{{- $v := .Values }}
automountServiceAccountToken: false
{{- with $v.serviceAccountName }}
serviceAccountName: {{ . }}
{{- end }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $v.podSecurityContext | nindent 2 }}
{{- end }}

{{/* The probes, on the admin port. */}}
{{- define "herald.probes" -}}
{{- $p := .Values.probes }}
startupProbe:
  httpGet:
    path: /healthz
    port: admin
  periodSeconds: {{ $p.startup.periodSeconds }}
  failureThreshold: {{ $p.startup.failureThreshold }}
  timeoutSeconds: {{ $p.startup.timeoutSeconds }}
livenessProbe:
  httpGet:
    path: /healthz
    port: admin
  periodSeconds: {{ $p.liveness.periodSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
  timeoutSeconds: {{ $p.liveness.timeoutSeconds }}
readinessProbe:
  httpGet:
    path: /readyz
    port: admin
  periodSeconds: {{ $p.readiness.periodSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
  timeoutSeconds: {{ $p.readiness.timeoutSeconds }}
{{- end }}

{{/*
One role's Deployment: (dict "root" $ "name" "relay" "role" .Values.relay "replicas" N-or-nil
"strategy" dict "affinity" dict).
*/}}
{{- define "herald.deployment" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $sel := dict "root" $root "component" .name }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "herald.fullname" $root }}-{{ .name }}
  labels:
    {{- include "herald.labels" $sel | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" .replicas) }}
  replicas: {{ .replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "herald.selectorLabels" $sel | nindent 6 }}
  {{- with .strategy }}
  strategy:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  template:
    metadata:
      labels:
        {{- include "herald.labels" $sel | nindent 8 }}
      {{- with .role.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      {{- include "herald.podCommon" $root | nindent 6 }}
      terminationGracePeriodSeconds: {{ add (int $v.shutdownTimeoutSeconds) 10 }}
      containers:
        - name: herald
          image: {{ include "herald.image" $root | quote }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          args:
            - serve
          ports:
            - name: http
              containerPort: {{ $v.ports.http }}
              protocol: TCP
            - name: admin
              containerPort: {{ $v.ports.admin }}
              protocol: TCP
          {{- include "herald.env" (dict "root" $root "role" .role "roles" (.roles | default .name) "lanes" .lanes "ingestPriorities" .ingestPriorities) | nindent 10 }}
          {{- include "herald.probes" $root | nindent 10 }}
          resources:
            {{- toYaml .role.resources | nindent 12 }}
          securityContext:
            {{- toYaml $v.securityContext | nindent 12 }}
          {{- include "herald.volumeMounts" $root | nindent 10 }}
      {{- include "herald.volumes" $root | nindent 6 }}
      {{- with .role.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .role.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with (.role.affinity | default .affinity) }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .role.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}

{{/* A preferred anti-affinity: the pods of a component on different nodes. */}}
{{- define "herald.spreadNodes" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "herald.selectorLabels" . | nindent 12 }}
{{- end }}
