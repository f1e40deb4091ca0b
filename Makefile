# llmops.serving — the two contracts: `make demo` and `make test`. Everything else is a step of them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

export LLMOPS_CACHE ?= $(HOME)/.cache/llmops-serving
VENV        := $(CURDIR)/.venv
BIN         := $(VENV)/bin
PYTHON      ?= python3
ANSIBLE_PKG := ansible==12.3.0
# The collection must sit under ansible_collections/llmops/serving to be importable by its FQCN.
COLL_ROOT   := $(CURDIR)/.cache/collections
DEPS_ROOT   := $(LLMOPS_CACHE)/collections
# Named by what the collections were made from (not by file times, which every fresh clone renews).
DEPS_STAMP  := $(DEPS_ROOT)/.done-$(shell sha256sum < meta/collection-deps.txt | cut -c1-12)-$(subst ==,-,$(ANSIBLE_PKG))
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT):$(DEPS_ROOT)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export CONTAINERS_CONF := $(LLMOPS_CACHE)/containers.conf
# The test hosts' connection (pipelined podman exec), for Molecule and the ansible-playbook runs of its tests
export ANSIBLE_CONNECTION_PLUGINS := $(CURDIR)/tests/harness/connection_plugins
export PATH := $(BIN):$(PATH)
# Test-host names end with a suffix of this checkout's path, so that two checkouts (a CI clone
# beside a developer's) never share or destroy each other's containers and networks.
export LLMOPS_HOST_SUFFIX ?= -$(shell printf '%s' '$(CURDIR)' | sha256sum | cut -c1-6)
# The engine venv of the unit tests and the default scenario's weights fixtures (make engine-venv, which
# the unit and molecule targets build first: nothing relies on one left over from an earlier run).
export LLMOPS_TEST_VENV_PYTHON ?= $(CURDIR)/.cache/engine-venv/bin/python
# Molecule scenarios that `make test` runs, in order (one: make molecule SCENARIOS=default SCENARIOS_BESIDE=).
# NAME@ENGINE re-runs scenario NAME on the hosts the entry before it left, switched to ENGINE: the
# default scenario's hosts serve vLLM, then SGLang. SCENARIOS_BESIDE run one after the other in the
# background meanwhile (on the core the engines' single-threaded starts and Ansible leave idle). See
# tests/harness/run-scenarios.sh. The lanes are balanced by their measured times: the default
# scenario's two legs and nvidia, then (in make test) the demo, the unit tests and promtool; beside
# them offline (with its scale-out tests) and the fleet (rollouts under streamed load over three
# engines), then (in make test) ansible-lint and ansible-test sanity.
SCENARIOS ?= default default@sglang nvidia
SCENARIOS_BESIDE ?= offline fleet
ENGINE ?= vllm
PROFILE ?= cpu

.PHONY: help
help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# ---------------------------------------------------------------- controller set-up
$(BIN)/ansible-playbook: tests/requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r tests/requirements-dev.txt
	touch $@

.PHONY: tools
tools: $(BIN)/ansible-playbook $(COLL_ROOT)/ansible_collections/llmops/serving $(DEPS_STAMP)  ## controller venv + collections

$(COLL_ROOT)/ansible_collections/llmops/serving:
	mkdir -p $(COLL_ROOT)/ansible_collections/llmops
	ln -sfn $(CURDIR) $@

# Galaxy is unreachable: dependency collections are taken from the `ansible` wheel on PyPI.
$(DEPS_STAMP): | $(BIN)/ansible-playbook
	$(BIN)/python tests/harness/extract_collections.py --ansible "$(ANSIBLE_PKG)" \
	  --dest $(DEPS_ROOT) --list meta/collection-deps.txt
	touch $@

.PHONY: host-packages
host-packages: promtool  ## podman, runc, debootstrap, patchelf, promtool on this machine (root)
	@command -v podman >/dev/null && command -v runc >/dev/null && command -v debootstrap >/dev/null && command -v patchelf >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap patchelf >/dev/null; }
	@bash -c '. tests/testhost/podman-env.sh'

# promtool from Debian's `prometheus` package (the same build the monitoring role installs on hosts),
# unpacked into the cache rather than installed, so no Prometheus daemon starts on this machine.
PROMTOOL := $(LLMOPS_CACHE)/bin/promtool
export PROMTOOL
.PHONY: promtool
promtool: $(PROMTOOL)  ## promtool (Debian's prometheus package) for the rule tests
$(PROMTOOL):
	mkdir -p $(LLMOPS_CACHE)/bin $(LLMOPS_CACHE)/deb
	cd $(LLMOPS_CACHE)/deb && { apt-get download prometheus 2>/dev/null || { apt-get update -qq && apt-get download prometheus; }; }
	dpkg-deb --fsys-tarfile "$$(ls -t $(LLMOPS_CACHE)/deb/prometheus_*.deb | head -n1)" | tar -xO ./usr/bin/promtool > $@.tmp
	chmod 0755 $@.tmp && mv $@.tmp $@

