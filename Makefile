# berth — the two set-up commands are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
NODE := node_modules/.bin/node
BIN := node_modules/.bin
export GOTOOLCHAIN := local

.PHONY: all deps lint typecheck format test test-unit test-e2e test-eviction test-csi-upstream test-kubeadm test-vm test-faults soak demo demo-stop gen bench bench-probes bench-api bench-api-paired bench-api-direct bench-eviction conformance

all: test

## deps: install and build everything the tests need (idempotent)
deps:
	@bash hack/deps.sh

## lint: type-aware eslint, prettier's check, and the layers of src/ (no import cycle, no upward import)
lint: deps
	@echo "== lint"
	@$(BIN)/eslint --max-warnings 0 .
	@$(NODE) $(BIN)/depcruise --config .dependency-cruiser.cjs --output-type err src
	@$(BIN)/prettier --check --log-level warn .

## typecheck: tsc over src, test, hack and bench
typecheck: deps
	@echo "== typecheck"
	@$(BIN)/tsc -p tsconfig.json

## test: every tier — lint, types, unit, end-to-end against a real cluster
test: deps lint typecheck test-unit test-e2e

test-unit: deps
	@echo "== unit tests"
	@$(NODE) --test --test-reporter=spec --test-timeout=300000 'test/unit/**/*.test.ts' 'src/**/*.test.ts' 'bench/**/*.test.ts' 'test/fuzz/**/*.test.ts'

# One end-to-end file at a time: each starts real clusters and the machine has 2 cores.
# The fault tier's quick berth-kill run (6 kills mid-operation, full leak checks) rides along.
test-e2e: deps
	@echo "== end-to-end tests (real control plane, containerd 2.x and 1.6, registry)"
	@$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000 'test/e2e/**/*.test.ts' test/faults/berth-kill-quick.test.ts

## test-eviction: node-pressure eviction with real memory and PID pressure, disk reclaim and
## image GC on a loop-mounted filesystem (slow: image GC's 5 min period); the quick
## eviction scenarios are in make test (test/e2e/eviction-*.test.ts)
test-eviction: deps
	@echo "== eviction end-to-end tests (real, bounded pressure)"
	@$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000 'test/eviction/**/*.test.ts'

## test-csi-upstream: the CSI chain with real components (csi-provisioner, csi-attacher, upstream's
## CSI mock driver, a registrar) against the upstream kubelet, the reference for berth; not part of
## `make test`. CSI_NODE_AGENT=berth runs it against berth, CSI_REFERENCE_OUT=<file> records what it saw.
test-csi-upstream: deps
	@echo "== CSI end-to-end (real sidecars and mock driver; node agent: $${CSI_NODE_AGENT:-upstream})"
	@$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000 'test/csi-upstream/**/*.test.ts'

## test-faults: fault injection against the real harness (runtime restarts, API server outage and
## a fault proxy, watch 410, berth killed mid-operation, disk full); figures for RELIABILITY.md in
## $$FAULTS_OUT when set. FAULTS_AGENT=upstream runs the same scenarios against the upstream kubelet.
test-faults: deps
	@echo "== fault-injection tests (node agent: $${FAULTS_AGENT:-berth})"
	@$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=1800000 'test/faults/**/*.test.ts'

## soak: long runs, not in CI. The fuzz suites with a random seed (FUZZ_SEED=<n> replays one) and
## FUZZ_RUNS (default 20000: each suite 20 times its make-test share), then the churn soak for
## SOAK_MINUTES (default 10) after a warm-up of SOAK_WARMUP_PODS pod lifecycles (default 1000, about
## 25 min here; SOAK_PODS pods of each kind per round); figures in $$FAULTS_OUT when set.
soak: deps
	@echo "== fuzz (seed $${FUZZ_SEED:-random}, FUZZ_RUNS=$${FUZZ_RUNS:-20000})"
	@FUZZ_SEED=$${FUZZ_SEED:-random} FUZZ_RUNS=$${FUZZ_RUNS:-20000} $(NODE) --test --test-reporter=spec --test-timeout=3600000 'test/fuzz/**/*.test.ts'
	@echo "== churn soak ($${SOAK_WARMUP_PODS:-1000} pods of warm-up, then $${SOAK_MINUTES:-10} min)"
	@$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=86400000 'test/soak/**/*.test.ts'

## test-kubeadm: `kubeadm init` with berth as the kubelet, then `kubeadm reset -f` (a tier of its
## own: it writes /etc/kubernetes, /var/lib/kubelet and /var/lib/etcd, saved and restored around it)
test-kubeadm: deps
	@bash hack/build-go.sh kubernetes >/dev/null
	@echo "== kubeadm end-to-end test (a control-plane node on berth)"
	@$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=900000 'test/kubeadm/**/*.test.ts'

## test-vm: berth in virtual machines (QEMU, systemd + cgroup v2 guests): one node joined over a
## host-only bridge, graceful shutdown through `systemctl poweroff`, two nodes with a pod network
## and kube-proxy. Builds the guest image on first use (hack/vm/build-image.sh); not in `make test`.
test-vm: deps
	@bash hack/vm/build-image.sh >/dev/null
	@echo "== virtual machine tier (QEMU guests, emulated: slow)"
	@$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=3600000 'test/vm/**/*.test.ts'

## demo: a local single-node cluster, left running; kubeconfig in .demo/kubeconfig
demo: deps
	@$(NODE) hack/demo.ts up

## demo-stop: stop the demo cluster and remove everything it made
demo-stop:
	@if [ -x $(NODE) ]; then $(NODE) hack/demo.ts down; else echo "no demo (node_modules missing)"; fi

## conformance: upstream's e2e node conformance suite against berth, then the upstream kubelet, on one
## cluster; report in .conformance/<date>/, tables in COMPATIBILITY.md. Quick runs:
## make conformance ARGS="--focus 'Pods should get a host IP'"   or   ARGS=--subset   or   ARGS="--agents berth"
conformance: deps
	@$(NODE) hack/conformance/run.ts $(ARGS)

## gen: regenerate the CRI, CSI and plugin registration subset protos and their TypeScript
gen:
	@$(NODE) hack/cri-proto/subset.ts
	@$(NODE) hack/cri-proto/csi-subset.ts
	@$(BIN)/buf generate
	@$(BIN)/buf generate --template buf.gen.csi.yaml
	@$(BIN)/buf generate --template buf.gen.pluginregistration.yaml

## bench: pod start latency, berth vs the upstream kubelet vs the raw CRI floor (BENCHMARKS.md)
bench: deps
	@$(NODE) bench/pod-start.ts

## bench-probes: probe CPU, RSS and timing, berth vs the upstream kubelet, 100 pods for 5 min (BENCHMARKS.md)
bench-probes: deps
	@$(NODE) bench/probes.ts

## bench-api: kubectl exec round trip, logs -f and port-forward throughput, berth vs the upstream kubelet (BENCHMARKS.md)
bench-api: deps
	@$(NODE) bench/api.ts

## bench-api-paired: the same operations with berth and upstream running at once, each on its own containerd, every measurement alternating (BENCHMARKS.md)
bench-api-paired: deps
	@$(NODE) bench/api-paired.ts

## bench-eviction: threshold crossed -> pod Evicted and -> MemoryPressure, berth vs the upstream kubelet on the same memory pressure (BENCHMARKS.md)
bench-eviction: deps
	@$(NODE) bench/eviction.ts

## bench-api-direct: the kubelet API's own answer time (logs, healthz), asked directly with the apiserver's client certificate, berth vs upstream (BENCHMARKS.md)
bench-api-direct: deps
	@$(NODE) bench/api-direct.ts
