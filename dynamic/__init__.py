"""The GRIST engine: confirm possible sites by running the program on searched inputs.

Modules, one job each:

* ``engine``: ``EngineOptions`` and ``confirm`` (the parent side: worker subprocesses, limits,
  cancellation, error verdicts, replay of every witness in a fresh process, reproducers);
* ``worker``: the child process (``python -m grist_lsp.dynamic.worker``) that runs user code;
* ``entries``: how a program is entered (explicit entry, pytest test, script, probes);
* ``tracing``: the ``TorchFunctionMode`` that maps torch calls to Sites, substitutes inputs
  and parameters, and applies the oracle;
* ``search``: the per-site search (mutations, signed-gradient and Newton steps, restarts,
  parameter moves);
* ``witness``: shrinking, and tensors <-> ``TensorValue`` (inline or ``.pt`` payloads);
* ``replay``: ``replay(site, witness, text=None)``, re-running one witness in-process;
* ``reproducer`` / ``verify``: pytest reproducers and verified fixes (built on ``replay``).

``Witness.entry`` is ``script:<file>``, ``entry:<file>:<function>``,
``test:<test file>::<test>`` or ``probe:<file>:<Name>[(ctor args)]``. ``Witness.inputs`` are
keyed by parameter name (entry and probe) or ``<file name>:<line>:<factory>#<occurrence>``
(script and test: tensors made by ``torch.randn``/``tensor``/``from_numpy``/samplers in user
code, or ``operand`` for a tensor first seen as an operand without having been made under the
mode). ``Witness.weight_deltas`` are keyed ``param#<k>`` (k-th parameter in order of first use).
"""
