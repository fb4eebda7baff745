{{/* The chart's name. */}}
{{- define "bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The full name of the release's objects. */}}
{{- define "bridge.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "bridge.labels" -}}
{{ include "bridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "bridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "bridge.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Where the pod mounts what the bridge reads. */}}
{{- define "bridge.root" -}}/etc/grpc-jsonrpc-bridge{{- end -}}

{{/* The replicas the pods number at least: the autoscaler's minimum, or replicas. */}}
{{- define "bridge.minReplicas" -}}
{{- if .Values.autoscaling.enabled -}}{{ .Values.autoscaling.minReplicas }}{{- else -}}{{ .Values.replicas }}{{- end -}}
{{- end -}}

{{/*
The JWT settings of one provider (auth.jwt or an entry of
auth.jwt_providers) as the bridge's keys, only those set. The argument is
a dict: p, the provider's values; dir, where its key set is mounted.
*/}}
{{- define "bridge.jwtProvider" -}}
{{- $p := .p -}}
{{- $out := dict "issuer" $p.issuer -}}
{{- range $k := list "audiences" "jwks_url" "ca_file" "algorithms" "clock_skew" "jwks_refresh" "claims_metadata" "scopes" -}}
{{- if index $p $k -}}{{- $_ := set $out $k (index $p $k) -}}{{- end -}}
{{- end -}}
{{- if and $p.jwks (or $p.jwks.secret $p.jwks.configMap) -}}
{{- $_ := set $out "jwks_file" (printf "%s/%s" .dir (default "jwks.json" $p.jwks.key)) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The JWT providers with a key set to mount: a list of dicts name, p. */}}
{{- define "bridge.jwksVolumes" -}}
{{- $out := list -}}
{{- if .Values.auth.jwt.issuer -}}
{{- $out = append $out (dict "name" "jwks-0" "p" .Values.auth.jwt) -}}
{{- end -}}
{{- range $i, $p := .Values.auth.jwt_providers -}}
{{- $out = append $out (dict "name" (printf "jwks-%d" (add1 $i)) "p" $p) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The bridge's configuration file, bridge.yaml. */}}
{{- define "bridge.config" -}}
{{- $root := include "bridge.root" . -}}
{{- $c := deepCopy .Values.config -}}
{{- $_ := set $c "listen" (printf "0.0.0.0:%d" (int .Values.port)) -}}
{{- $_ := set $c "shutdown_delay" (printf "%ds" (int .Values.shutdown.delaySeconds)) -}}
{{- $_ := set $c "shutdown_timeout" (printf "%ds" (int .Values.shutdown.timeoutSeconds)) -}}
{{- $backends := list -}}
{{- range .Values.backends -}}
{{- $b := omit . "tls" -}}
{{- if hasKey . "tls" -}}
{{- $t := dict -}}
{{- $dir := printf "%s/backend-%s" $root .name -}}
{{- $tls := .tls | default dict -}}
{{- if $tls.ca_file -}}{{- $_ := set $t "ca_file" (printf "%s/%s" $dir $tls.ca_file) -}}{{- end -}}
{{- if $tls.cert_file -}}{{- $_ := set $t "cert_file" (printf "%s/%s" $dir $tls.cert_file) -}}{{- end -}}
{{- if $tls.key_file -}}{{- $_ := set $t "key_file" (printf "%s/%s" $dir $tls.key_file) -}}{{- end -}}
{{- if $tls.server_name -}}{{- $_ := set $t "server_name" $tls.server_name -}}{{- end -}}
{{- $_ := set $b "tls" $t -}}
{{- end -}}
{{- $backends = append $backends $b -}}
{{- end -}}
{{- $_ := set $c "backends" $backends -}}
{{- $auth := dict "identity_metadata_key" .Values.auth.identity_metadata_key -}}
{{- $ids := .Values.auth.identities -}}
{{- if or $ids.secret $ids.configMap -}}
{{- $_ := set $auth "file" (printf "%s/auth/%s" $root $ids.key) -}}
{{- end -}}
{{- if .Values.auth.jwt.issuer -}}
{{- $_ := set $auth "jwt" (include "bridge.jwtProvider" (dict "p" .Values.auth.jwt "dir" (printf "%s/jwks-0" $root)) | fromYaml) -}}
{{- end -}}
{{- if .Values.auth.jwt_providers -}}
{{- $ps := list -}}
{{- range $i, $p := .Values.auth.jwt_providers -}}
{{- $ps = append $ps (include "bridge.jwtProvider" (dict "p" $p "dir" (printf "%s/jwks-%d" $root (add1 $i))) | fromYaml) -}}
{{- end -}}
{{- $_ := set $auth "jwt_providers" $ps -}}
{{- end -}}
{{- if .Values.auth.resource -}}{{- $_ := set $auth "resource" .Values.auth.resource -}}{{- end -}}
{{- $_ := set $c "auth" $auth -}}
{{- if .Values.rateLimitStore.url -}}
{{- $_ := set $c "rate_limit_store" .Values.rateLimitStore.url -}}
{{- end -}}
{{- if .Values.rateLimitStore.passwordSecret.name -}}
{{- $_ := set $c "rate_limit_store_password_file" (printf "%s/store/%s" $root .Values.rateLimitStore.passwordSecret.key) -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}
