# Prints the ratios of `make bench`: each benchmark against the baseline that
# ran beside it in the same run. Input: `go test -bench` output; a benchmark
# that ran more than once (-count) counts with its mean.
/^Benchmark/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++) {
		if ($(i + 1) == "ns/op") add(name, $i)
		else if ($(i + 1) == "cpu-ns/op") add(name "/cpu", $i)
		else if ($(i + 1) == "allocs/op") addAllocs(name, $i)
		else if ($(i + 1) ~ /^(p50-µs|p99-µs|errors|rss-start-MiB|rss-end-MiB)$/) addMetric(name, $(i + 1), $i)
		else if ($(i + 1) ~ /ns\/call$/) add(name "/" $(i + 1), $i)
		else if ($(i + 1) == "call-ns") add(name "/call-ns", $i)
	}
}
function add(key, v) {
	sum[key] += v
	runs[key]++
	ns[key] = sum[key] / runs[key]
}
function addAllocs(key, v) {
	asum[key] += v
	aruns[key]++
	allocs[key] = asum[key] / aruns[key]
}
function addMetric(key, unit, v) {
	msum[key, unit] += v
	mruns[key, unit]++
	metric[key, unit] = msum[key, unit] / mruns[key, unit]
}
# ratio prints num against den, whose unit is ns/op unless unit says.
function ratio(label, num, den, unit) {
	if (unit == "") unit = "ns/op"
	if ((num in ns) && (den in ns) && ns[den] > 0)
		printf "  %-48s %7.2fx   (%.0f %s vs %.0f %s)\n", label, ns[num] / ns[den], ns[num], unit, ns[den], unit
}
# target is ratio with the most the ratio may be, and whether it is met.
function target(label, num, den, most) {
	if ((num in ns) && (den in ns) && ns[den] > 0)
		printf "  %-48s %7.2fx   (%.0f ns vs %.0f ns; target <= %.2fx: %s)\n", label, ns[num] / ns[den], ns[num], ns[den],
			most, ns[num] / ns[den] <= most ? "met" : "MISSED"
}
END {
	print ""
	print "Ratios (lower is better; the baseline ran in the same run):"
	split("16B 1KiB 64KiB", sizes, " ")
	for (i = 1; i <= 3; i++) {
		s = sizes[i]
		ratio("host InvokeAppend, raw echo " s " / bare wazero call", "BenchmarkInvoke/raw-" s, "BenchmarkFloor/" s)
		ratio("host InvokeAppend, sdk echo " s " / bare wazero call", "BenchmarkInvoke/sdk-" s, "BenchmarkFloor/" s)
	}
	ratio("host Invoke (a new reply) raw 1KiB / bare wazero", "BenchmarkInvoke/raw-1KiB-owned", "BenchmarkFloor/1KiB")
	target("guest HTTP GET 1KiB / native Go GET", "BenchmarkHTTPGet/guest-1KiB", "BenchmarkHTTPGet/native-1KiB", 1.3)
	ratio("sdk guest HTTP GET 1KiB (net/http) / native Go GET", "BenchmarkHTTPGet/sdk-1KiB", "BenchmarkHTTPGet/native-1KiB")
	# What the checks add to a bare echo call, against a whole Invoke of it.
	c = "BenchmarkInterruptChecks/echo-1KiB/"
	if ((c "checked-ns/call" in ns) && (c "as-is-ns/call" in ns) && ns["BenchmarkInvoke/raw-1KiB"] > 0) {
		d = ns[c "checked-ns/call"] - ns[c "as-is-ns/call"]
		printf "  %-48s %7.1f%%   (%.1f ns of %.0f ns/op; target <= 10%%: %s)\n", "interrupt checks' share of Invoke raw-1KiB",
			100 * d / ns["BenchmarkInvoke/raw-1KiB"], d, ns["BenchmarkInvoke/raw-1KiB"], d <= 0.10 * ns["BenchmarkInvoke/raw-1KiB"] ? "met" : "MISSED"
	}
	split("echo-1KiB 1.10 fib-wat 1.5 fib-go 1.5", checks, " ")
	for (i = 1; i <= 6; i += 2) {
		b = "BenchmarkInterruptChecks/" checks[i]
		target("interrupt checks: " checks[i] " / as is", b "/checked-ns/call", b "/as-is-ns/call", checks[i + 1])
	}
	# The three ways to bound a call (RATIONALE: "Why an injected interrupt global").
	ratio("1 KiB echo, interrupt global / no timeout", "BenchmarkTimeouts/interrupt-global", "BenchmarkTimeouts/none")
	ratio("1 KiB echo, close on context done / no timeout", "BenchmarkTimeouts/close-on-context-done", "BenchmarkTimeouts/none")
	ratio("load from the compile cache / cold load", "BenchmarkLoad/cached", "BenchmarkLoad/cold")
	ratio("routed call to host 2 / gRPC Invoke on host 2", "BenchmarkRemoteCall/router", "BenchmarkRemoteCall/grpc-invoke")
	ratio("routed call to host 2 / bare gRPC echo", "BenchmarkRemoteCall/router", "BenchmarkRemoteCall/grpc-echo")
	ratio("component on host 1 -> host 2 / bare gRPC echo", "BenchmarkRemoteCall/component", "BenchmarkRemoteCall/grpc-echo")
	ratio("component on host 1 -> host 2 / gRPC Invoke", "BenchmarkRemoteCall/component", "BenchmarkRemoteCall/grpc-invoke")
	ratio("component on host 1 -> host 2 / stream echo", "BenchmarkRemoteCall/component", "BenchmarkRemoteCall/grpc-stream-echo")
	ratio("routed call with a guest's deadline and metadata / router", "BenchmarkRemoteCall/router-as-guest", "BenchmarkRemoteCall/router")
	ratio("in-process cross-module call / direct Invoke", "BenchmarkLocalCall/router", "BenchmarkLocalCall/invoke")
	# A guest call after other work evicted the caches / back to back:
	# what a one-caller gRPC Invoke pays for the guest it calls.
	split("hello echo", cold, " ")
	for (i = 1; i <= 2; i++)
		ratio("Invoke " cold[i] ", caches evicted / back to back", "BenchmarkInvokeCold/" cold[i] "/evicted/call-ns", "BenchmarkInvokeCold/" cold[i] "/busy/call-ns", "ns/call")
	# Tracing on (exported by OTLP to a receiver that discards) / off.
	split("unary-1 unary-64 stream", tmodes, " ")
	for (i = 1; i <= 3; i++)
		ratio("gRPC Invoke " tmodes[i] ", tracing on / off", "BenchmarkInvoke/" tmodes[i] "/tinyhost-traced", "BenchmarkInvoke/" tmodes[i] "/tinyhost")
	# An instance of a Go guest from its snapshot / by running _initialize.
	target("instance start, snapshot / _initialize", "BenchmarkStart/snapshot", "BenchmarkStart/initialize", 0.25)
	# The same in CPU time, which a busy machine disturbs less.
	ratio("instance start, snapshot / _initialize, CPU", "BenchmarkStart/snapshot/cpu", "BenchmarkStart/initialize/cpu")
	# The first call at zero instances / a warm call plus a start from the snapshot.
	z = "BenchmarkFirstCall/zero"; w = "BenchmarkFirstCall/warm"; st = "BenchmarkStart/snapshot"
	if ((z in ns) && (w in ns) && (st in ns) && ns[w] + ns[st] > 0)
		printf "  %-48s %7.2fx   (%.0f ns vs %.0f + %.0f ns; target <= 1.50x: %s)\n", "first call at zero / warm call + snapshot start",
			ns[z] / (ns[w] + ns[st]), ns[z], ns[w], ns[st], ns[z] <= 1.5 * (ns[w] + ns[st]) ? "met" : "MISSED"
	# The call path's targets: each row against its baseline, with the
	# allocations per call of both. "most" bounds a ratio of times (lower
	# is better); "least" a share of the baseline's throughput, in percent.
	print ""
	print "Call path (target, and whether this run met it; allocs/op: row vs baseline):"
	goal("host InvokeAppend 1 KiB / bare wazero call", "BenchmarkInvoke/raw-1KiB", "BenchmarkFloor/1KiB", "most", 2.0)
	goal("gRPC InvokeStream / bare grpc-go stream echo", "BenchmarkInvoke/stream/tinyhost", "BenchmarkInvoke/stream/echo", "least", 80)
	goal("gRPC unary, 1 caller, hello / bare echo", "BenchmarkInvoke/unary-1/tinyhost", "BenchmarkInvoke/unary-1/echo", "least", 90)
	goal("component host 1 -> host 2 / bare gRPC echo", "BenchmarkRemoteCall/component", "BenchmarkRemoteCall/grpc-echo", "most", 1.2)
	goal("in-process cross-module call / direct Invoke", "BenchmarkLocalCall/router", "BenchmarkLocalCall/invoke", "most", 1.1)
	# The host's part of the rows of hello, a Go guest whose call alone
	# (in-process, back to back) takes several µs: the same rows with the
	# conformance kit's echo guest (about 1 µs) in its place, or a guest in
	# WAT that answers at once, and the component against a gRPC Invoke of
	# hello on the other host.
	print "  the host's part of those rows (the same targets, for comparison):"
	goal("  InvokeStream, echo guest for hello", "BenchmarkInvoke/stream/tinyhost-echo-guest", "BenchmarkInvoke/stream/echo", "least", 80)
	goal("  InvokeStream, WAT guest for hello", "BenchmarkInvoke/stream/tinyhost-wat-guest", "BenchmarkInvoke/stream/echo", "least", 80)
	goal("  unary, 1 caller, echo guest for hello", "BenchmarkInvoke/unary-1/tinyhost-echo-guest", "BenchmarkInvoke/unary-1/echo", "least", 90)
	goal("  component 1 -> 2 / gRPC Invoke of hello", "BenchmarkRemoteCall/component", "BenchmarkRemoteCall/grpc-invoke", "most", 1.2)
	# CPU time per streamed call (client and server, one process): what
	# each part adds to the bare echo's, less disturbed by a busy machine.
	print "  CPU per InvokeStream call / the bare echo's (lower is better):"
	split("tinyhost hello tinyhost-echo-guest echo-guest tinyhost-wat-guest WAT-guest", cpus, " ")
	for (i = 1; i <= 6; i += 2)
		ratio("  " cpus[i + 1], "BenchmarkInvoke/stream/" cpus[i] "/cpu", "BenchmarkInvoke/stream/echo/cpu", "CPU ns")
	print ""
	print "Steady load (a fixed rate for a fixed time, one connection; each server in its own process):"
	steady("tinyhost, hello/greeter", "BenchmarkFixedRate/tinyhost")
	steady("bare grpc-go echo", "BenchmarkFixedRate/echo")
}

