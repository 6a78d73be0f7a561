"""The benchmarks behind ``darwin bench`` and docs/benchmarks.md, one module per benchmark.

- ``sim``: SimPhone memory, cold start and steps/s (``darwin bench sim``)
- ``adb``: commands/s and screenshots through a real adb server (``darwin bench adb``)
- ``ray_phones``: SimPhones in process vs on two Ray nodes, and the Ray hop (``darwin bench ray``)
- ``rollout``: async vs sync rollout under heavy-tailed latency (``darwin bench rollout``)
- ``model``: the tiny VLM's build, forward and generate latency (``darwin bench model``)
- ``policy``: HFPolicy sampling speed per batch size (``darwin bench policy``)
- ``learner``: one LocalLearner update, time per stage (``darwin bench learner``)
- ``results``: the results as JSON lines, as the commands print them

Nothing is imported here: the model, policy and learner benchmarks import torch and the
Ray one starts a cluster, so each command imports its module only when it runs.
"""
