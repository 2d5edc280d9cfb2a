{{/*
An image of this chart: (list $ "name") -> [<registry>/]<name>:<tag or appVersion>.
*/}}
{{- define "tinyhost.image" -}}
{{- $root := index . 0 -}}
{{- with $root.Values.image.registry }}{{ trimSuffix "/" . }}/{{ end }}{{ index . 1 }}:{{ $root.Values.image.tag | default $root.Chart.AppVersion }}
{{- end }}
