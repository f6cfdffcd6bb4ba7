"""``python -m qconform``: the ``qconform`` command, for an environment whose scripts folder is not on
PATH (a ``pip install --target`` tree, a venv used without activating it)."""
from qconform.cli import run

if __name__ == "__main__":
    run()