.PHONY: images
images: host-packages  ## build the Debian 12/13 systemd test-host images (cached)
	SUITES="bookworm trixie" tests/testhost/build-images.sh

# The test hosts cannot reach python-build-standalone's release assets: this packs the controller's
# Python 3.11 as a stand-in build in the same layout (<mirror>/<release>/<filename>), with the
# variables that point python_env at it (vars.json). Debian 13 hosts install it as their 3.11.
PYTHON_MIRROR := $(LLMOPS_CACHE)/python-mirror
.PHONY: standin-python
standin-python: host-packages  ## stand-in python-build-standalone mirror of this machine's Python 3.11 (cached)
	python3.11 tests/harness/standin_python.py --python python3.11 --mirror $(PYTHON_MIRROR) > /dev/null

# The profile's build locks (stacks/locks/<profile>/build/*.txt: what a source build of its
# sgl-kernel installs, hash-checked) go into the same wheelhouse, so an offline host can build too.
# Their wheels are all py3-none, for x86_64 Linux like the profiles; a stamp per lock digest skips a
# lock fetched before, as the playbook does for the engine locks.
WHEELHOUSE_PLATFORMS := $(foreach g,$(shell seq 36 -1 17),--platform=manylinux_2_$(g)_x86_64) \
  --platform=manylinux2014_x86_64 --platform=linux_x86_64
