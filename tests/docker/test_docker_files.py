"""docker/Dockerfile and docker/compose.yaml: valid, and wired the way the README says.

No Docker engine is needed. Where the `docker compose` plugin exists, `docker compose config`
checks the file too; everywhere, the file is validated against the official Compose
Specification schema, vendored as docker/compose-spec.json from
https://github.com/compose-spec/compose-spec (schema/compose-spec.json at commit
b2835e8acc1e42e7aecbc27a9bc4a1fc66ef21ba), copied unchanged.
"""

from __future__ import annotations

import copy
import fnmatch
import glob
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
SCHEMA_FILE = DOCKER / "compose-spec.json"


# --- helpers ---------------------------------------------------------------------------------


def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def compose_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per Dockerfile instruction: comments dropped, `\\` lines joined."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        keyword, _, args = whole.partition(" ")
        result.append((keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return result


def copy_sources(args: str) -> tuple[list[str], dict[str, str]]:
    """The source paths and --flags of one COPY/ADD (shell or JSON form; the last item is the dest)."""
    flags: dict[str, str] = {}
    words = shlex.split(args)
    while words and words[0].startswith("--"):
        name, _, value = words.pop(0)[2:].partition("=")
        flags[name] = value
    rest = " ".join(words)
    if rest.startswith("["):
        words = json.loads(rest)
    assert len(words) >= 2, f"COPY/ADD needs a source and a destination: {args!r}"
    return words[:-1], flags


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


def as_list(command) -> list[str]:
    if command is None:
        return []
    return shlex.split(command) if isinstance(command, str) else list(command)


def health_test(service: dict) -> str:
    test = service["healthcheck"]["test"]
    return test if isinstance(test, str) else " ".join(test)


# --- compose: validity -----------------------------------------------------------------------


def test_compose_file_matches_the_compose_spec_schema():
    doc = compose()
    errors = sorted(compose_validator().iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    assert "version" not in doc, "the compose spec has no `version:`; Compose warns it is obsolete"


@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(lambda d: d["services"]["worker"].update(restart_policy="always"), id="key"),
        pytest.param(lambda d: d["services"]["prefect-server"].update(ports="42abc"), id="ports"),
        pytest.param(
            lambda d: d["services"]["worker"]["depends_on"]["catalog-db"].update(condition="up"),
            id="condition",
        ),
        pytest.param(lambda d: d.update(volumez={}), id="top-level"),
    ],
)
def test_the_schema_check_rejects_a_broken_document(break_it):
    doc = copy.deepcopy(compose())
    break_it(doc)
    assert list(compose_validator().iter_errors(doc)), "the schema let a broken document through"


def docker_compose_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        probe = subprocess.run(
            ["docker", "compose", "version"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


@pytest.mark.skipif(not docker_compose_available(), reason="no `docker compose` plugin here")
def test_docker_compose_config_accepts_the_file():
    done = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr


# --- compose: wiring -------------------------------------------------------------------------


def test_every_dependency_exists_and_waits_for_health():
    services = compose()["services"]
    for name, service in services.items():
        for dep, spec in (service.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on undefined service {dep}"
            assert spec["condition"] == "service_healthy", f"{name} -> {dep}: {spec}"
            assert "healthcheck" in services[dep], (
                f"{name} waits on {dep}, which has no healthcheck"
            )
    assert set(services["worker"]["depends_on"]) == {"prefect-server", "catalog-db"}
    assert set(services["prefect-server"]["depends_on"]) == {"prefect-db"}


def test_databases():
    services = compose()["services"]
    catalog = services["catalog-db"]
    assert catalog["image"] == "postgres:16"
    assert env_of(catalog) == {
        "POSTGRES_USER": "thresher",
        "POSTGRES_PASSWORD": "thresher",
        "POSTGRES_DB": "catalog",
    }
    prefect_db = services["prefect-db"]
    assert prefect_db["image"] == "postgres:16"
    for service in (catalog, prefect_db):
        assert "pg_isready" in health_test(service)

    server_env = env_of(services["prefect-server"])
    db_url = urlsplit(server_env["PREFECT_API_DATABASE_CONNECTION_URL"])
    pg = env_of(prefect_db)
    assert db_url.scheme == "postgresql+asyncpg"
    assert (db_url.hostname, db_url.port, db_url.path) == (
        "prefect-db",
        5432,
        "/" + pg["POSTGRES_DB"],
    )
    assert (db_url.username, db_url.password) == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"])


def test_prefect_server():
    server = compose()["services"]["prefect-server"]
    assert server["image"] == "prefecthq/prefect:3.9.1-python3.11"
    assert as_list(server["command"]) == ["prefect", "server", "start", "--host", "0.0.0.0"]
    assert "4200:4200" in [str(port) for port in server["ports"]]
    assert env_of(server)["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert "http://localhost:4200/api/health" in health_test(server)


def test_worker_runs_the_thresher_pool_against_the_server_and_the_catalog():
    services = compose()["services"]
    worker = services["worker"]
    argv = as_list(worker.get("entrypoint")) + as_list(worker.get("command"))
    assert argv[:3] == ["prefect", "worker", "start"]
    assert argv[argv.index("--pool") + 1] == "thresher"
    assert argv[argv.index("--type") + 1] == "process"
    assert "--with-healthcheck" in argv

    env = env_of(worker)
    api = urlsplit(env["PREFECT_API_URL"])
    assert (api.scheme, api.hostname, api.port, api.path) == (
        "http",
        "prefect-server",
        4200,
        "/api",
    )
    assert "prefect-server" in services

    catalog = urlsplit(env["THRESHER_CATALOG_URL"])
    pg = env_of(services["catalog-db"])
    assert catalog.scheme == "postgresql+psycopg"
    assert (catalog.hostname, catalog.port) == ("catalog-db", 5432)
    assert catalog.path == "/" + pg["POSTGRES_DB"]
    assert (catalog.username, catalog.password) == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"])
    assert env["HF_HUB_OFFLINE"] == "1"

    assert "thresher-data:/data" in worker["volumes"]
    build = worker["build"]
    assert (COMPOSE_FILE.parent / build["context"]).resolve() == ROOT
    assert (ROOT / build["dockerfile"]).resolve() == DOCKERFILE


def test_worker_healthcheck_asks_the_worker_webserver():
    worker = compose()["services"]["worker"]
    port = env_of(worker).get("PREFECT_WORKER_WEBSERVER_PORT", "8080")  # Prefect's default
    assert f"http://localhost:{port}/health" in health_test(worker)


def test_deploy_is_a_one_shot_setup_step():
    services = compose()["services"]
    deploy = services["deploy"]
    assert deploy["profiles"] == ["setup"]
    assert as_list(deploy.get("entrypoint")) + as_list(deploy["command"]) == ["deploy"]
    assert deploy["image"] == services["worker"]["image"]
    assert deploy.get("pull_policy") == "never", "deploy runs the image the worker builds"
    assert env_of(deploy)["PREFECT_API_URL"] == env_of(services["worker"])["PREFECT_API_URL"]
    assert "worker" in deploy["depends_on"], "the worker creates the pool the deployments use"


def test_every_named_volume_is_declared():
    doc = compose()
    declared = set(doc.get("volumes") or {})
    assert declared == {"thresher-data", "catalog-db", "prefect-db"}
    used = set()
    for service in doc["services"].values():
        for volume in service.get("volumes", []):
            source = volume.get("source") if isinstance(volume, dict) else volume.split(":")[0]
            if source and not source.startswith((".", "/", "~")):
                used.add(source)
    assert used <= declared, f"undeclared volumes: {used - declared}"
    assert used == declared, f"declared but unused: {declared - used}"


# --- Dockerfile ------------------------------------------------------------------------------


def test_dockerfile_base_user_and_entrypoint():
    steps = instructions()
    froms = [args for op, args in steps if op == "FROM"]
    assert froms and froms[0].split()[0] == "python:3.11-slim"
    assert froms[-1].split()[0] == "python:3.11-slim"

    users = [args for op, args in steps if op == "USER"]
    assert users, "the image must not run as root"
    assert users[-1].split(":")[0] not in {"root", "0"}
    assert re.search(r"useradd\b.*--uid 10001\b.*\bthresher\b", " ".join(a for _, a in steps))

    workdirs = [args for op, args in steps if op == "WORKDIR"]
    assert workdirs[-1] == "/app"
    assert json.loads(dict(steps)["ENTRYPOINT"]) == ["thresher"]
    assert json.loads(dict(steps)["CMD"]) == ["--help"]
    assert any(op == "HEALTHCHECK" and "CMD" in args for op, args in steps)


def test_dockerfile_environment():
    env_text = " ".join(args for op, args in instructions() if op == "ENV")
    for setting in (
        "HF_HUB_OFFLINE=1",
        "DO_NOT_TRACK=1",
        "PREFECT_SERVER_ANALYTICS_ENABLED=false",
        "PYTHONUNBUFFERED=1",
    ):
        assert setting in env_text.split(), setting


def test_torch_is_pinned_cpu_only_and_installed_before_the_project():
    runs = [args for op, args in instructions() if op == "RUN"]
    torch = [i for i, cmd in enumerate(runs) if re.search(r"\btorch==", cmd)]
    assert torch, "torch is installed explicitly"
    cmd = runs[torch[0]]
    assert "--index-url https://download.pytorch.org/whl/cpu" in cmd
    assert "torch==2.13.0" in cmd.split()
    project = [
        i for i, cmd in enumerate(runs) if re.search(r"pip install .*-c constraints\.txt \.", cmd)
    ]
    assert project and torch[0] < project[0]
    # the same pin the project itself resolves to
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text().split()


def test_every_copied_path_exists_in_the_build_context():
    copies = [(op, args) for op, args in instructions() if op in {"COPY", "ADD"}]
    assert copies
    copied = set()
    for op, args in copies:
        sources, flags = copy_sources(args)
        if "from" in flags:
            continue  # from another build stage, not the context
        for source in sources:
            assert not re.match(r"^[a-z]+://", source), f"{op} of a URL: {source}"
            matches = glob.glob(source, root_dir=ROOT) if glob.has_magic(source) else [source]
            assert matches and all((ROOT / m).exists() for m in matches), (
                f"{op} {source}: not in the build context {ROOT}"
            )
            copied.add(source.rstrip("/"))
    # what `pip install .` and the deployments need
    for needed in ("pyproject.toml", "constraints.txt", "README.md", "prefect.yaml"):
        assert needed in copied, needed
    for package in ("pipeline", "flows", "data_catalog", "expectations", "training"):
        assert package in copied, package


def test_the_dockerignore_keeps_every_copied_path():
    ignore = DOCKER / "Dockerfile.dockerignore"  # BuildKit reads <Dockerfile>.dockerignore
    patterns = [
        line.strip()
        for line in ignore.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ".venv" in patterns and ".git" in patterns
    for op, args in instructions():
        if op in {"COPY", "ADD"}:
            for source in copy_sources(args)[0]:
                path = source.rstrip("/")
                hit = [p for p in patterns if fnmatch.fnmatch(path, p.removeprefix("**/"))]
                assert not hit, f"{op} {source} is excluded by {hit}"