# Density: what a module costs the host and how soon a dropped one answers.
# These are figures of one run, not ratios: memory is not noisy as time is.
/^Benchmark(Density|DropToCall|TenThousand)/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++)
		fig[name " " $(i + 1)] = $i
}
function most(label, key, unit, limit, scale) {
	if (key in fig)
		printf "  %-48s %9.1f %s   (target <= %s %s: %s)\n", label, fig[key] * scale, unit, limit, unit, fig[key] * scale <= limit ? "met" : "MISSED"
}
END {
	print ""
	print "Density (one run):"
	most("module at zero instances, shared artifact", "BenchmarkDensity/shared-zero KiB/module", "KiB", 256, 1)
	most("module with one warm instance, shared artifact", "BenchmarkDensity/shared-warm KiB/module", "KiB", 3072, 1)
	most("distinct 10 MiB module at zero instances", "BenchmarkDensity/distinct-zero KiB/module", "KiB", 65536, 1)
	most("distinct 10 MiB module, one warm instance", "BenchmarkDensity/distinct-warm KiB/module", "KiB", 65536, 1)
	most("dropped file to first answer", "BenchmarkDropToCall ns/op", "ms", 50, 1e-6)
	if ("BenchmarkDropToCall cpu-ns/op" in fig)
		printf "  %-48s %9.1f ms\n", "dropped file to first answer, CPU time", fig["BenchmarkDropToCall cpu-ns/op"] * 1e-6
	most("10,000 modules: load time", "BenchmarkTenThousand load-s", "s", 60, 1)
	most("10,000 modules: host RSS after the loads", "BenchmarkTenThousand rss-MiB", "MiB", 2048, 1)
	if ("BenchmarkTenThousand answered" in fig)
		printf "  %-48s %9d of 10000 (in %.0f s)\n", "10,000 modules: calls answered", fig["BenchmarkTenThousand answered"], fig["BenchmarkTenThousand call-all-s"]
}

