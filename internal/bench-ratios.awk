# Prints the ratios of `make bench`: each benchmark against the baseline that
# ran beside it in the same run. Input: `go test -bench` output.
/^Benchmark/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++) if ($(i + 1) == "ns/op") ns[name] = $i
}
function ratio(label, num, den) {
	if ((num in ns) && (den in ns) && ns[den] > 0)
		printf "  %-48s %7.2fx   (%s ns/op vs %s ns/op)\n", label, ns[num] / ns[den], ns[num], ns[den]
}
END {
	print ""
	print "Ratios (lower is better; the baseline ran in the same run):"
	split("16B 1KiB 64KiB", sizes, " ")
	for (i = 1; i <= 3; i++) {
		s = sizes[i]
		ratio("host Invoke, raw echo " s " / bare wazero call", "BenchmarkInvoke/raw-" s, "BenchmarkFloor/" s)
		ratio("host Invoke, sdk echo " s " / bare wazero call", "BenchmarkInvoke/sdk-" s, "BenchmarkFloor/" s)
	}
	ratio("load from the compile cache / cold load", "BenchmarkLoad/cached", "BenchmarkLoad/cold")
	ratio("routed call to host 2 / gRPC Invoke on host 2", "BenchmarkRemoteCall/router", "BenchmarkRemoteCall/grpc-invoke")
	ratio("routed call to host 2 / bare gRPC echo", "BenchmarkRemoteCall/router", "BenchmarkRemoteCall/grpc-echo")
	ratio("component on host 1 -> host 2 / bare gRPC echo", "BenchmarkRemoteCall/component", "BenchmarkRemoteCall/grpc-echo")
	ratio("component on host 1 -> host 2 / gRPC Invoke", "BenchmarkRemoteCall/component", "BenchmarkRemoteCall/grpc-invoke")
	ratio("component on host 1 -> host 2 / stream echo", "BenchmarkRemoteCall/component", "BenchmarkRemoteCall/grpc-stream-echo")
	ratio("in-process cross-module call / direct Invoke", "BenchmarkLocalCall/router", "BenchmarkLocalCall/invoke")
}