.PHONY: wheelhouse
wheelhouse: tools standin-python  ## wheelhouse of the locked engine (and sgl-kernel build) requirements and the interpreter for PROFILE (cached)
	$(BIN)/ansible-playbook playbooks/wheelhouse.yml -e serving_stack=$(PROFILE) -e '{"wheelhouse_engines": ["vllm", "sglang"]}' \
	  $(if $(filter cpu cpu-prev,$(PROFILE)),-e @$(PYTHON_MIRROR)/vars.json,-e wheelhouse_interpreter=false)
	for lock in stacks/locks/$(PROFILE)/build/*.txt; do \
	  [ -e "$$lock" ] || continue; \
	  stamp=$(LLMOPS_CACHE)/wheelhouse/$(PROFILE)/.build-$$(basename "$$lock").$$(sha256sum < "$$lock" | cut -c1-16); \
	  [ -e "$$stamp" ] || { $(BIN)/python -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
	    $(WHEELHOUSE_PLATFORMS) --dest $(LLMOPS_CACHE)/wheelhouse/$(PROFILE) --requirement "$$lock" && touch "$$stamp"; }; \
	done

# ---------------------------------------------------------------- checks
.PHONY: lint
lint: tools  ## yamllint, ansible-lint (production), argument-spec check
	$(BIN)/yamllint -s .
	$(BIN)/python tests/harness/check_argument_specs.py
	$(BIN)/ansible-lint --profile production

# shellcheck from Debian: without it ansible-test sanity skips its shell-script test and says nothing.
.PHONY: shellcheck
shellcheck:
	@command -v shellcheck >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; }

.PHONY: sanity
sanity: tools shellcheck  ## ansible-test sanity on a copy of the collection (shellcheck included)
	tests/harness/ansible-test-sanity.sh

.PHONY: checks
checks: lint sanity unit monitoring-rules  ## lint, sanity, unit tests and promtool (make test runs them beside the scenarios)

.PHONY: monitoring-rules
monitoring-rules: tools promtool  ## promtool check/test of the monitoring role's rules, per engine version
	$(BIN)/python tests/monitoring/run_promtool.py

# uv's cache (shared by the controller's venvs and every test host) is bounded: past
# UV_CACHE_MAX_GB it is emptied before anything reads it, and refills from the wheelhouses (local
# files, no download). A stack's wheels unpack to a few GB; a cache that kept the wheels of every
# path, lock and version it ever saw would fill the disk the test hosts' venvs need.
UV_CACHE_MAX_GB ?= 20
.PHONY: uv-cache
uv-cache: | tools
	@mkdir -p $(LLMOPS_CACHE)/uv; size=$$(du -s --block-size=1G $(LLMOPS_CACHE)/uv | cut -f1); \
	echo "== uv cache: $$size GB (bound $(UV_CACHE_MAX_GB) GB); disk: $$(df -h --output=avail $(LLMOPS_CACHE) | tail -1 | tr -d ' ') free"; \
	if [ "$$size" -gt $(UV_CACHE_MAX_GB) ]; then echo "== uv cache over its bound: emptied"; \
	  UV_CACHE_DIR=$(LLMOPS_CACHE)/uv $(BIN)/uv cache clean -q; fi

# A controller-side cpu engine venv (torch, transformers, peft) from the cpu wheelhouse.
.PHONY: engine-venv
engine-venv: $(CURDIR)/.cache/engine-venv/.synced  ## cpu engine venv for the unit tests and fixtures
$(CURDIR)/.cache/engine-venv/.synced: stacks/locks/cpu/vllm-0.32.0.txt | tools uv-cache
	test -d $(LLMOPS_CACHE)/wheelhouse/cpu || $(MAKE) wheelhouse PROFILE=cpu
	uv venv .cache/engine-venv --python python3.11 --allow-existing
	UV_CACHE_DIR=$(LLMOPS_CACHE)/uv uv pip sync --python .cache/engine-venv/bin/python --no-index --find-links $(LLMOPS_CACHE)/wheelhouse/cpu --require-hashes stacks/locks/cpu/vllm-0.32.0.txt
	touch $@

# An SGLang venv of the cpu lock (with the profile's torchvision guard, as python_env applies it), so
# the unit tests run SGLang's own flag parser.
.PHONY: sglang-venv
sglang-venv: $(CURDIR)/.cache/sglang-venv/.synced  ## cpu SGLang venv for the real-parser unit test
$(CURDIR)/.cache/sglang-venv/.synced: stacks/locks/cpu/sglang-0.5.23.txt | tools uv-cache
	test -d $(LLMOPS_CACHE)/wheelhouse/cpu || $(MAKE) wheelhouse PROFILE=cpu
	uv venv .cache/sglang-venv --python python3.11 --allow-existing
	UV_CACHE_DIR=$(LLMOPS_CACHE)/uv uv pip sync --python .cache/sglang-venv/bin/python --no-index --find-links $(LLMOPS_CACHE)/wheelhouse/cpu --require-hashes stacks/locks/cpu/sglang-0.5.23.txt
	.cache/sglang-venv/bin/python tests/fixtures/sgl_kernel_cpu_shim/patches/torchvision_fake_ops/apply.py
	touch $@

# Each pytest stage writes a JUnit file here; the summary at the end of `make test` reads them.
RESULTS := $(CURDIR)/.cache/test-results

.PHONY: unit
unit: tools engine-venv sglang-venv  ## pytest unit tests of module_utils, modules and filters (both engines' real parsers)
	mkdir -p $(RESULTS)
	LLMOPS_TEST_VENV_PYTHON=$(CURDIR)/.cache/engine-venv/bin/python \
	LLMOPS_TEST_VLLM_PYTHON=$(CURDIR)/.cache/engine-venv/bin/python \
	LLMOPS_TEST_SGLANG_PYTHON=$(CURDIR)/.cache/sglang-venv/bin/python \
	$(BIN)/python -m pytest -q -rs -n auto tests/unit --junitxml=$(RESULTS)/unit.xml

# Each scenario's hosts keep their .debs in a folder of their own: apt locks the archive
# folder, and scenarios that run at the same time (SCENARIOS_BESIDE) would fail on each other's
# lock. A new folder (<suite>-<scenario>) starts as hard links to its suite's shared .debs, never to its lock file: apt
# locks the file's inode, so a linked lock would be one lock for every folder again (a lock with
# more than one link, left by an older copy, is removed; apt makes a new one).
APT_ARCHIVES := trixie-default bookworm-offline trixie-offline bookworm-nvidia bookworm-fleet
.PHONY: cache-dirs
cache-dirs: uv-cache
	mkdir -p $(LLMOPS_CACHE)/apt-archives/bookworm/partial $(LLMOPS_CACHE)/apt-archives/trixie/partial
	for d in $(APT_ARCHIVES); do \
	  test -d $(LLMOPS_CACHE)/apt-archives/$$d || { mkdir -p $(LLMOPS_CACHE)/apt-archives/$$d/partial && \
	    find $(LLMOPS_CACHE)/apt-archives/$${d%%-*} -maxdepth 1 -name '*.deb' -exec ln -f -t $(LLMOPS_CACHE)/apt-archives/$$d {} +; }; \
	done
	find $(LLMOPS_CACHE)/apt-archives -mindepth 2 -maxdepth 2 -name lock -links +1 -delete

.PHONY: molecule
molecule: tools images wheelhouse cache-dirs engine-venv  ## Molecule scenarios (SCENARIOS="default ...")
	BESIDE="$(SCENARIOS_BESIDE)" RESULTS_DIR=$(RESULTS) tests/harness/run-scenarios.sh $(SCENARIOS)

.PHONY: results-reset
results-reset:
	rm -rf $(RESULTS)

# The last lines: what the suite's ansible-playbook runs cost (the run_cost callback writes each run
# to run-cost.jsonl), passed / failed / skipped / deselected per stage and scenario, and each failed
# test with its line and message, also when a scenario failed (CI keeps the end of the output); a
# skip or deselected test that tests/skips-allowed.txt does not name fails the run.
.PHONY: test
# (make -n runs a line that calls $(MAKE): the scenarios' exit status goes through a file, so that
# a dry run prints the summary's line instead of running it.)
# The checks (make checks) end the two lanes, split so that the lanes take about as long: the demo,
# the unit tests and promtool after the entries; ansible-lint and ansible-test sanity after the
# scenarios beside them (docs/testing.md).
test: results-reset tools images wheelhouse cache-dirs engine-venv sglang-venv promtool shellcheck  ## everything CI runs
	mkdir -p $(RESULTS); LLMOPS_RUN_COST_FILE=$(RESULTS)/run-cost.jsonl \
	  $(MAKE) molecule SCENARIOS="$(SCENARIOS) make:test-demo make:unit make:monitoring-rules" \
	    SCENARIOS_BESIDE="$(SCENARIOS_BESIDE) make:lint make:sanity" || echo $$? > $(RESULTS)/molecule.rc
	$(BIN)/python tests/harness/summarise_results.py $(RESULTS) tests/skips-allowed.txt
	test ! -e $(RESULTS)/molecule.rc

.PHONY: test-scale-out
test-scale-out:  ## only the offline scenario, with its scale-out tests: a replica pool failing over under load, a two-host SGLang instance
	$(MAKE) molecule SCENARIOS=offline SCENARIOS_BESIDE=

.PHONY: test-fleet
test-fleet:  ## only the fleet scenario: rollouts, upgrade, rollback, recovery over three engines under load
	$(MAKE) molecule SCENARIOS=fleet SCENARIOS_BESIDE=

# A measurement, not a test of `make test` (CI budget): the default scenario's host, the benchmark
# of both engines on it (side_effect.yml), and the checks of its report.
.PHONY: bench-cpu
bench-cpu: tools images wheelhouse cache-dirs engine-venv  ## vLLM against SGLang on a CPU test host (report in .cache/bench/molecule-cpu)
	$(BIN)/molecule destroy -s default
	rc=0; $(BIN)/molecule converge -s default && $(BIN)/molecule side-effect -s default && \
	  LLMOPS_BENCH_REPORT_DIR=$(CURDIR)/.cache/bench/molecule-cpu $(BIN)/python -m pytest -q tests/bench || rc=$$?; \
	  $(BIN)/molecule destroy -s default; exit $$rc

# ---------------------------------------------------------------- demo
.PHONY: demo
demo: tools images wheelhouse cache-dirs  ## serve a tiny Qwen-shaped model on a local throwaway systemd host
	ENGINE=$(ENGINE) tests/harness/demo.sh up

.PHONY: demo-down
demo-down:  ## remove the demo host
	tests/harness/demo.sh down

# The demo as a user runs it, on both engines, on a host of its own (tests/demo): part of `make test`,
# in the lane beside the scenarios.
.PHONY: test-demo
test-demo: tools images wheelhouse cache-dirs  ## make demo on vLLM then SGLang: an answer through the gateway, re-runs changed=0
	mkdir -p $(RESULTS)
	$(BIN)/python -m pytest -v -s -p no:cacheprovider tests/demo --junitxml=$(RESULTS)/demo.xml

.PHONY: clean
clean:  ## remove per-checkout state (not the shared LLMOPS_CACHE)
	rm -rf .cache $(VENV)

# ---------------------------------------------------------------- development
.PHONY: converge verify destroy
converge: tools images wheelhouse cache-dirs engine-venv  ## one Molecule step: make converge S=default [V=-vvv]
	molecule $@ -s $(or $(S),default) $(if $(V),-- $(V))
verify: tools images wheelhouse cache-dirs engine-venv  ## the scenario's tests on its converged hosts: make verify S=default
	molecule $@ -s $(or $(S),default)
destroy: tools  ## remove a scenario's hosts: make destroy S=default
	molecule $@ -s $(or $(S),default)
