package scale

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuKinds are the processes whose CPU time the benchmark reports, by
// the name the kernel knows them by (15 bytes at most), and as reported.
var cpuKinds = map[string]string{
	"kube-apiserver":  "kube-apiserver",
	"etcd":            "etcd",
	"tinyhost-operat": "operator",
	"hostfarm":        "host farms",
	"scale.test":      "benchmark",
}

// clockTicks is the unit of /proc's CPU times (USER_HZ).
const clockTicks = 100

// cpuSample is the CPU time taken so far by each process of cpuKinds,
// and by the whole machine, at a moment.
type cpuSample struct {
	at      time.Time
	procs   map[string]procTime // by /proc directory
	machine float64             // seconds busy, every core
}

type procTime struct {
	kind    string
	seconds float64
}

func cpuTimes(b *testing.B) cpuSample {
	s := cpuSample{at: time.Now(), procs: map[string]procTime{}}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil {
			continue // gone meanwhile
		}
		kind, ok := cpuKinds[strings.TrimSpace(string(comm))]
		if !ok {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command's ")": utime and stime are the
		// 12th and 13th.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		s.procs[d] = procTime{kind, (utime + stime) / clockTicks}
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	// cpu  user nice system idle iowait irq softirq steal ...
	f := strings.Fields(strings.SplitN(string(stat), "\n", 2)[0])
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		s.machine += n / clockTicks
	}
	return s
}

// cpuSince is what each kind of process and the machine took since
// before, largest first: "kube-apiserver 29.2 s, host farms 17.7 s
// (10 processes), …; machine 70.1 s of 79.8 s (2 cores)". A process that
// ended meanwhile (a killed farm) is not counted.
func cpuSince(b *testing.B, before cpuSample) string {
	now := cpuTimes(b)
	took, procs := map[string]float64{}, map[string]int{}
	for d, p := range now.procs {
		took[p.kind] += p.seconds - before.procs[d].seconds
		procs[p.kind]++
	}
	kinds := make([]string, 0, len(took))
	for k := range took {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int { return cmp.Compare(took[b], took[a]) })
	var parts []string
	for _, k := range kinds {
		p := fmt.Sprintf("%s %.1f s", k, took[k])
		if n := procs[k]; n > 1 {
			p += fmt.Sprintf(" (%d processes)", n)
		}
		parts = append(parts, p)
	}
	wall := now.at.Sub(before.at).Seconds()
	return fmt.Sprintf("%s; machine %.1f s of %.1f s (%d cores)", strings.Join(parts, ", "),
		now.machine-before.machine, wall*float64(runtime.NumCPU()), runtime.NumCPU())
}