# goal prints a row of the call path's table: num against its baseline den,
# as a ratio of times when bound is "most", or as den's time over num's in
# percent (num's throughput as a share of den's) when it is "least"; a row
# whose benchmarks did not run is said to be missing, not left out.
function goal(label, num, den, bound, v,    r, met, shown, want) {
	if (!(num in ns) || !(den in ns) || ns[num] <= 0 || ns[den] <= 0) {
		printf "  %-46s (not run: %s, %s)\n", label, num, den
		return
	}
	if (bound == "most") {
		r = ns[num] / ns[den]
		met = r <= v
		shown = sprintf("%6.2fx", r)
		want = sprintf("<= %.1fx", v)
	} else {
		r = 100 * ns[den] / ns[num]
		met = r >= v
		shown = sprintf("%5.1f%%", r)
		want = sprintf(">= %d%%", v)
	}
	printf "  %-46s %8s  target %-8s %-8s (%.0f vs %.0f ns; allocs %s vs %s)\n", label, shown, want, met ? "met" : "not met",
		ns[num], ns[den], num in allocs ? sprintf("%.0f", allocs[num]) : "-", den in allocs ? sprintf("%.0f", allocs[den]) : "-"
}

# steady prints the figures of a steady load: its calls' latency, its
# failures, and the server's memory before and after it.
function steady(label, name) {
	if (!((name, "p50-µs") in metric)) {
		printf "  %-28s (not run: %s)\n", label, name
		return
	}
	printf "  %-28s p50 %6.0f µs  p99 %7.0f µs  errors %4.0f  RSS %6.1f -> %6.1f MiB\n", label,
		metric[name, "p50-µs"], metric[name, "p99-µs"], metric[name, "errors"], metric[name, "rss-start-MiB"], metric[name, "rss-end-MiB"]
}
