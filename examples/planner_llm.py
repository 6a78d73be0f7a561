"""Two agents: an LLM planner (through LiteLLM) guides the tiny agent that RL trains.

:class:`~darwin.workflows.planner.PlannerWorkflow` puts a planner beside the acting agent: before the
first step and whenever a sub-goal stalls (the screen has not changed for ``stall_steps``
steps) or has taken ``steps_per_subgoal`` steps, the planner sees the goal and the screen and
writes the remaining sub-goals; the acting agent sees ``Sub-goal: <the first one>`` under the
goal. Here the planner is a hosted model (``gpt-4o-mini`` through LiteLLM; any LiteLLM model
or OpenAI-compatible server works: set ``api_base`` for a local vLLM) and the acting agent is
the tiny warm start, trained by PPO as in ``examples/spa_bench.py``.

Every plan is a turn of the ``"planner"`` agent in the trajectory and the run database
(``steps.agent``, ``steps.message``); the learner trains ``learner.trained_agent`` (the acting
agent, ``"actor"``) and never the planner's words.

Needs a key::

    export OPENAI_API_KEY=...
    darwin run examples/planner_llm.py --dry-run       # validates without a key (no request is sent)
    darwin run examples/planner_llm.py
    darwin run examples/planner_llm.py --set 'workflow.kwargs.planner.model="gemini/gemini-2.5-flash"' \\
        --set 'workflow.kwargs.planner.api_key_env="GEMINI_API_KEY"'
    darwin run examples/planner_llm.py --set 'workflow.kwargs.planner.api_base="http://gpu-box:8000/v1"' \\
        --set 'workflow.kwargs.planner.model="openai/Qwen2.5-VL-7B-Instruct"'

Pitfalls: without the key the first planner call ends each episode as an error naming the
variable (a run of such episodes trains on nothing); a planner server that stays down ends
episodes as infrastructure truncations, which are never rewards. The planner's calls cost
money: ``max_plans`` caps them per episode phase.
"""

from __future__ import annotations

from pathlib import Path

from darwin.components import ComponentSpec
from darwin.run.config import ExperimentConfig
from darwin.run.load import load_experiment


def build(preset: str) -> ExperimentConfig:
    """``examples/spa_bench.py``'s ``preset`` with an LLM planner beside the trained agent."""
    base = load_experiment(Path(__file__).with_name("spa_bench.py"), preset)
    planner = {"model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY", "max_tokens": 200, "temperature": 0.0}
    return ExperimentConfig.model_validate(
        {
            **base.model_dump(),
            "name": f"planner_llm{'' if preset == 'default' else '_' + preset}",
            "workflow": ComponentSpec(
                name="planner",
                kwargs={
                    "planner": planner,
                    "planner_config": {"steps_per_subgoal": 4, "stall_steps": 2, "max_plans": 4},
                },
            ),
            "notes": "examples/spa_bench.py with gpt-4o-mini as a planner of sub-goals for the trained tiny agent.",
        }
    )
