"""The Kubernetes example (deploy/k8s): the manifests' structure (a
Deployment whose pods are ready on qserve's /health at the port qserve
listens on, a Service onto that port) and the Dockerfile's packages, which
must provide every library qserve links directly (readelf's NEEDED entries,
mapped to Debian's packages by dpkg -S), so a library added to the build
cannot be forgotten in the image. Nothing is applied or built here."""
import os
import pathlib
import re
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("QCC_BIN_DIR", ROOT / "build" / "bin"))
K8S = ROOT / "deploy" / "k8s"
# In debian:bookworm-slim already (apt itself needs them).
BASE = {"libc6", "libgcc-s1", "libstdc++6"}


def test_deployment_is_ready_on_health_and_served_by_the_service():
    docs = list(yaml.safe_load_all((K8S / "qserve.yaml").read_text()))
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"Deployment", "Service"}
    dep, svc = kinds["Deployment"], kinds["Service"]
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (c,) = pod["spec"]["containers"]
    port = c["ports"][0]
    args = c["args"]
    assert args[args.index("--port") + 1] == str(port["containerPort"])
    assert args[args.index("--host") + 1] == "0.0.0.0"
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": port["name"]}
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert svc["spec"]["ports"][0]["targetPort"] == port["name"]


def package_of(path):
    """The Debian package that owns a library: its path as the loader found
    it, or the file it resolves to (OpenBLAS goes through alternatives)."""
    for p in (path, os.path.realpath(path)):
        out = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.split(":")[0]
    return None


def test_dockerfile_installs_what_qserve_links():
    qserve = BIN / "qserve"
    if not qserve.is_file():
        pytest.fail(f"{qserve} missing: build with scripts/build.sh")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                        subprocess.run(["readelf", "-d", str(qserve)], check=True,
                                       capture_output=True, text=True).stdout)
    assert needed, "readelf found no NEEDED entries"
    found = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(
        ["ldd", str(qserve)], check=True, capture_output=True, text=True).stdout, re.M))
    text = (K8S / "Dockerfile").read_text()
    # The RUN line with its continuations joined.
    install = re.search(r"apt-get install[^\n]*", text.replace("\\\n", " ")).group(0)
    listed = set(re.findall(r"\b(lib[\w.+-]+|zlib1g)\b", install))
    missing = {}
    for lib in needed:
        if lib.startswith("ld-linux"):  # the loader: libc6
            continue
        assert lib in found, f"ldd does not find {lib}"
        pkg = package_of(found[lib])
        assert pkg, f"dpkg -S knows no package of {lib} ({found[lib]})"
        if pkg not in BASE and pkg not in listed:
            missing[lib] = pkg
    assert not missing, f"deploy/k8s/Dockerfile does not install {missing}"
    assert "COPY build/bin/qserve /usr/local/bin/qserve" in text
