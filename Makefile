# The set-up commands of the README: `make demo`, `make test` (and `make test-product`, `make docs`).
# Both create .venv when it is missing and install the project into it; nothing else is needed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SHARED ?= ../shared
GOLDEN_ARCHIVE ?= $(SHARED)/golden/public-a.tar.xz
PYTEST_ARGS ?=

.PHONY: test test-slow test-product test-remote test-compat test-e2e e2e-jars e2e-hdfs-jars lint rust-check docs demo venv clean azurite

venv: $(VENV)/.installed

NATIVE_SOURCES := Cargo.toml Cargo.lock $(wildcard src/*.rs src/*/*.rs)

# maturin (pyproject's build backend, fetched from PyPI) builds the Rust crate in release mode into
# rocketstore_spark/_native*.so (cargo fetches the locked crates from crates.io) and installs the project
# editable as a path-based .pth naming the repository root: Spark's lookup of Python data sources scans sys.path
# for `pyspark_*` modules and cannot see import hooks. A change to the crate re-runs this install.
$(VENV)/.installed: pyproject.toml Makefile $(NATIVE_SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[spark,test,docs]'
	touch $@

# Unpacks the golden store into a fresh temp dir, runs the default suite, removes the temp dir.
test: venv
	@golden_dir=$$(mktemp -d) && trap 'rm -rf "$$golden_dir"' EXIT && \
	  tar -xJf $(GOLDEN_ARCHIVE) -C "$$golden_dir" && \
	  ROCKETSTORE_GOLDEN_DIR="$$golden_dir" $(PY) -m pytest $(PYTEST_ARGS)

# ruff, configured in pyproject.toml (pycodestyle, pyflakes, import order, bugbear); .ci/run runs it too
lint: venv
	$(VENV)/bin/ruff check .

# the crate's checks: formatting, clippy on the kernels alone and with the Python binding, the Rust unit tests
rust-check:
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --all-targets --features python -- -D warnings
	cargo test

test-slow: PYTEST_ARGS = -m slow
test-slow: test

# the installation, cluster, examples, notebook and whole-application tests (tests/product/), deselected by `make test`
test-product: PYTEST_ARGS = -m product
test-product: test

# stores read from a real S3-compatible server (started by the tests' fixtures)
test-remote: PYTEST_ARGS = -m "remote and not slow"
test-remote: test

# the documentation site (docs/, mkdocs.yml) into site/; --strict turns every warning (a broken link) into an error
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The end-to-end tests (tests/e2e, marker e2e): a real Apache RocketMQ 5.3.3 name server and broker, its Java
# client driven by a small harness, and a real HDFS (Hadoop's MiniDFSCluster), all started by the tests' fixtures.
# Needs a JDK 17 and Maven: e2e-jars (RocketMQ, ~60 MB) and e2e-hdfs-jars (Hadoop, ~180 MB) resolve the jars from
# Maven Central into jars/target (git-ignored); the first run downloads, later runs reuse ~/.m2.
# The HDFS store is read through webhdfs:// always, and through hdfs:// where libhdfs.so (Hadoop's binary
# distribution, lib/native) is found by ARROW_LIBHDFS_DIR or HADOOP_HOME; elsewhere the hdfs:// cases are skipped.
E2E_MVN ?= mvn -q -B

e2e-jars:
	$(E2E_MVN) -f jars/pom.xml package

e2e-hdfs-jars:
	$(E2E_MVN) -f jars/hdfs/pom.xml package

test-e2e: PYTEST_ARGS = -m e2e tests/e2e
test-e2e: e2e-jars e2e-hdfs-jars test

# Azurite, Microsoft's Azure Blob Storage emulator (npm, not PyPI), for the slow abfs:// tests: installed into
# $(VENV)/azurite on demand (tests/azure_server.py runs this target when it is missing)
AZURITE_VERSION ?= 3.35.0
AZURITE := $(VENV)/azurite/node_modules/.bin/azurite-blob

azurite: $(AZURITE)

$(AZURITE):
	@command -v npm >/dev/null || { echo "make azurite: npm is not installed (the abfs:// tests need Azurite from npm)" >&2; exit 1; }
	npm install --prefix $(VENV)/azurite --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION) || \
	  { echo "make azurite: npm could not install azurite@$(AZURITE_VERSION): is the npm registry reachable?" >&2; exit 1; }
	test -x $@

# The Spark tests against an older PySpark in its own venv (not part of `make test`): make test-compat SPARK=4.0.5
SPARK ?= 4.0.5
COMPAT_VENV := .venv-spark-$(SPARK)

test-compat:
	test -x $(COMPAT_VENV)/bin/python || $(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install --quiet "pyspark==$(SPARK)" -e '.[spark,test]'
	@golden_dir=$$(mktemp -d) && trap 'rm -rf "$$golden_dir"' EXIT && \
	  tar -xJf $(GOLDEN_ARCHIVE) -C "$$golden_dir" && \
	  ROCKETSTORE_GOLDEN_DIR="$$golden_dir" $(COMPAT_VENV)/bin/python -m pytest -p no:cacheprovider tests/spark $(PYTEST_ARGS)

DEMO_DIR ?= demo-output
DEMO_MESSAGES ?= 200000

# Generates a sample store (once) and runs the quickstart ETL on local Spark.
demo: venv
	test -d $(DEMO_DIR)/store/commitlog || $(VENV)/bin/rocketstore generate $(DEMO_DIR)/store --messages $(DEMO_MESSAGES)
	$(VENV)/bin/rocketstore inspect $(DEMO_DIR)/store
	$(PY) examples/etl_quickstart.py $(DEMO_DIR)/store $(DEMO_DIR)/hourly-parquet

clean:
	rm -rf $(VENV) .venv-spark-* .pytest_cache .hypothesis target rocketstore_spark/_native*.so site
