"""docker/ without a Docker engine: every file, module, flag and port the images and the compose
file name exists in the project (or in the CLI that runs it), and no secret is in the repo."""

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILES = sorted(p for p in DOCKER.glob("Dockerfile*") if p.suffix != ".dockerignore")
SERVICES = {"postgres", "mlflow", "ray-head", "ray-worker", "launcher"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def words(command) -> list[str]:
    """A compose/Dockerfile command (list or string, sh -c included) as shell words."""
    if isinstance(command, list):
        command = " ".join(command)
    if command.startswith("["):
        command = " ".join(yaml.safe_load(command))
    return shlex.split(command.replace("$$", "$").replace("&&", " && "))


def commands(compose: dict) -> dict[str, list[str]]:
    out = {}
    for name, svc in compose["services"].items():
        if svc.get("entrypoint", [None])[:2] == ["sh", "-c"]:
            out[name] = words(svc["entrypoint"][2])
        elif svc.get("command"):
            out[name] = words(svc["command"])
    for path in DOCKERFILES:
        for word, args in instructions(path):
            if word in ("CMD", "ENTRYPOINT", "RUN"):
                out[f"{path.name}:{word}:{args[:30]}"] = words(args)
    return out


def ray_start_flags() -> set[str]:
    from ray.scripts.scripts import start

    return {opt.split("=")[0] for p in start.params for opt in (*p.opts, *p.secondary_opts)}


def mlflow_server_flags() -> set[str]:
    from mlflow.cli import server

    return {opt for p in server.params for opt in (*p.opts, *p.secondary_opts)}


def test_compose_parses_with_the_services_and_its_builds_exist(compose):
    assert set(compose["services"]) == SERVICES
    builds = {
        (s["build"]["context"], s["build"]["dockerfile"])
        for s in compose["services"].values()
        if "build" in s
    }
    for context, dockerfile in builds:
        assert (DOCKER / context).resolve() == ROOT
        assert (ROOT / dockerfile).is_file(), dockerfile
    assert {Path(dockerfile).name for _, dockerfile in builds} == {p.name for p in DOCKERFILES}


def test_every_bind_mounted_file_exists_and_named_volumes_are_declared(compose):
    for name, svc in compose["services"].items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (DOCKER / source).exists(), f"{name}: {source}"
            else:
                assert source in compose["volumes"], f"{name}: volume {source} not declared"


def dockerignore_allows(dockerfile: Path, source: str) -> bool:
    """The `*` + `!path` allow-list next to the Dockerfile lets `source` into the context."""
    ignore = dockerfile.with_name(dockerfile.name + ".dockerignore")
    if not ignore.exists():
        return True
    allowed = [line[1:].rstrip("/") for line in ignore.read_text().splitlines() if line.startswith("!")]
    return any(source.rstrip("/") == a or source.startswith(a + "/") for a in allowed)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_every_copy_source_exists_and_is_in_the_build_context(dockerfile):
    copies = [args.split() for word, args in instructions(dockerfile) if word == "COPY"]
    assert copies
    for args in copies:
        for source in [a for a in args[:-1] if not a.startswith("--")]:
            assert (ROOT / source).exists(), f"{dockerfile.name}: COPY {source}"
            assert dockerignore_allows(dockerfile, source), f"{dockerfile.name}: {source} is .dockerignored"


def test_the_entrypoint_script_is_copied_where_it_runs_and_is_executable():
    steps = instructions(DOCKER / "Dockerfile.mlflow")
    (entry,) = [yaml.safe_load(args) for word, args in steps if word == "ENTRYPOINT"]
    copied = {args.split()[-1]: args.split()[0] for word, args in steps if word == "COPY"}
    assert copied[entry[0]] == "docker/mlflow-server.sh"
    mode = subprocess.run(
        ["git", "ls-files", "-s", "docker/mlflow-server.sh"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()[0]
    assert mode == "100755"


def test_every_python_module_they_run_exists_in_the_project(compose):
    modules = set()
    for argv in commands(compose).values():
        modules |= {argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "-m" and argv[i - 1] == "python"}
    assert "sweeps.launch" in modules
    for module in modules:
        path = ROOT / (module.replace(".", "/") + ".py")
        assert path.is_file() or (ROOT / module.replace(".", "/") / "__main__.py").is_file(), module


def test_ray_and_mlflow_commands_use_flags_their_clis_have(compose):
    ray_flags, mlflow_flags = ray_start_flags(), mlflow_server_flags()
    found = 0
    for where, argv in commands(compose).items():
        for i, w in enumerate(argv[:-1]):
            if w == "ray" and argv[i + 1] == "start":
                flags = [a.split("=")[0] for a in argv[i + 2 :] if a.startswith("--")]
                flags = flags[: next((j for j, f in enumerate(flags) if f == "--ray-address"), len(flags))]
                assert set(flags) <= ray_flags, (where, set(flags) - ray_flags)
                found += 1
    assert found == 3  # head, worker, launcher
    script = (DOCKER / "mlflow-server.sh").read_text().replace("\\\n", " ")
    call = script[script.index("exec mlflow server") :]
    flags = set(re.findall(r"(--[a-z-]+)", call))
    assert flags <= mlflow_flags, flags - mlflow_flags


def test_the_launch_command_is_a_valid_launch_of_the_default_study(compose, tmp_path):
    from sweeps.run.launch import overrides_of, parse_args
    from sweeps.study import load_study

    env = dict(line.split("=", 1) for line in (DOCKER / "env.example").read_text().splitlines()
               if line and not line.startswith("#"))  # fmt: skip
    default = compose["services"]["launcher"]["environment"]["STUDY"]
    assert default == "${STUDY:-" + env["STUDY"] + "}"
    argv = commands(compose)["launcher"]
    assert argv[-1] == "$@"  # `docker compose run --rm launcher --set ...` appends overrides
    launch = argv[argv.index("sweeps.launch") + 1 : -1]
    launch = [env["STUDY"] if a == "${STUDY}" else a for a in launch]
    assert (ROOT / env["STUDY"]).is_file()
    # the default is a GPU study of the paper: it reads token shards (docs/cluster.md, step 3)
    (tmp_path / "meta.json").write_text('{"vocab_size": 32000, "dtype": "uint16"}')
    for split in ("train", "val"):
        (tmp_path / f"{split}_000.bin").write_bytes(bytes(range(16)))
    launch.append(f"--set=trial.data.path={tmp_path}")
    study = load_study(ROOT / launch[0], overrides_of(parse_args(launch)))
    assert study.name == "paper_small" and study.resources.gpus == 1
    assert study.backend == "ray" and study.ray.address == "auto"
    assert study.mlflow_uri() == "http://mlflow:5000"
    assert study.storage_url().startswith("postgresql+psycopg2://satsweep@postgres:5432/")


def test_ports_are_consistent_and_only_mlflow_is_published_on_loopback(compose):
    services = compose["services"]
    published = {name: svc["ports"] for name, svc in services.items() if "ports" in svc}
    assert published == {"mlflow": ["127.0.0.1:5000:5000"]}
    # MLflow: the script's port, the image's EXPOSE, the healthcheck and every client URI agree
    script = (DOCKER / "mlflow-server.sh").read_text()
    assert "--port 5000" in script
    assert ("EXPOSE", "5000") in instructions(DOCKER / "Dockerfile.mlflow")
    assert "127.0.0.1:5000/health" in " ".join(services["mlflow"]["healthcheck"]["test"])
    text = COMPOSE.read_text()
    assert set(re.findall(r"http://mlflow:(\d+)", text)) == {"5000"}
    # Ray: the head's --port is the port every other node joins
    head = words(services["ray-head"]["command"])
    (port,) = [a.split("=")[1] for a in head if a.startswith("--port=")]
    joins = re.findall(r"--address=([\w.-]+):(\d+)", text)
    assert len(joins) == 2 and set(joins) == {("ray-head", port)}
    assert "--dashboard-host=127.0.0.1" in head
    # PostgreSQL: the default port in every URL
    urls = re.findall(r"postgresql\+psycopg2://[^\s\"]+", text + script)
    assert urls and all(":5432/" in u for u in urls), urls


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in out.splitlines() if (ROOT / f).is_file()]


def test_no_password_or_token_literal_in_the_repository(compose):
    # secrets reach the services only by interpolation from docker/.env, which git ignores
    assert subprocess.run(["git", "check-ignore", "-q", "docker/.env"], cwd=ROOT).returncode == 0
    for name, svc in compose["services"].items():
        env = svc.get("environment", {})
        for key in ("PGPASSWORD", "POSTGRES_PASSWORD", "RAY_AUTH_TOKEN"):
            if key in env:
                assert re.fullmatch(r"\$\{" + key.replace("POSTGRES_", "PG") + r":\?[^}]+\}", env[key]), (
                    name,
                    key,
                )
    example = (DOCKER / "env.example").read_text()
    assert re.search(r"^PGPASSWORD=$", example, re.M) and re.search(r"^RAY_AUTH_TOKEN=$", example, re.M)
    url_with_password = re.compile(r"\b(?:postgres(?:ql)?(?:\+\w+)?|mysql|redis)://[^/\s:@\"']+:[^@\s/\"']+@")
    assignment = re.compile(
        r"(?<![{\w])(?:PGPASSWORD|POSTGRES_PASSWORD|RAY_AUTH_TOKEN)\s*[=:]\s*['\"]?(?![$'\"\s]|$)\S"
    )
    assert url_with_password.search("postgresql+psycopg2://satsweep:hunter2@postgres:5432/optuna")
    assert assignment.search("PGPASSWORD=hunter2") and assignment.search("  POSTGRES_PASSWORD: hunter2")
    assert not assignment.search("PGPASSWORD=") and not assignment.search("PGPASSWORD: ${PGPASSWORD:?set}")
    for path in tracked_files():
        if path.suffix in (".png", ".gz", ".zip", ".pt") or path == Path(__file__):
            continue
        text = path.read_text(errors="ignore")
        assert not url_with_password.search(text), f"{path}: a URL with a password"
        for line in text.splitlines():
            assert not assignment.search(line), f"{path}: {line.strip()}"


def test_docker_compose_accepts_the_file_and_refuses_it_without_secrets():
    """Where the compose plugin is installed (it is not on every CI machine): its own validation."""
    import os
    import shutil

    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode:
        pytest.skip("docker compose is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("PGPASSWORD", "RAY_AUTH_TOKEN")}
    cmd = [docker, "compose", "-f", str(COMPOSE), "--env-file", str(DOCKER / "env.example"), "config", "-q"]
    assert subprocess.run(cmd, env=env, capture_output=True).returncode != 0  # empty secrets: refused
    ok = subprocess.run(
        cmd, env={**env, "PGPASSWORD": "x", "RAY_AUTH_TOKEN": "y"}, capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
