"""Installs the top-level folders under one `trainwarden` namespace, discovering their subpackages.

Only the roots are named here (a folder per process-facing package); every subpackage below them is
found by `find_packages`, so a new one cannot be left out of the wheel or the Docker image.
"""

from setuptools import find_packages, setup

ROOTS = {
    "trainwarden": "trainwarden",
    "trainwarden.core": "core",
    "trainwarden.sdk": "sdk",
    "trainwarden.faults": "faults",
    "trainwarden.events": "events",
    "trainwarden.agent": "agent",
    "trainwarden.policies": "policies",
    "trainwarden.workers": "workers",
    "trainwarden.bot": "bot",
    "trainwarden.remote": "remote",
    "trainwarden.archive": "archive",
    "trainwarden.ops": "ops",
}

packages: list[str] = []
package_dir: dict[str, str] = {}
for name, folder in ROOTS.items():
    package_dir[name] = folder
    packages += [name, *(f"{name}.{sub}" for sub in find_packages(folder))]

setup(packages=packages, package_dir=package_dir)
