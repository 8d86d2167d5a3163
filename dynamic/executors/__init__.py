"""How a unit of work reaches a worker: the layer below the engine and the fix checks.

``child`` is the process every child running user code goes through, ``spares`` the children
started ahead of a check; ``files`` names what a file executor promises, ``local`` runs files
on threads of this process (their workers are its subprocesses), ``ray_tasks`` as Ray tasks.
Nothing here imports the engine, the fix checks or the service (an import-linter contract).
"""
