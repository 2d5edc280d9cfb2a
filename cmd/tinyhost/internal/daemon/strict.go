package daemon

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Kubernetes' rules for names and labels (k8s.io/apimachinery's
// validation, written out: the daemon links no Kubernetes package for
// them). A host's name is its TinyHost's when it registers, and its
// labels are what placement selects on: what Kubernetes would refuse is
// refused at start.
var (
	dns1123Label = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	subdomainRE  = regexp.MustCompile(`^` + dns1123Label + `(\.` + dns1123Label + `)*$`)
	labelNameRE  = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
)

const (
	maxSubdomain  = 253
	maxLabelName  = 63
	maxHostLabels = 64 // not Kubernetes': Info carries them all, every call
)

// checkName checks the host's name: a DNS subdomain (RFC 1123).
func checkName(name string) []string {
	if len(name) <= maxSubdomain && subdomainRE.MatchString(name) {
		return nil
	}
	return []string{fmt.Sprintf("name %.80q is not a DNS subdomain (RFC 1123): 1 to %d characters of lowercase letters, digits, '-' and '.', "+
		"starting and ending with a letter or digit", name, maxSubdomain)}
}

// checkLabels checks the host's labels as Kubernetes checks a label: a
// key [prefix/]name, the prefix a DNS subdomain, the name and the value at
// most 63 characters of letters, digits, '-', '_' and '.', starting and
// ending with a letter or digit (a value may be empty).
func checkLabels(labels map[string]string) []string {
	var errs []string
	if len(labels) > maxHostLabels {
		errs = append(errs, fmt.Sprintf("%d labels, at most %d", len(labels), maxHostLabels))
	}
	for k, v := range labels {
		name := k
		if prefix, rest, ok := strings.Cut(k, "/"); ok {
			name = rest
			if len(prefix) > maxSubdomain || !subdomainRE.MatchString(prefix) {
				errs = append(errs, fmt.Sprintf("label key %.80q: the prefix is not a DNS subdomain (RFC 1123)", k))
				continue
			}
		}
		if len(name) > maxLabelName || !labelNameRE.MatchString(name) {
			errs = append(errs, fmt.Sprintf("label key %.80q is not [prefix/]name, the name 1 to %d characters of letters, digits, '-', '_' and '.', "+
				"starting and ending with a letter or digit", k, maxLabelName))
			continue
		}
		if v != "" && (len(v) > maxLabelName || !labelNameRE.MatchString(v)) {
			errs = append(errs, fmt.Sprintf("label %s: value %.80q is not at most %d characters of letters, digits, '-', '_' and '.', "+
				"starting and ending with a letter or digit", k, v, maxLabelName))
		}
	}
	return errs
}

// notOurs matches the TINYHOST_* variables that are someone else's: the
// operator's (TINYHOST_OPERATOR_*), and those Kubernetes sets in every pod
// for each Service of its namespace (a Service "tinyhost" gives
// TINYHOST_SERVICE_HOST, TINYHOST_PORT_50051_TCP_ADDR, ...).
var notOurs = regexp.MustCompile(`^TINYHOST_(OPERATOR_.*|([A-Z0-9_]+_)?(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(ADDR|PORT|PROTO))?)?))$`)

// ownEnv is environ without the variables that are not the daemon's.
func ownEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); !notOurs.MatchString(k) {
			out = append(out, kv)
		}
	}
	return out
}

// unknownVariables is the error of TINYHOST_* variables that name no
// setting (keys as the environment provider made them: "token-file"),
// each with the setting it may have meant.
func unknownVariables(keys []string, known map[string]bool) error {
	squash := func(s string) string { return strings.NewReplacer("-", "", ".", "").Replace(s) }
	near := map[string]string{}
	for k := range known {
		near[squash(k)] = k
	}
	var names []string
	for _, k := range keys {
		name := "TINYHOST_" + strings.ToUpper(strings.ReplaceAll(k, "-", "_"))
		if m, ok := near[squash(k)]; ok {
			name += " (did you mean TINYHOST_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(m)) + "?)"
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return usageErr("unknown environment variables %s: every TINYHOST_* variable must name a setting (tinyhost --help)", strings.Join(names, ", "))
}
