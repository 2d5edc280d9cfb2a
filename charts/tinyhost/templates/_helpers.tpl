{{/*
An image of this chart: (list $ "name") -> [<registry>/]<name>:<tag or appVersion>.
*/}}
{{- define "tinyhost.image" -}}
{{- $root := index . 0 -}}
{{- with $root.Values.image.registry }}{{ trimSuffix "/" . }}/{{ end }}{{ index . 1 }}:{{ $root.Values.image.tag | default $root.Chart.AppVersion }}
{{- end }}

{{/*
The Secret of nats.external the hosts mount, "" when they need none: with
ca, clientCert or creds set, secretName is required.
*/}}
{{- define "tinyhost.natsSecret" -}}
{{- with .Values.nats.external }}
{{- if and .url (or .ca .clientCert .creds) }}
{{- required "nats.external.secretName: the Secret holding ca.crt, tls.crt and tls.key, or nats.creds" .secretName }}
{{- end }}
{{- end }}
{{- end }}
