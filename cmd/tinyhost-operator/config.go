package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tinyhost/tinyhost/operator"
)

// envPrefix prefixes the environment variable of every flag:
// --host-timeout is TINYHOST_OPERATOR_HOST_TIMEOUT.
const envPrefix = "TINYHOST_OPERATOR_"

type config struct {
	MetricsAddr             string
	MetricsSecure           bool
	ProbeAddr               string
	LeaderElect             bool
	LeaderElectionNamespace string
	Operator                operator.Options
	Zap                     zap.Options
}

// parseConfig reads the flags in args and, for each flag not given, the
// environment variable envPrefix + its name in upper case with '_' for '-'.
func parseConfig(args, environ []string) (config, error) {
	var c config
	fs := pflag.NewFlagSet("tinyhost-operator", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", "0", `metrics address, e.g. ":8443"; "0" turns metrics off`)
	fs.BoolVar(&c.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers allowed to GET /metrics")
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&c.LeaderElect, "leader-elect", false, "elect a leader, so that one operator acts at a time (on in the manifests)")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's)")
	fs.DurationVar(&c.Operator.ProbeInterval, "probe-interval", 0, "how often each host is probed (default 1s)")
	fs.DurationVar(&c.Operator.HostTimeout, "host-timeout", 0, "how long a host may go unanswered before it is NotReady (default 5s)")
	fs.StringVar(&c.Operator.SpreadLabel, "spread-label", "", "TinyHost label whose values are failure domains (default topology.kubernetes.io/zone)")
	zapFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	c.Zap.BindFlags(zapFlags)
	fs.AddGoFlagSet(zapFlags)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: tinyhost-operator [flags]\n\nEvery flag may also be set as %s<FLAG>, e.g. %sHOST_TIMEOUT=10s.\n\n%s", envPrefix, envPrefix, fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q: tinyhost-operator takes only flags", fs.Args())
	}

	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix) {
			env[k] = v
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		name := envPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := env[name]
		if !ok || f.Changed || err != nil {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s: %w", name, e)
		}
	})
	return c, err
}
